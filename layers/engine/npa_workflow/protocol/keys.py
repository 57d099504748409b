"""Keys the machine and the engine share: loop and group keys in the state data, and the wave key.

The state data names a loop's counter `$.loops.l<n>` and a group's member list `$.groups.g<n>` (n counts the
spec's loop / group states in declaration order), so any spec state name is a safe JSONPath. The engine decodes
counters with the same numbering (`loop_names`) without importing the compiler.

A wave key is a visit's identity in the ledger: the state plus the counters of the loops running at that visit,
`train|outer=1,refine=2` (loop names sorted). It makes a launch idempotent and lets a resumed run replay the waves
that succeeded, so its text form is durable: `WaveKey.format` / `WaveKey.parse` are the one pair that writes and
reads it. `parse` splits at the first `|`, each `,` and each `=`: a state name holding one of them would make
the key ambiguous (the ledger still keys it uniquely; only parsing it back needs `state=`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

LOOP_KEY_PREFIX = "l"
GROUP_KEY_PREFIX = "g"
STATE_SEPARATOR = "|"
COUNTER_SEPARATOR = ","
COUNTER_ASSIGN = "="


def _numbered(prefix: str, names: Iterable[str]) -> dict[str, str]:
    return {name: f"{prefix}{i}" for i, name in enumerate(names, start=1)}


def loop_keys(spec: Any) -> dict[str, str]:
    """Loop state → its counter's key under `$.loops` (`spec`: the spec model; any object with `.states`)."""
    return _numbered(LOOP_KEY_PREFIX, (n for n, s in spec.states.items() if s.loop is not None))


def group_keys(spec: Any) -> dict[str, str]:
    """Group (parallel) state → its member list's key under `$.groups`."""
    return _numbered(GROUP_KEY_PREFIX, (n for n, s in spec.states.items() if s.parallel))


def loop_names(spec: Any) -> dict[str, str]:
    """`l<n>` → loop state name: how the engine reads the counters a Task sends."""
    return {key: name for name, key in loop_keys(spec).items()}


def decode_loops(spec: Any, raw: Mapping[str, int] | None) -> dict[str, int]:
    """The counters a Task sends (`{"l1": 2}`) as {loop name: iteration}, only loops that have started (> 0)."""
    names = loop_names(spec)
    return {names[k]: int(v) for k, v in (raw or {}).items() if k in names and int(v) > 0}


@dataclass(frozen=True)
class WaveKey:
    """One visit's identity: a state and the iteration of each loop running at that visit."""

    state: str
    loops: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Frozen, hashable and independent of the caller's dict.
        object.__setattr__(self, "loops", dict(sorted((str(k), int(v)) for k, v in self.loops.items())))

    def __hash__(self) -> int:
        return hash((self.state, tuple(self.loops.items())))

    @property
    def loops_key(self) -> str:
        """`outer=1,refine=2` (`""` outside loops): the ledger keys decisions and watermarks with it."""
        return COUNTER_SEPARATOR.join(f"{name}{COUNTER_ASSIGN}{n}" for name, n in self.loops.items())

    def format(self) -> str:
        counters = self.loops_key
        return self.state + (STATE_SEPARATOR + counters if counters else "")

    def __str__(self) -> str:
        return self.format()

    def label(self) -> str:
        """`train [outer=1,refine=2]`: how reports and the CLI show a wave."""
        counters = self.loops_key
        return self.state + (f" [{counters}]" if counters else "")

    @classmethod
    def parse(cls, text: str, state: str | None = None) -> WaveKey:
        """The key `format` wrote. `state`, when known (the ledger item has it), settles where the state ends."""
        if state is not None and text.startswith(state) and text[len(state):len(state) + 1] in ("", STATE_SEPARATOR):
            sep, counters = text[len(state):len(state) + 1], text[len(state) + 1:]
        else:
            state, sep, counters = text.partition(STATE_SEPARATOR)
        if not state:
            raise ValueError(f"wave key {text!r}: no state")
        loops: dict[str, int] = {}
        if sep:
            for part in counters.split(COUNTER_SEPARATOR):
                name, assign, value = part.partition(COUNTER_ASSIGN)
                if not (name and assign and value.isdigit()):
                    raise ValueError(f"wave key {text!r}: {part!r} is not <loop>=<iteration>")
                loops[name] = int(value)
        return cls(state, loops)
