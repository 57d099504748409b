"""The events the functions consume, as pydantic models of just the fields they read: the payloads the
compiled state machine's Tasks send (compile/asl.py), and the EventBridge events of S3 and Step Functions.

Powertools' parser models describe the EventBridge events fully, but importing `utilities.parser.models`
builds every event model it has: ~150 ms of a cold start on a 2-core machine (bench/handler_import.py),
more than the rest of a handler. Unknown fields are ignored, so AWS adding fields breaks nothing.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class StateTask(BaseModel):
    """What every Task of a state sends: the run, the state and the loop counters of this visit."""

    model_config = ConfigDict(extra="allow")

    run_id: str
    state: str
    loops: dict[str, int] = Field(default_factory=dict)
    execution: str = ""


class WaveTask(StateTask):
    """A waitForTaskToken Task: a wave's launch (`wave_task`) or a trigger's watch (`_with_trigger`)."""

    token: str = Field(repr=False)
    group: str = ""


class DecideTask(StateTask):
    """The `<state>.decide` Task (`decide`)."""

    purpose: str = ""


class CleanupTask(StateTask):
    """The `<state>.cleanup` Task (`with_catch`): the caught error is `error`."""

    error: dict[str, Any] = Field(default_factory=dict)


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class S3Bucket(_Lenient):
    name: str


class S3Object(_Lenient):
    key: str
    etag: str | None = None
    version_id: str | None = Field(default=None, alias="version-id")


class S3ObjectCreatedDetail(_Lenient):
    bucket: S3Bucket
    object: S3Object


class S3ObjectCreated(_Lenient):
    """S3 "Object Created" through EventBridge (the bucket has EventBridge notifications on)."""

    id: str = ""
    detail: S3ObjectCreatedDetail


class ExecutionStatusDetail(_Lenient):
    executionArn: str  # noqa: N815 - the event's own field names
    name: str
    status: str
    input: str | None = None


class ExecutionStatusChange(_Lenient):
    """Step Functions "Execution Status Change" through EventBridge."""

    id: str = ""
    detail: ExecutionStatusDetail
