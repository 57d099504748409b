"""Secret values for `--secret-env NAME`: resolved at launch, never stored in a spec, the state
machine input, the ledger or a log. Locally from the process environment; in the cloud from one
Secrets Manager secret holding a JSON object of NAME → value."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any, Protocol


class SecretSource(Protocol):
    def resolve(self, names: Sequence[str]) -> dict[str, str]: ...

    def values_for_redaction(self) -> dict[str, str]:
        """NAME → value of every secret this source may have handed to a job (what redaction must find)."""
        ...


class SecretMissing(Exception):
    """A named secret has no value. The message names the secret, never a value."""


class SecretUnreadable(Exception):
    """The step-secrets secret is not there to read (deleted, not a JSON object, not readable by this role).
    The message names the secret, never a value."""


# Secrets Manager's answers that say the secret is not there for this caller (not a blip to retry).
_NOT_THERE = frozenset({"ResourceNotFoundException", "AccessDeniedException", "DecryptionFailure",
                        "InvalidRequestException"})


class EnvironmentSecrets:
    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        self._environ = os.environ if environ is None else environ
        self._resolved: dict[str, str] = {}

    def resolve(self, names: Sequence[str]) -> dict[str, str]:
        missing = [n for n in names if not self._environ.get(n)]
        if missing:
            raise SecretMissing("secret(s) not set in the environment: " + ", ".join(missing))
        values = {n: self._environ[n] for n in names}
        self._resolved.update(values)
        return values

    def values_for_redaction(self) -> dict[str, str]:
        # Only what was handed out: the whole environment holds far more than secrets.
        return dict(self._resolved)


class SecretsManagerSecrets:
    def __init__(self, secret_arn: str, client: Any = None) -> None:
        self.secret_arn = secret_arn
        self._client = client
        self._all: dict[str, str] | None = None

    def resolve(self, names: Sequence[str]) -> dict[str, str]:
        if not names:
            return {}
        if self._client is None:
            import boto3

            self._client = boto3.client("secretsmanager")
        body = self._client.get_secret_value(SecretId=self.secret_arn).get("SecretString") or "{}"
        try:
            values = json.loads(body)
        except ValueError:
            raise SecretMissing(f"secret {self.secret_arn} is not a JSON object of NAME: value") from None
        missing = [n for n in names if not isinstance(values, dict) or not values.get(n)]
        if missing:
            raise SecretMissing(f"secret(s) not in {self.secret_arn}: " + ", ".join(missing))
        return {n: str(values[n]) for n in names}

    def presence(self, names: Sequence[str]) -> tuple[list[str], list[str]] | None:
        """(missing, too short to redact) of `names` among the secret's keys, for the inbox's preflight
        (engine.preflight): no value leaves this method. Raises SecretUnreadable when the secret is not there
        to read (deleted, not a JSON object, this role may not read it): the launch could not read it either.
        None when it cannot be read just now (network, throttling): no verdict, the launch says."""
        from npa_workflow.redact import MIN_SECRET_LENGTH

        if self._all is None:
            try:
                self._all = self._read_all()
            except SecretUnreadable:
                raise
            except Exception:  # noqa: BLE001 - a blip of the service: the launch reads it again and says
                return None
        values = self._all
        missing = [n for n in names if not values.get(n)]
        return missing, [n for n in names if values.get(n) and len(values[n]) < MIN_SECRET_LENGTH]

    def _read_all(self) -> dict[str, str]:
        if self._client is None:
            import boto3

            self._client = boto3.client("secretsmanager")
        try:
            body = self._client.get_secret_value(SecretId=self.secret_arn).get("SecretString") or "{}"
        except Exception as exc:
            code = str(getattr(exc, "response", {}).get("Error", {}).get("Code", ""))
            if code in _NOT_THERE:
                raise SecretUnreadable(f"{self.secret_arn} cannot be read ({code})") from None
            raise
        try:
            values = json.loads(body)
        except ValueError:
            values = None
        if not isinstance(values, dict):
            raise SecretUnreadable(f"{self.secret_arn} is not a JSON object of NAME: value")
        return {str(k): str(v) for k, v in values.items()}

    def values_for_redaction(self) -> dict[str, str]:
        """Every value of the step-secrets object (read once per process): a job may have had any of them.
        Unreadable (no permission, no network) → nothing to redact with, never an error of the caller."""
        if self._all is None:
            try:
                self._all = self._read_all()
            except Exception:  # noqa: BLE001 - redaction is best effort on top of never storing values
                return {}
        return dict(self._all)
