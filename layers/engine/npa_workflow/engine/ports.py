"""The small interfaces the engine talks through. The cloud (S3, Step Functions, SkyPilot) and
the local runtime (moto, subprocess jobs) each implement them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

if TYPE_CHECKING:
    from npa_workflow.plan.model import PlanStep

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
    task_yaml: str  # the SkyPilot document (what a SkyPilot executor submits)
    env: Mapping[str, str]  # engine variables for the job (run id, state, attempt, AWS endpoint locally)
    secret_names: tuple[str, ...] = ()
    workdir: Path | None = None  # local jobs run here (the spec's folder)


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


class JobExecutor(Protocol):
    def submit(self, job: JobRequest) -> Submission: ...

    def observe(self, jobs: list[TrackedJob]) -> dict[str, Observation]:
        """One call for many jobs, keyed by `TrackedJob.key`."""
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


class ObjectStore(Protocol):
    def get(self, uri: str) -> bytes | None:
        """The object's body, or None when it does not exist."""
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
