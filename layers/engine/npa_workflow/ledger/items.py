"""Item shapes of the run ledger: one DynamoDB table, single-table design (the `Ledger` port, docs/architecture.md).

Table keys: partition key `pk` (S), sort key `sk` (S). Every item of a run shares `pk = RUN#<run_id>`,
so one Query reads a whole run. Secondary indexes:

- `active` (pk `active_pk`, sk `active_sk`), sparse: only items that something is waiting on carry the
  two attributes. `active_pk = ACTIVE` for wave attempts not yet terminal, `active_pk = TRIGGER` for
  trigger watermarks still waiting on a task token. The watch pass reads each with one Query, never a Scan;
  finishing a wave or satisfying a trigger removes the attributes, which drops the item from the index.
- `runs` (pk `runs_pk`, sk `runs_sk`): only RUN items carry `runs_pk = RUNS`, `runs_sk = <started_at>#<run_id>`,
  so the CLI lists runs newest first with one Query. A single index partition: fine for a CLI listing.

TTL attribute: `expires_at` (N, epoch seconds), written when the ledger has a retention period.

Key components (run id, wave key, state, loops key) are written into keys percent-escaped (`%` → `%25`,
`#` → `%23`) so that a `#` inside a spec state name cannot break the key structure; the raw values are
always stored as plain attributes too, and `from_item()` reads only those.

All times are ISO-8601 UTC strings to the millisecond with `Z` (`2025-01-31T12:00:00.000Z`). `None` fields are not
written at all (that is what keeps the indexes sparse). Floats are stored as DynamoDB numbers and come back
as int or float. A task token is not a secret, but it is long and operationally sensitive: it is excluded
from every model `repr` and must not be logged.
"""

from __future__ import annotations

from decimal import Decimal
from enum import StrEnum
from functools import cache
from typing import Any, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict, Field

from npa_workflow.timestamps import utc_now

ACTIVE = "ACTIVE"
TRIGGER = "TRIGGER"
RUNS = "RUNS"
RAW_BODY_MAX = 2000
SAMPLE_MAX = 5
ATTEMPT_MAX = 999


@cache
def _codecs() -> tuple[Any, Any]:
    """boto3's attribute-value (de)serializers, imported on first use: importing boto3 costs a handler's cold
    start ~200 ms, which belongs to the first ledger call (the clients are built then too), not to the import."""
    from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

    return TypeSerializer(), TypeDeserializer()


class RunStatus(StrEnum):
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    ABORTED = "ABORTED"
    TIMED_OUT = "TIMED_OUT"


class WaveStatus(StrEnum):
    PENDING = "PENDING"
    LAUNCHING = "LAUNCHING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    UNKNOWN = "UNKNOWN"


# UNKNOWN is deliberately not terminal: a job whose state cannot be determined stays active, so the
# watch pass keeps reconciling it and nothing launches it a second time.
TERMINAL_WAVE = frozenset({WaveStatus.SUCCEEDED, WaveStatus.FAILED, WaveStatus.CANCELLED})
TERMINAL_RUN = frozenset({RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.ABORTED, RunStatus.TIMED_OUT})


class ErrorCategory(StrEnum):
    WORKLOAD = "workload"
    INFRASTRUCTURE = "infrastructure"
    CONFIGURATION = "configuration"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"


DecisionSource = Literal["artifact", "assume_decision_fallback"]


def key_part(value: str) -> str:
    """Escape one key component: `%` → `%25`, `#` → `%23` (injective, so keys never collide)."""
    return value.replace("%", "%25").replace("#", "%23")


def run_pk(run_id: str) -> str:
    return f"RUN#{key_part(run_id)}"


def attempt_tag(attempt: int) -> str:
    """`A001`…`A999`: zero-padded so the sort key orders attempts numerically."""
    if not 1 <= attempt <= ATTEMPT_MAX:
        raise ValueError(f"attempt must be between 1 and {ATTEMPT_MAX}, got {attempt}")
    return f"A{attempt:03d}"


WAVE_SK_PREFIX = "WAVE#"  # every attempt item's sort key starts so
WATERMARK_SK_PREFIX = "WATERMARK#"  # every trigger watermark item's


def wave_prefix(wave_key: str) -> str:
    """Sort-key prefix of every attempt of one wave (ends with `#A`, so `train` never matches `train2`)."""
    return f"{WAVE_SK_PREFIX}{key_part(wave_key)}#A"


def wave_sk(wave_key: str, attempt: int) -> str:
    return f"{WAVE_SK_PREFIX}{key_part(wave_key)}#{attempt_tag(attempt)}"


def decision_prefix(state: str, loops_key: str) -> str:
    return f"DECISION#{key_part(state)}#{key_part(loops_key)}#"


