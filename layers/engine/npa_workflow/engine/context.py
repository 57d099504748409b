"""The ports one engine invocation works with."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from npa_workflow.engine.ports import JobExecutor, ObjectStore, TaskCallbacks
from npa_workflow.engine.runs import RunStore
from npa_workflow.ledger import DynamoLedger


@dataclass
class Engine:
    ledger: DynamoLedger
    runs: RunStore
    store: ObjectStore
    executor: JobExecutor
    callbacks: TaskCallbacks
    # Variables every job gets from the environment it runs in (locally: the embedded AWS endpoint).
    job_env: Mapping[str, str] = field(default_factory=dict)
    cancel_confirm_seconds: float = 60.0
