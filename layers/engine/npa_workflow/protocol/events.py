"""The EventBridge events the functions consume, as pydantic models of just the fields they read.

Powertools' parser models describe these events fully, but importing `utilities.parser.models` builds every
event model it has: ~150 ms of a cold start on a 2-core machine (bench/handler_import.py), more than the rest of
a handler. Unknown fields are ignored, so AWS adding fields breaks nothing.
"""

from __future__ import annotations

from urllib.parse import unquote_plus

from pydantic import BaseModel, ConfigDict, Field

S3_SOURCE = "aws.s3"
OBJECT_CREATED = "Object Created"
SFN_SOURCE = "aws.states"
EXECUTION_STATUS_CHANGE = "Step Functions Execution Status Change"


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class S3Bucket(_Lenient):
    name: str


class S3Object(_Lenient):
    key: str
    etag: str | None = None
    version_id: str | None = Field(default=None, alias="version-id")


def event_key_forms(key: str) -> list[str]:
    """The keys an S3 event's `detail.object.key` may stand for, most likely first. AWS sends it URL-encoded
    as a form value (space → `+`, `é` → `%C3%A9`; Powertools decodes it with `unquote_plus`); moto, and so an
    older twin, sends it raw. The decoded form first; the raw one when it differs."""
    decoded = unquote_plus(key)
    return [decoded] if decoded == key else [decoded, key]


class S3ObjectCreatedDetail(_Lenient):
    bucket: S3Bucket
    object: S3Object


class S3ObjectCreated(_Lenient):
    """S3 "Object Created" through EventBridge (the bucket has EventBridge notifications on)."""

    id: str = ""
    detail: S3ObjectCreatedDetail


def is_object_created(event: object) -> bool:
    return (isinstance(event, dict) and event.get("source") == S3_SOURCE
            and event.get("detail-type") == OBJECT_CREATED)


class ExecutionStatusDetail(_Lenient):
    executionArn: str  # noqa: N815 - the event's own field names
    name: str
    status: str
    input: str | None = None


class ExecutionStatusChange(_Lenient):
    """Step Functions "Execution Status Change" through EventBridge."""

    id: str = ""
    detail: ExecutionStatusDetail