def watermark_sk(state: str, loops_key: str) -> str:
    return f"{WATERMARK_SK_PREFIX}{key_part(state)}#{key_part(loops_key)}"


# ---------------------------------------------------------------------------------------------
# Attribute-value conversion (low-level client format)


def _to_dynamo(value: Any) -> Any:
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, float):
        return Decimal(str(value))
    if isinstance(value, dict):
        return {str(k): _to_dynamo(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_to_dynamo(v) for v in value]
    return value


def _from_dynamo(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: _from_dynamo(v) for k, v in value.items()}
    if isinstance(value, list | set):
        return [_from_dynamo(v) for v in value]
    return value


def serialize(plain: dict[str, Any]) -> dict[str, Any]:
    """Plain dict → typed attribute map; `None` values are dropped (never written)."""
    ser, _ = _codecs()
    return {k: ser.serialize(_to_dynamo(v)) for k, v in plain.items() if v is not None}


def deserialize(item: dict[str, Any]) -> dict[str, Any]:
    """Typed attribute map → plain dict (Decimals back to int/float)."""
    _, des = _codecs()
    return {k: _from_dynamo(des.deserialize(v)) for k, v in item.items()}


class _Item(BaseModel):
    """Base: `to_item()` returns the typed attribute map for the low-level client, `from_item()` reads one."""

    model_config = ConfigDict(extra="ignore", use_enum_values=False)
    _KEY_ATTRS: ClassVar[frozenset[str]] = frozenset(
        {"pk", "sk", "active_pk", "active_sk", "runs_pk", "runs_sk", "kind"}
    )

    expires_at: int | None = None

    def key(self) -> dict[str, str]:  # pragma: no cover - overridden
        raise NotImplementedError

    def extra_attrs(self) -> dict[str, Any]:
        return {}

    def to_item(self) -> dict[str, Any]:
        plain = self.model_dump(mode="json", exclude_none=True)
        plain.update(self.key())
        plain.update(self.extra_attrs())
        return serialize(plain)

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> Self:
        plain = deserialize(item)
        return cls.model_validate({k: v for k, v in plain.items() if k not in cls._KEY_ATTRS})


class RunError(BaseModel):
    state: str | None = None
    message: str


class RunRecord(_Item):
    """RUN item. pk `RUN#<run_id>`, sk `RUN`; also `runs_pk = RUNS`, `runs_sk = <started_at>#<run_id>`.

    Fields: run_id, workflow, status (RUNNING/SUCCEEDED/FAILED/ABORTED/TIMED_OUT), execution_arn (the
    latest execution of this run id), spec_uri (the frozen spec), started_at, ended_at (set when the status
    becomes terminal, cleared when a resumed run goes back to RUNNING), error {state, message}, options
    (the run request's options, a small dict; never secrets), definition_digest (the definition the run started
    on, `protocol.definitions`: a resume refuses a machine a deploy has changed since; None for runs recorded
    before it was kept), code_changes (each re-stage of the run's step code by a resume: {at, from, to, uri},
    digests; oldest first), changes (a counter that grows when the run's
    status changes and, once per watch pass, when the pass wrote to the run's waves: `DynamoLedger.note_changes`;
    a watcher polls this one item and reads the waves only when it moved).
    """

    run_id: str
    workflow: str
    status: RunStatus = RunStatus.RUNNING
    execution_arn: str | None = None
    spec_uri: str | None = None
    started_at: str = Field(default_factory=utc_now)
    ended_at: str | None = None
    error: RunError | None = None
    options: dict[str, Any] = Field(default_factory=dict)
    definition_digest: str | None = None
    code_changes: list[dict[str, str]] = Field(default_factory=list)
    changes: int = 0

    def key(self) -> dict[str, str]:
        return {"pk": run_pk(self.run_id), "sk": "RUN"}

    def extra_attrs(self) -> dict[str, Any]:
        return {"kind": "RUN", "runs_pk": RUNS, "runs_sk": f"{self.started_at}#{key_part(self.run_id)}"}


class TimelineEntry(BaseModel):
    at: str = Field(default_factory=utc_now)
    status: str
    note: str = ""


class WaveAttempt(_Item):
    """WAVE attempt item. pk `RUN#<run_id>`, sk `WAVE#<wave_key>#A<attempt:03d>`.

    One item per (wave, attempt); the item's existence is the launch lock (see `DynamoLedger.begin_attempt`).
    Fields: wave_key (deterministic: state + loop counters + iteration, e.g. `train|l1=2`), state, group,
    iteration, attempt (1-based), job_name, job_id (scheduler job id: what cleanup cancels), request_id
    (the SkyPilot API request of the launch), task_token (of the Step Functions Task waiting on this wave;
    replaced when a retried or redriven Task brings a new one; excluded from repr), status
    (PENDING/LAUNCHING/RUNNING/SUCCEEDED/FAILED/CANCELLED/UNKNOWN), error, error_category
    (workload/infrastructure/configuration/timeout/cancelled), submitted_at, started_at, ended_at,
    timeline (list of {at, status, note}: one entry per status change), outputs (list of URIs),
    replayed (succeeded in an earlier execution of the run and taken from the ledger, not re-run).
    While not terminal: `active_pk = ACTIVE`, `active_sk = <run_id>#<wave_key>#A<attempt>` (index `active`).
    """

    run_id: str
    wave_key: str
    state: str
    group: str | None = None
    iteration: int | None = None
    attempt: int = 1
    job_name: str | None = None
    job_id: str | None = None
    request_id: str | None = None
    task_token: str | None = Field(default=None, repr=False)
    status: WaveStatus = WaveStatus.PENDING
    error: str | None = None
    error_category: ErrorCategory | None = None
    submitted_at: str | None = None
    started_at: str | None = None
    ended_at: str | None = None
    timeline: list[TimelineEntry] = Field(default_factory=list)
    outputs: list[str] = Field(default_factory=list)
    replayed: bool = False

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL_WAVE

    def key(self) -> dict[str, str]:
        return {"pk": run_pk(self.run_id), "sk": wave_sk(self.wave_key, self.attempt)}

    def active_key(self) -> dict[str, str]:
        return {
            "active_pk": ACTIVE,
            "active_sk": f"{key_part(self.run_id)}#{key_part(self.wave_key)}#{attempt_tag(self.attempt)}",
        }

    def extra_attrs(self) -> dict[str, Any]:
        return {"kind": "WAVE", **({} if self.terminal else self.active_key())}


class DecisionRecord(_Item):
    """DECISION item. pk `RUN#<run_id>`, sk `DECISION#<state>#<loops_key>#<seq:04d>`.

    One item per read of a decision artifact (re-reads by retries or redrives get the next seq). Fields:
    state, loops_key (loop counters of the read, `""` outside loops), seq, uri, raw (the artifact body,
    truncated to 2000 characters), decision (normalized value), source (`artifact`, or
    `assume_decision_fallback` when the artifact was missing and the run's assumption was used), error
    (why the artifact could not be used), read_at.
    """

    run_id: str
    state: str
    loops_key: str = ""
    seq: int = 1
    uri: str
    raw: str | None = None
    decision: str | None = None
    source: DecisionSource = "artifact"
    error: str | None = None
    read_at: str = Field(default_factory=utc_now)

    def model_post_init(self, __context: Any) -> None:
        if self.raw is not None and len(self.raw) > RAW_BODY_MAX:
            self.raw = self.raw[:RAW_BODY_MAX]

    def key(self) -> dict[str, str]:
        return {"pk": run_pk(self.run_id), "sk": f"{decision_prefix(self.state, self.loops_key)}{self.seq:04d}"}

    def extra_attrs(self) -> dict[str, Any]:
        return {"kind": "DECISION"}


class Watermark(_Item):
    """WATERMARK item. pk `RUN#<run_id>`, sk `WATERMARK#<state>#<loops_key>`.

    The latest observation of a trigger's watched prefix. Fields: state, loops_key, uri (the watched
    prefix), objects (count seen), min_objects, satisfied, polls (re-counts so far), observed_at, sample
    (at most 5 keys), task_token (while waiting; excluded from repr). While waiting (a token and not
    satisfied): `active_pk = TRIGGER`, `active_sk = <run_id>#<state>#<loops_key>`, so the watch pass
    re-counts every watched prefix with one Query.
    """

    run_id: str
    state: str
    loops_key: str = ""
    uri: str
    objects: int = 0
    min_objects: int = 1
    satisfied: bool = False
    polls: int = 0
    observed_at: str = Field(default_factory=utc_now)
    sample: list[str] = Field(default_factory=list)
    task_token: str | None = Field(default=None, repr=False)

    def model_post_init(self, __context: Any) -> None:
        if len(self.sample) > SAMPLE_MAX:
            self.sample = self.sample[:SAMPLE_MAX]

    @property
    def waiting(self) -> bool:
        return bool(self.task_token) and not self.satisfied

    def key(self) -> dict[str, str]:
        return {"pk": run_pk(self.run_id), "sk": watermark_sk(self.state, self.loops_key)}

    def extra_attrs(self) -> dict[str, Any]:
        attrs: dict[str, Any] = {"kind": "WATERMARK"}
        if self.waiting:
            attrs["active_pk"] = TRIGGER
            attrs["active_sk"] = f"{key_part(self.run_id)}#{key_part(self.state)}#{key_part(self.loops_key)}"
        return attrs
