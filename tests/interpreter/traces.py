"""What two interpreters must agree on for one run, read from each one's own record of it.

A run's trace is:
- `path`: the states entered outside Map iterations, in order (a sequence: the machine's control flow);
- `members`: how many times each state inside a Map's item processor was entered (iterations run
  concurrently, so their order is not part of the contract);
- `status` and `error`: how the execution ended and the error name it failed with;
- `waves`: the ledger's wave attempts (state, group, iteration, attempt, status), sorted — what the real
  handlers recorded while the interpreter drove them (retries show up here: neither interpreter enters a
  state again to retry it);
- `decisions`: the decisions the decide function read and recorded (state, value, source);
- `failed_state`: the state the run's recorded failure names (the report's `error.state`).

moto's side comes from `GetExecutionHistory` (`*StateEntered` events); aws-local-stepfunctions' side from its
event log (`StateEntered`), as `harness.mjs` summarizes it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


def member_states(definition: dict[str, Any]) -> dict[str, str]:
    """Every state inside a Map's item processor → the Map's name."""
    found: dict[str, str] = {}
    for name, state in definition.get("States", {}).items():
        processor = state.get("ItemProcessor") or state.get("Iterator")
        if processor:
            found.update(dict.fromkeys(processor.get("States", {}), name))
            found.update(member_states(processor))
    return found


@dataclass(frozen=True)
class Trace:
    path: tuple[str, ...]
    members: dict[str, int]
    status: str
    error: str | None
    waves: tuple[tuple[Any, ...], ...]
    decisions: tuple[tuple[Any, ...], ...] = ()
    failed_state: str | None = None

    def differences(self, other: Trace) -> list[str]:
        """Each field where `other` differs, as a line naming both values (empty: the same run)."""
        lines = []
        for field in ("status", "error", "failed_state", "path", "members", "waves", "decisions"):
            mine, theirs = getattr(self, field), getattr(other, field)
            if mine != theirs:
                lines.append(f"{field}: {mine!r} != {theirs!r}")
        return lines


def trace_of(entered: Iterable[str], definition: dict[str, Any], status: str, error: str | None,
             report: dict[str, Any]) -> Trace:
    members = member_states(definition)
    names = list(entered)
    waves = sorted((w["state"], w["group"] or "", w["iteration"] or 0, w["attempt"], w["status"])
                   for w in report["waves"])
    return Trace(
        path=tuple(n for n in names if n not in members),
        members=dict(sorted(Counter(n for n in names if n in members).items())),
        status=status,
        error=error or None,
        waves=tuple(waves),
        decisions=tuple(sorted((d["state"], d["decision"] or "", d["source"] or "") for d in report["decisions"])),
        failed_state=(report.get("error") or {}).get("state"),
    )


def entered_in_history(events: Iterable[dict[str, Any]]) -> list[str]:
    """State names in the order a Step Functions execution history entered them."""
    return [e["stateEnteredEventDetails"]["name"] for e in events if str(e.get("type", "")).endswith("StateEntered")]


def entered_in_event_log(events: Iterable[dict[str, Any]]) -> list[str]:
    """State names in the order aws-local-stepfunctions' event log entered them (Map iterations included)."""
    return [e["name"] for e in events if e.get("type") == "StateEntered"]
