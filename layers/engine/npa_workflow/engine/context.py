"""The ports one engine invocation works with."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from npa_workflow.engine.ports import Executions, JobExecutor, Ledger, ObjectStore, TaskCallbacks
from npa_workflow.engine.runs import RunStore


@dataclass
class Engine:
    ledger: Ledger
    runs: RunStore
    store: ObjectStore
    executor: JobExecutor
    callbacks: TaskCallbacks
    # Variables every job gets from the environment it runs in (locally: the embedded AWS endpoint).
    job_env: Mapping[str, str] = field(default_factory=dict)
    cancel_confirm_seconds: float = 60.0
    # The Step Functions control plane (the inbox starts runs with it; functions that only answer tokens
    # never touch it). None: this engine starts no executions.
    executions: Executions | None = None
    # Jobs run on this machine (the local executor: `run`, `serve`): a job of a run without staged code starts in a
    # folder here, so the inbox need not refuse a raw upload that carries none (engine.inbox_code).
    jobs_on_this_machine: bool = False
