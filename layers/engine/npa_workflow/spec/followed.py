"""What the language does not follow where it stands: keys the walk ignores, and states no path reaches.

Pure. The rules are the language's (docs/language.md, "States"), the ones `graph` draws as "(ignored)" edges:

- a terminal state stops the walk after its own step: its `next` and `transitions` are never followed (a leaf
  loop is the exception: after its loop, its edges are followed even when terminal);
- a sequence (looped or not) or a parallel group follows only its `next` once its body is done: `transitions`
  on it are never evaluated (a branch belongs on a state after it, which reads the decision its body wrote).

A state is reached from `initial` through the edges that are followed: `next`, a transition's `goto`, a
sequence's or group's members. One reached only through an ignored edge, or through none, never runs.

Validation turns each finding into a warning (an error under `--strict`) naming where to put the key.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from npa_workflow.spec.model import State

__all__ = ["Ignored", "ignored_keys", "unreachable_states"]


@dataclass(frozen=True)
class Ignored:
    state: str
    key: str  # "next" or "transitions"
    message: str
    hint: str


def _stops(st: State) -> bool:
    return st.terminal and st.loop is None


def _container(st: State) -> str:
    if st.parallel:
        return "parallel group"
    return "looped sequence" if st.loop is not None else "sequence"


def ignored_keys(states: Mapping[str, State]) -> Iterator[Ignored]:
    for name, st in states.items():
        if _stops(st):
            for key in ("next", "transitions"):
                if getattr(st, key):
                    verb = "are" if key == "transitions" else "is"
                    yield Ignored(name, key, f"'{name}' is terminal: its {key} {verb} never followed",
                                  f"remove {key}, or remove 'terminal: true' if the run goes on after '{name}'")
        elif st.transitions and (st.parallel or st.sequence):
            after = f"'{st.next}'" if st.next else "a router state"
            yield Ignored(name, "transitions",
                          f"transitions on a {_container(st)} are never followed (after its body, only its next "
                          "is)",
                          f"move them to {after} that '{name}' goes next to: it branches on the decision "
                          f"'{name}''s body wrote (e.g. `route: {{transitions: [...], next: ...}}` and "
                          f"`{name}: {{next: route}}`)")


def _followed(st: State) -> list[str]:
    members = list(st.sequence or st.parallel)
    if _stops(st):
        return members
    if st.parallel or st.sequence:
        return members + ([st.next] if st.next else [])
    return members + [t.goto for t in st.transitions if t.goto] + ([st.next] if st.next else [])


def unreachable_states(states: Mapping[str, State], initial: str | None) -> list[str]:
    """States no followed edge from `initial` reaches, in spec order."""
    if not initial or initial not in states:
        return []
    reached, todo = {initial}, [initial]
    while todo:
        for target in _followed(states[todo.pop()]):
            if target in states and target not in reached:
                reached.add(target)
                todo.append(target)
    return [name for name in states if name not in reached]
