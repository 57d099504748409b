"""The small interfaces the engine talks through: jobs (`JobExecutor`), objects (`ObjectStore`), task tokens
(`TaskCallbacks`), the run ledger (`Ledger`) and the Step Functions control plane (`Executions`). The cloud
(S3, DynamoDB, Step Functions, SkyPilot) and the local twin (the same adapters on moto, subprocess jobs)
implement them; the engine imports no AWS SDK, and an adapter turns its SDK's errors into the exceptions here."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from npa_workflow.ledger import (
        DecisionRecord,
        ErrorCategory,
        RunError,
        RunRecord,
        RunStatus,
        Watermark,
        WaveAttempt,
        WaveStatus,
    )
    from npa_workflow.plan.model import PlanStep
    from npa_workflow.render.skypilot import JobDocument

Outcome = Literal[
    "pending", "running", "succeeded", "failed", "infrastructure_failed", "configuration_failed", "cancelled", "lost"
]
TERMINAL_OUTCOMES = frozenset(
    {"succeeded", "failed", "infrastructure_failed", "configuration_failed", "cancelled", "lost"}
)


@dataclass(frozen=True)
class JobRequest:
    """One wave to run: a single step (every wave of a state machine is one job)."""

    name: str
    step: PlanStep
    env: Mapping[str, str]  # engine variables for the job (run id, state, attempt, AWS endpoint locally)
    # The SkyPilot job as data (render.JobDocument, named `name`): a SkyPilot executor writes it as YAML once, with
    # the secrets' values, and sends that. None: a job no SkyPilot executor is given (a local executor's tests).
    document: JobDocument | None = None
    secret_names: tuple[str, ...] = ()
    workdir: Path | None = None  # local jobs run here (the spec's folder)
    code_uri: str = ""  # the run's staged code (render.code): a local job starts in a checkout of it, as a task does

    @property
    def task_yaml(self) -> str:
        """The document as `npa-workflow render` shows it (secrets by name), written when asked: "" without one."""
        return self.document.text() if self.document is not None else ""


@dataclass(frozen=True)
class Submission:
    job_id: str | None = None
    request_id: str | None = None  # asynchronous schedulers answer with a request first


@dataclass(frozen=True)
class TrackedJob:
    key: str
    job_id: str | None
    request_id: str | None


@dataclass(frozen=True)
class Observation:
    outcome: Outcome
    job_id: str | None = None
    message: str = ""
    started_at: str | None = None
    ended_at: str | None = None


class SchedulerUnreachable(Exception):
    """`observe` could not reach the scheduler (connection refused, timeouts, HTTP 503 past the retries, or this
    invocation's budget spent). `observations` holds what was read before, and every other job as "pending":
    an outage says nothing about the jobs, so the watch fails none of them for it (their own deadlines do)."""

    def __init__(self, message: str, observations: dict[str, Observation]) -> None:
        super().__init__(message)
        self.observations = observations


class JobExecutor(Protocol):
    def submit(self, job: JobRequest) -> Submission: ...

    def observe(self, jobs: list[TrackedJob]) -> dict[str, Observation]:
        """One call for many jobs, keyed by `TrackedJob.key`; raises `SchedulerUnreachable` (with what it read)
        when the scheduler cannot be reached."""
        ...

    def find_by_name(self, name: str) -> list[str]: ...

    def cancel(self, job_ids: list[str]) -> None: ...

    def confirm_cancelled(self, job_ids: list[str], timeout_seconds: float) -> bool: ...


class SubmitError(Exception):
    """The scheduler refused or could not take the job. `category` picks the retry budget;
    `unknown` means the request may have reached the scheduler: the job must be reconciled by
    name, never submitted again blindly."""

    def __init__(self, message: str, category: Literal["configuration", "infrastructure", "unknown"]) -> None:
        super().__init__(message)
        self.category = category


@dataclass(frozen=True)
class Listing:
    count: int
    sample: list[str] = field(default_factory=list)


class StoreAccessDenied(Exception):
    """The store refused to read `uri` (S3 403: the caller's role lacks the permission, or a bucket
    policy/KMS key denies it). A wave whose output cannot be read fails alone; other waves go on."""

    def __init__(self, uri: str, operation: str, detail: str = "") -> None:
        super().__init__(f"access denied reading {uri} ({operation}){': ' + detail if detail else ''}")
        self.uri = uri
        self.operation = operation


class ObjectTooLarge(Exception):
    """The object is larger than its reader accepts (`ObjectStore.get`'s `max_bytes`); its body was not read."""

    def __init__(self, uri: str, size: int) -> None:
        super().__init__(f"{uri} is {size} bytes")
        self.uri = uri
        self.size = size


class ObjectStore(Protocol):
    def get(self, uri: str, max_bytes: int | None = None) -> bytes | None:
        """The object's body, or None when it does not exist. With `max_bytes`, a larger object raises
        `ObjectTooLarge` before its body is read (what a caller holding it in memory needs)."""
        ...

    def get_version(self, uri: str, version_id: str) -> bytes | None:
        """That version of the object (an S3 event names the version it is about), or None when it is gone."""
        ...

    def put(self, uri: str, body: bytes) -> None: ...

    def exists(self, uri: str) -> bool:
        """An object with exactly this key exists."""
        ...

    def event_key(self, bucket: str, key: str) -> str:
        """The real key an S3 event's key (URL-encoded by AWS, raw from moto) stands for."""
        ...

    def count(self, prefix_uri: str, at_least: int) -> Listing:
        """Count keys under a prefix, stopping once `at_least` are seen."""
        ...

    def non_empty(self, uri: str) -> bool:
        """An object with size > 0, or for a `/`-terminated prefix a first object with size > 0."""
        ...


class TaskCallbacks(Protocol):
    def succeed(self, token: str, output: Mapping[str, object]) -> bool: ...

    def fail(self, token: str, error: str, cause: str) -> bool: ...

    def heartbeat(self, token: str) -> bool: ...


class Ledger(Protocol):
    """The run ledger (`npa_workflow.ledger.DynamoLedger`): runs, wave attempts, decisions, trigger watermarks.
    Conditional writes that lose raise `ledger.LedgerConflict` / `AttemptExists`, never an SDK error."""

    def put_run(self, run: RunRecord) -> bool: ...

    def get_run(self, run_id: str) -> RunRecord | None: ...

    def update_run_status(self, run_id: str, status: RunStatus | str, error: RunError | None = None, *,
                          execution_arn: str | None = None) -> RunRecord: ...

    def record_code_change(self, run_id: str, from_digest: str, to_digest: str, code_uri: str) -> RunRecord: ...

    def note_changes(self) -> int: ...

    def request_cancel(self, run_id: str, note: str = "") -> str: ...

    def cancel_requested(self, run_id: str) -> str | None: ...

    def clear_cancel(self, run_id: str) -> None: ...

    def list_runs(self, limit: int = 50) -> list[RunRecord]: ...

    def begin_attempt(self, run_id: str, wave_key: str, *, state: str, attempt: int | None = None,
                      group: str | None = None, iteration: int | None = None, job_name: str | None = None,
                      task_token: str | None = None, replayed: bool = False, status: WaveStatus | str = ...,
                      outputs: list[str] | None = None, note: str = "") -> WaveAttempt: ...

    def get_attempt(self, run_id: str, wave_key: str, attempt: int) -> WaveAttempt | None: ...

    def latest_attempt(self, run_id: str, wave_key: str) -> WaveAttempt | None: ...

    def attempts(self, run_id: str, wave_key: str | None = None) -> list[WaveAttempt]: ...

    def state_attempt_count(self, run_id: str, state: str) -> int: ...

    def state_attempts(self, run_id: str, state: str) -> list[WaveAttempt]: ...

    def record_submission(self, run_id: str, wave_key: str, attempt: int, *, job_id: str | None = None,
                          request_id: str | None = None, job_name: str | None = None,
                          status: WaveStatus | str = ..., note: str = "") -> WaveAttempt: ...

    def set_token(self, run_id: str, wave_key: str, attempt: int, task_token: str) -> WaveAttempt: ...

    def mark_status(self, run_id: str, wave_key: str, attempt: int, status: WaveStatus | str, note: str = "",
                    at: str | None = None) -> bool: ...

    def finish_attempt(self, run_id: str, wave_key: str, attempt: int, status: WaveStatus | str,
                       error: str | None = None, error_category: ErrorCategory | str | None = None, *,
                       outputs: list[str] | None = None, note: str = "", started_at: str | None = None,
                       ended_at: str | None = None) -> bool: ...

    def append_timeline(self, run_id: str, wave_key: str, attempt: int, status: str, note: str = "",
                        at: str | None = None) -> None: ...

    def revoke_success(self, run_id: str, wave_key: str, attempt: int, error: str,
                       error_category: ErrorCategory | str) -> bool: ...

    def active_waves(self, limit: int | None = None, fields: Iterable[str] | None = None) -> list[WaveAttempt]: ...

    def open_attempts(self, run_id: str) -> list[WaveAttempt]: ...

    def take_watch_lease(self, holder: str, seconds: float) -> bool: ...

    def release_watch_lease(self, holder: str) -> None: ...

    def record_scheduler_outage(self, message: str) -> str: ...

    def scheduler_outage(self) -> tuple[str, str] | None: ...

    def clear_scheduler_outage(self) -> None: ...

    def record_decision(self, run_id: str, state: str, loops_key: str = "", *, uri: str, raw: str | None = None,
                        decision: str | None = None, source: Any = "artifact", error: str | None = None,
                        read_at: str | None = None) -> DecisionRecord: ...

    def decisions(self, run_id: str, state: str | None = None) -> list[DecisionRecord]: ...

    def put_watermark(self, watermark: Watermark) -> bool: ...

    def watermark(self, run_id: str, state: str, loops_key: str = "") -> Watermark | None: ...

    def active_watches(self, limit: int | None = None) -> list[Watermark]: ...

    def watermarks(self, run_id: str) -> list[Watermark]: ...


# -- the Step Functions control plane ----------------------------------------------------------------------
class ExecutionsError(Exception):
    """Base of the `Executions` port's errors (an adapter raises these, never its SDK's)."""


class ExecutionAlreadyExists(ExecutionsError):
    """StartExecution with a name already used by an execution with another input (or one that ended)."""


class ExecutionNotFound(ExecutionsError):
    """No such execution (or state machine)."""


class NotRedrivable(ExecutionsError):
    """The execution cannot be redriven (it succeeded, is running, is too old, or the service has no redrive)."""


class MachineAlreadyExists(ExecutionsError):
    """CreateStateMachine with a name taken by a machine of another definition."""


@dataclass(frozen=True)
class Execution:
    """What DescribeExecution says about one execution (the fields the engine and the CLI read)."""

    arn: str
    name: str
    machine_arn: str
    status: str  # RUNNING | SUCCEEDED | FAILED | TIMED_OUT | ABORTED | PENDING_REDRIVE
    input: str = ""
    output: str | None = None
    error: str | None = None
    cause: str | None = None
    redrive_status: str | None = None  # REDRIVABLE | NOT_REDRIVABLE | REDRIVABLE_BY_MAP_RUN (AWS)
    redrive_status_reason: str | None = None  # why not (AWS: history limit, older than 14 days, ...)
    redrive_count: int = 0
    start_date: datetime | None = None
    stop_date: datetime | None = None


class Executions(Protocol):
    """Start, follow, stop and redrive executions; read and create state machines."""

    def start(self, machine_arn: str, name: str, input_json: str) -> str:
        """The execution's ARN. Same name and same input while it runs: the running execution's ARN (AWS is
        idempotent there). Raises `ExecutionAlreadyExists` for a name used otherwise."""
        ...

    def describe(self, execution_arn: str) -> Execution:
        """Raises `ExecutionNotFound`."""
        ...

    def stop(self, execution_arn: str, error: str, cause: str) -> bool:
        """False when the execution does not exist (or ended already: AWS stops nothing then)."""
        ...

    def redrive(self, execution_arn: str) -> None:
        """Raises `NotRedrivable` (`ExecutionNotFound` for an unknown execution)."""
        ...

    def history(self, execution_arn: str, *, reverse: bool = False,
                limit: int | None = None) -> Iterator[dict[str, Any]]:
        """Every history event, oldest first (`reverse`: newest first), page by page (AWS returns at most 1,000
        events a call, with `nextToken`). `limit`: stop after that many events."""
        ...

    def definition(self, machine_arn: str) -> dict[str, Any] | None:
        """The machine's definition (parsed), or None when it does not exist."""
        ...

    def create_machine(self, name: str, definition: str, *, role_arn: str, log_group_arn: str = "") -> str:
        """A Standard machine with tracing (and logging to `log_group_arn`); returns its ARN. A machine of that
        name that exists already raises `MachineAlreadyExists`."""
        ...

    def machine_arn(self, name: str, role_arn: str) -> str:
        """The ARN machine `name` has in this region and the account of `role_arn`."""
        ...
