"""Reading and writing the JSON artifacts of the example steps on S3.

The client honours the standard AWS environment: ``AWS_ENDPOINT_URL`` (a local moto server
during ``npa-workflow run``), credentials and ``AWS_DEFAULT_REGION``. Every failure is raised
as :class:`ArtifactError` with a message naming the URI, so a step can print it and exit 1.
"""

from __future__ import annotations

import json
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError

_MISSING_CODES = {"404", "NoSuchKey", "NotFound", "NoSuchBucket"}


class ArtifactError(Exception):
    """An artifact could not be read, parsed or written; the message is meant for the user."""


def parse_s3_uri(uri: str) -> tuple[str, str]:
    """Split ``s3://bucket/key`` into ``(bucket, key)``; the key may be empty or end in ``/``."""
    if not isinstance(uri, str) or not uri.startswith("s3://"):
        raise ArtifactError(f"expected an s3://bucket/key URI, got {uri!r}")
    bucket, _, key = uri[len("s3://") :].partition("/")
    if not bucket:
        raise ArtifactError(f"S3 URI {uri!r} has no bucket name")
    return bucket, key


def _client():
    return boto3.client("s3")


def _object_key(uri: str) -> tuple[str, str]:
    bucket, key = parse_s3_uri(uri)
    if not key or key.endswith("/"):
        raise ArtifactError(f"S3 URI {uri!r} names a prefix, but an object key is needed here")
    return bucket, key


def _describe(exc: Exception) -> str:
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        return f"{error.get('Code', 'error')}: {error.get('Message', '') or exc}"
    return str(exc)


def read_bytes(uri: str) -> bytes:
    """The object's body; a missing object or bucket raises ``ArtifactError`` saying so."""
    bucket, key = _object_key(uri)
    try:
        return _client().get_object(Bucket=bucket, Key=key)["Body"].read()
    except ClientError as exc:
        code = str(exc.response.get("Error", {}).get("Code", ""))
        if code in _MISSING_CODES:
            raise ArtifactError(f"{uri} does not exist") from exc
        raise ArtifactError(f"cannot read {uri} ({_describe(exc)})") from exc
    except BotoCoreError as exc:
        raise ArtifactError(f"cannot read {uri} ({_describe(exc)})") from exc


def read_json(uri: str) -> Any:
    """The object parsed as JSON."""
    body = read_bytes(uri)
    try:
        return json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ArtifactError(f"{uri} is not valid JSON ({exc})") from exc


def read_json_object(uri: str) -> dict[str, Any]:
    """The object parsed as a JSON object (mapping)."""
    document = read_json(uri)
    if not isinstance(document, dict):
        raise ArtifactError(f"{uri} must hold a JSON object, found {type(document).__name__}")
    return document


def write_bytes(uri: str, body: bytes, content_type: str = "application/octet-stream") -> None:
    """Store ``body`` at ``uri``. Empty bodies are refused: the runtime treats them as missing."""
    if not body:
        raise ArtifactError(f"refusing to write an empty object to {uri}")
    bucket, key = _object_key(uri)
    try:
        _client().put_object(Bucket=bucket, Key=key, Body=body, ContentType=content_type)
    except (ClientError, BotoCoreError) as exc:
        raise ArtifactError(f"cannot write {uri} ({_describe(exc)})") from exc


def write_json(uri: str, document: Any) -> None:
    """Store ``document`` as pretty-printed JSON with sorted keys."""
    text = json.dumps(document, indent=2, sort_keys=True) + "\n"
    write_bytes(uri, text.encode("utf-8"), content_type="application/json")


def list_objects(prefix_uri: str) -> list[dict[str, Any]]:
    """Every object under ``prefix_uri`` (all pages) as ``{"key", "size"}``, in key order."""
    bucket, prefix = parse_s3_uri(prefix_uri)
    objects: list[dict[str, Any]] = []
    try:
        pages = _client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        for page in pages:
            for item in page.get("Contents", []):
                objects.append({"key": item["Key"], "size": int(item["Size"])})
    except ClientError as exc:
        code = str(exc.response.get("Error", {}).get("Code", ""))
        if code in _MISSING_CODES:
            raise ArtifactError(f"cannot list {prefix_uri}: bucket {bucket!r} does not exist") from exc
        raise ArtifactError(f"cannot list {prefix_uri} ({_describe(exc)})") from exc
    except BotoCoreError as exc:
        raise ArtifactError(f"cannot list {prefix_uri} ({_describe(exc)})") from exc
    return sorted(objects, key=lambda item: item["key"])


def split_uri_list(values: list[str]) -> list[str]:
    """Flatten repeated and comma-separated URI arguments, dropping blanks, keeping order."""
    uris: list[str] = []
    for value in values:
        uris.extend(part.strip() for part in value.split(",") if part.strip())
    return uris
