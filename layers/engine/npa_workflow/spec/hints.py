""""Did you mean" hints: the closest known name to a misspelt one, for every message that names
a key, a token, a state or a tool."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def closest(word: str, known: Iterable[str]) -> str | None:
    matches = difflib.get_close_matches(word, list(known), n=1, cutoff=0.6)
    return matches[0] if matches else None


def did_you_mean(word: str, known: Iterable[str], *, prefix: str = "") -> str:
    """`did you mean 'PREFIXmatch'?`, or "" when nothing is close."""
    match = closest(word, known)
    return f"did you mean '{prefix}{match}'?" if match is not None else ""
