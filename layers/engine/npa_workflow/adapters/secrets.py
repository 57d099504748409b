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


class SecretMissing(Exception):
    """A named secret has no value. The message names the secret, never a value."""


class EnvironmentSecrets:
    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        self._environ = os.environ if environ is None else environ

    def resolve(self, names: Sequence[str]) -> dict[str, str]:
        missing = [n for n in names if not self._environ.get(n)]
        if missing:
            raise SecretMissing("secret(s) not set in the environment: " + ", ".join(missing))
        return {n: self._environ[n] for n in names}


class SecretsManagerSecrets:
    def __init__(self, secret_arn: str, client: Any = None) -> None:
        self.secret_arn = secret_arn
        self._client = client

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
