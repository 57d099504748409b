"""Per-wave deadlines: the defaults, and the number a run's execution input carries.

A deployed machine is compiled once and runs many runs, so the per-run deadline (`maxWaitSeconds` of a run
request, `submit --max-wait-seconds`) cannot be a number in the definition: wave Tasks read it with
`TimeoutSecondsPath` from `$.run.deadline` of the execution input. A state's own `timeoutSeconds` is fixed
in the definition and wins. Imported by the light engine modules too: no dependencies.
"""

from __future__ import annotations

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
