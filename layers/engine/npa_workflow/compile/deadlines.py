"""Per-wave deadlines: the defaults, and the number a run's execution input carries.

A deployed machine is compiled once and runs many runs, so the per-run deadline (`maxWaitSeconds` of a run
request, `submit --max-wait-seconds`) cannot be a number in the definition: wave Tasks read it with
`TimeoutSecondsPath` from `$.run.deadline` of the execution input. A state's own `timeoutSeconds` is fixed
in the definition and wins. Imported by the light engine modules too: no dependencies.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

# Long enough for GPU training: a wave may wait a week by default (Standard executions last up to a
# year; the watch's heartbeat, not this deadline, detects a dead watch).
DEFAULT_MAX_WAIT_SECONDS = 7 * 24 * 3600
# "No deadline": TimeoutSeconds must be a positive integer, so the longest a Standard execution can live.
UNBOUNDED_SECONDS = 365 * 24 * 3600
DEFAULT_HEARTBEAT_SECONDS = 300


def input_deadline(max_wait_seconds: int, heartbeat_seconds: int) -> int:
    """The `$.run.deadline` of an execution: 0 = unbounded; never at or below the compiled HeartbeatSeconds
    (Step Functions requires HeartbeatSeconds < TimeoutSeconds), so a shorter request is raised to heartbeat + 1."""
    seconds = UNBOUNDED_SECONDS if max_wait_seconds <= 0 else min(max_wait_seconds, UNBOUNDED_SECONDS)
    if heartbeat_seconds > 0:
        seconds = max(seconds, heartbeat_seconds + 1)
    return seconds


def fixed_deadlines(definition: dict[str, Any]) -> Iterator[tuple[str, int]]:
    """(state name, TimeoutSeconds) of every state of a definition with a fixed deadline, Map processors and
    Parallel branches included: a state's own `timeoutSeconds`, a trigger's poll bound."""
    for name, state in definition.get("States", {}).items():
        if isinstance(state.get("TimeoutSeconds"), int):
            yield name, state["TimeoutSeconds"]
        for inner in (state.get("ItemProcessor"), state.get("Iterator"), *state.get("Branches", ())):
            if isinstance(inner, dict):
                yield from fixed_deadlines(inner)


def retention_problem(max_wait_seconds: int, definition: dict[str, Any],
                      retention_days: int) -> tuple[str, str, str] | None:
    """(where, what, fix) when one wave of a run could wait as long as the stack keeps the run's records, else
    None. AWS facts: an S3 lifecycle expiration counts days from the object's creation, not its last read, so
    `runs/<id>/spec.yaml` (frozen when the run starts) is deleted `retentionDays` after the start however alive
    the run is; DynamoDB TTL deletes an item once its `expires_at` passed. A wave waiting that long would come
    back to a run whose frozen spec is gone."""
    keep = retention_days * 86400
    fix = f"a deadline under {keep} s, or a deployment with a longer retention (-c retentionDays=N)"
    expire = (f"not shorter than the stack's retentionDays={retention_days}: the run's runs/ objects (S3 lifecycle, "
              "counted from creation) would expire while it waits")
    wait = UNBOUNDED_SECONDS if max_wait_seconds <= 0 else max_wait_seconds
    if wait >= keep:
        told = f"{max_wait_seconds} ({wait / 86400:g} days)" if max_wait_seconds > 0 else "0 (no deadline: a year)"
        return "options.maxWaitSeconds", f"a wave's deadline maxWaitSeconds={told} is {expire}", fix
    for name, seconds in fixed_deadlines(definition):
        if seconds >= keep:
            return f"states.{name}", f"state {name!r} may wait {seconds} s ({seconds / 86400:g} days), {expire}", fix
    return None
