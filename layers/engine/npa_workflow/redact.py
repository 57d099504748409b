"""Secret values out of everything the engine stores or prints: one function, used where text enters storage.

A failing step's log tail travels into the ledger (wave and run `error`), `report.json`, the handlers'
log and the CLI's output. The executors redact it when they build the failure message (the one place a
job's output enters the engine), with the values of the secrets that job was given.

What is replaced by `[redacted:NAME]`: the exact value and its common encodings — standard and URL-safe
base64 (with and without padding), URL-encoding (`quote` and `quote_plus`), the JSON-escaped form, and
hex. A value shorter than `MIN_SECRET_LENGTH` characters is not searched for (it would shred ordinary
text); such a secret is refused at `--secret-env` time instead of silently left in.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterable, Mapping
from urllib.parse import quote, quote_plus

MIN_SECRET_LENGTH = 4


def _forms(value: str) -> set[str]:
    raw = value.encode("utf-8")
    forms = {value, quote(value, safe=""), quote_plus(value, safe=""), json.dumps(value)[1:-1], raw.hex()}
    for encoder in (base64.b64encode, base64.urlsafe_b64encode):
        encoded = encoder(raw).decode("ascii")
        forms |= {encoded, encoded.rstrip("=")}
    return {f for f in forms if len(f) >= MIN_SECRET_LENGTH}


class Redactor:
    """Replaces the values (and their encodings) of named secrets in text."""

    def __init__(self, secrets: Mapping[str, str]) -> None:
        pairs: dict[str, str] = {}
        for name, value in secrets.items():
            if value and len(value) >= MIN_SECRET_LENGTH:
                for form in _forms(value):
                    pairs.setdefault(form, name)
        # Longest first: a value that contains another secret's value is replaced whole.
        self._pairs = sorted(pairs.items(), key=lambda kv: -len(kv[0]))

    def __bool__(self) -> bool:
        return bool(self._pairs)

    def __call__(self, text: str) -> str:
        for form, name in self._pairs:
            if form in text:
                text = text.replace(form, f"[redacted:{name}]")
        return text


def from_environment(names: Iterable[str], environ: Mapping[str, str] | None = None) -> Redactor:
    """A redactor for the secrets `names` as this process's environment holds them (the local runtime)."""
    environ = os.environ if environ is None else environ
    return Redactor({n: environ[n] for n in names if environ.get(n)})


def redact(text: str, secrets: Mapping[str, str]) -> str:
    return Redactor(secrets)(text)
