"""Secret values out of everything the engine stores or prints: one function, used where text enters storage.

A failing step's log tail travels into the ledger (wave and run `error`), `report.json`, the handlers'
log and the CLI's output. The executors redact it when they build the failure message (the one place a
job's output enters the engine), with the values of the secrets that job was given.

What is replaced by `[redacted:NAME]`: the exact value and its common encodings — standard and URL-safe
base64 (with and without padding), base32, URL-encoding (`quote` and `quote_plus`) and hex — these two in any
letter case (`%2f` or `%2F`, `ab12` or `AB12`) — the JSON-escaped form (ASCII-only or not), Python's `repr`
escapes and HTML escaping. A value shorter than `MIN_SECRET_LENGTH` characters is not searched for (it would
shred ordinary text); such a secret is refused at `--secret-env` time instead of silently left in.

The local job wrapper (standard library only, run isolated) loads this file by its path to redact a job's log
as it writes it: this module imports nothing but the standard library.
"""

from __future__ import annotations

import base64
import html
import json
import os
import re
from collections.abc import Iterable, Mapping
from urllib.parse import quote, quote_plus

MIN_SECRET_LENGTH = 4


def _forms(value: str) -> tuple[set[str], set[str]]:
    """(forms matched exactly, forms matched in any letter case: hex and percent-escapes, whose digits a-f are
    written in either case)."""
    raw = value.encode("utf-8")
    exact = {value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1], repr(value)[1:-1],
             html.escape(value)}
    for encoder in (base64.b64encode, base64.urlsafe_b64encode, base64.b32encode):
        encoded = encoder(raw).decode("ascii")
        exact |= {encoded, encoded.rstrip("=")}
    any_case = {raw.hex(), quote(value, safe=""), quote_plus(value, safe="")} - exact
    return ({f for f in exact if len(f) >= MIN_SECRET_LENGTH},
            {f for f in any_case if len(f) >= MIN_SECRET_LENGTH})


class Redactor:
    """Replaces the values (and their encodings) of named secrets in text."""

    def __init__(self, secrets: Mapping[str, str]) -> None:
        pairs: dict[str, str] = {}
        folded: dict[str, str] = {}  # lower-cased form -> name, for the forms matched in any case
        for name, value in secrets.items():
            if value and len(value) >= MIN_SECRET_LENGTH:
                exact, any_case = _forms(value)
                for form in exact:
                    pairs.setdefault(form, name)
                for form in any_case:
                    folded.setdefault(form.lower(), name)
        # Longest first: a value that contains another secret's value is replaced whole (an alternation tries
        # its branches in order at each position).
        branches = [(form, False) for form in pairs] + [(form, True) for form in folded]
        branches.sort(key=lambda branch: -len(branch[0]))
        self._pairs = sorted([*pairs.items(), *folded.items()], key=lambda kv: -len(kv[0]))
        self._exact, self._folded = pairs, folded
        self._pattern = re.compile("|".join(f"(?i:{re.escape(f)})" if icase else re.escape(f)
                                            for f, icase in branches)) if branches else None

    def __bool__(self) -> bool:
        return bool(self._pairs)

    def _name(self, match: re.Match[str]) -> str:
        text = match.group(0)
        return f"[redacted:{self._exact.get(text) or self._folded.get(text.lower(), 'secret')}]"

    def __call__(self, text: str) -> str:
        if self._pattern is None:
            return text
        return self._pattern.sub(self._name, text)


def from_environment(names: Iterable[str], environ: Mapping[str, str] | None = None) -> Redactor:
    """A redactor for the secrets `names` as this process's environment holds them (the local runtime)."""
    environ = os.environ if environ is None else environ
    return Redactor({n: environ[n] for n in names if environ.get(n)})


def redact(text: str, secrets: Mapping[str, str]) -> str:
    return Redactor(secrets)(text)
