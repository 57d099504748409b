"""ASL state names: 1–80 characters, none of the forbidden ones; originals go in `Comment`.

Spec state names are reserved first so they keep their exact names when legal; helper
states are named after their owner (`refine.decide`) and never take a spec state's name.
"""

from __future__ import annotations

import hashlib
import re

MAX_LEN = 80
_FORBIDDEN = re.compile(r"[\s<>{}\[\]?*\"#%\\^|~`$&,;:/\x00-\x1f\x7f-\x9f]")


def is_legal(name: str) -> bool:
    return 0 < len(name) <= MAX_LEN and not _FORBIDDEN.search(name)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]


def sanitize(name: str, room: int = 0) -> str:
    """A legal, deterministic stand-in for `name`, leaving `room` characters for a suffix."""
    limit = MAX_LEN - room
    if is_legal(name) and len(name) <= limit:
        return name
    clean = _FORBIDDEN.sub("_", name) or "_"
    tag = _digest(name)
    if clean == name and len(clean) <= limit:
        return clean
    return f"{clean[: limit - len(tag) - 1]}~{tag}".replace("~", "-")


class NameAllocator:
    def __init__(self, reserved: list[str]) -> None:
        self._used: set[str] = set()
        self._base: dict[str, str] = {}
        for name in reserved:
            self._base[name] = self._claim(sanitize(name, room=16))

    def _claim(self, candidate: str) -> str:
        name, n = candidate, 2
        while name in self._used:
            name = f"{candidate[: MAX_LEN - 6]}.v{n}"
            n += 1
        self._used.add(name)
        return name

    def state(self, spec_name: str, copy: int = 1) -> str:
        base = self._base[spec_name]
        return base if copy == 1 else self._claim(f"{base}.copy{copy}")

    def helper(self, owner_asl_name: str, role: str) -> str:
        return self._claim(sanitize(f"{owner_asl_name}.{role}"))
