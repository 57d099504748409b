"""The compiler's options (`CompileOptions`), apart from the compiler: `validate` reads them to run the compiler's
limit checks without importing the compiler for a spec that cannot reach them (`compile/limits.py`).
`compile/asl.py` re-exports them.
"""

from __future__ import annotations

from dataclasses import dataclass

from npa_workflow.compile.deadlines import DEFAULT_HEARTBEAT_SECONDS, DEFAULT_MAX_WAIT_SECONDS
from npa_workflow.compile.history import HISTORY_LIMIT
from npa_workflow.protocol import functions

INLINE_MAP_LIMIT = 40
DISTRIBUTED_MAX_CONCURRENCY = 10_000  # AWS: a Distributed Map runs at most 10,000 child executions at once
# The compiler's default FunctionName of each Task: the slot's placeholder (protocol.functions).
LAUNCH = functions.LAUNCH.placeholder
DECIDE = functions.DECIDE.placeholder
TRIGGER = functions.TRIGGER.placeholder
CLEANUP = functions.CLEANUP.placeholder


@dataclass(frozen=True)
class CompileOptions:
    launch_arn: str = LAUNCH
    decide_arn: str = DECIDE
    trigger_arn: str = TRIGGER
    cleanup_arn: str = CLEANUP
    # Per wave; 0 = unbounded. The default deadline of a run: with `deadline_from_input` each execution
    # may carry its own (`execution_input(max_wait_seconds=...)`); a state's `timeoutSeconds` wins over both.
    max_wait_seconds: int = DEFAULT_MAX_WAIT_SECONDS
    heartbeat_seconds: int = DEFAULT_HEARTBEAT_SECONDS  # the watch pass heartbeats running waves well inside this
    deadline_from_input: bool = True  # wave Tasks read TimeoutSecondsPath from the execution input
    watch_interval_seconds: int = 0  # how often the watch pass polls triggers (the cloud: the watch schedule)
    history_limit: int = HISTORY_LIMIT  # reject a spec whose worst-case history exceeds it (0 = no check)
    retries: int = 0
    retry_interval_seconds: int = 30
    retry_backoff: float = 2.0
    max_infrastructure_recoveries: int = 1
    max_concurrency_cap: int = 0
    inline_map_limit: int = INLINE_MAP_LIMIT
