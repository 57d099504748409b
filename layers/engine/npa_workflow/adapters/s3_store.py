"""`S3Store`: the engine's `ObjectStore` port over boto3 S3 (the cloud bucket, or the local moto server).

URIs are `s3://bucket/key`; a key ending in `/` names a prefix. The client honours `AWS_ENDPOINT_URL`
(the local runtime's embedded moto) when none is given.
"""

from __future__ import annotations

import os
from typing import Any

from botocore.exceptions import ClientError

from npa_workflow.engine.ports import Listing, ObjectTooLarge, StoreAccessDenied
from npa_workflow.protocol.events import event_key_forms

SAMPLE_SIZE = 5
_MISSING = frozenset({"404", "NoSuchKey", "NotFound", "NoSuchBucket"})
# HeadObject has no body, so a denied HEAD answers a bare "403"/"Forbidden"; GET/List say AccessDenied.
# A KMS-encrypted object the role may not decrypt answers AccessDenied (or KMS.*) as well.
_DENIED = frozenset({"403", "AccessDenied", "Forbidden", "AllAccessDisabled", "InvalidObjectState",
                     "KMS.AccessDeniedException", "KMS.DisabledException"})
# The permission each operation needs (named in the error a user reads).
_NEEDS = {"HeadObject": "s3:GetObject", "GetObject": "s3:GetObject", "ListObjectsV2": "s3:ListBucket",
          "PutObject": "s3:PutObject"}


class S3UriError(ValueError):
    """Not an `s3://bucket/key` URI."""


def parse_s3_uri(uri: str) -> tuple[str, str]:
    """`s3://bucket/key` → `(bucket, key)`; the key may be empty or end with `/` (a prefix)."""
    if not isinstance(uri, str) or not uri.startswith("s3://"):
        raise S3UriError(f"expected an s3://bucket/key URI, got {uri!r}")
    bucket, _, key = uri[len("s3://") :].partition("/")
    if not bucket:
        raise S3UriError(f"S3 URI {uri!r} has no bucket name")
    return bucket, key


def _missing(exc: ClientError) -> bool:
    return str(exc.response.get("Error", {}).get("Code", "")) in _MISSING


def _denied(exc: ClientError, uri: str, operation: str) -> StoreAccessDenied | None:
    code = str(exc.response.get("Error", {}).get("Code", ""))
    if code not in _DENIED:
        return None
    need = _NEEDS.get(operation, "s3:*")
    return StoreAccessDenied(uri, operation, f"S3 answered {code}; the role needs {need} on it "
                                             "(and kms:Decrypt if the bucket uses a customer-managed key)")


def _raise(exc: ClientError, uri: str, operation: str) -> None:
    denied = _denied(exc, uri, operation)
    if denied is not None:
        raise denied from None
    raise exc


class S3Store:
    """`ObjectStore` on S3. `client`: a boto3 S3 client (created on first use otherwise)."""

    def __init__(self, client: Any = None) -> None:
        self._client = client

    def __repr__(self) -> str:
        return "S3Store()"

    @property
    def client(self) -> Any:
        if self._client is None:
            import boto3

            self._client = boto3.client("s3", endpoint_url=os.environ.get("AWS_ENDPOINT_URL") or None)
        return self._client

    def get(self, uri: str, max_bytes: int | None = None) -> bytes | None:
        """The object's body, or None when the object (or its bucket) does not exist. With `max_bytes`, a larger
        object (its GetObject's ContentLength) raises `ObjectTooLarge` and its body is never read."""
        bucket, key = parse_s3_uri(uri)
        try:
            response = self.client.get_object(Bucket=bucket, Key=key)
            if max_bytes is not None and int(response.get("ContentLength", 0)) > max_bytes:
                response["Body"].close()
                raise ObjectTooLarge(uri, int(response["ContentLength"]))
            return bytes(response["Body"].read())
        except ClientError as exc:
            if _missing(exc):
                return None
            _raise(exc, uri, "GetObject")
            raise

    def get_version(self, uri: str, version_id: str) -> bytes | None:
        """That version of the object, or None when it (or that version) no longer exists."""
        bucket, key = parse_s3_uri(uri)
        try:
            return self.client.get_object(Bucket=bucket, Key=key, VersionId=version_id)["Body"].read()
        except ClientError as exc:
            if _missing(exc) or str(exc.response.get("Error", {}).get("Code", "")) == "NoSuchVersion":
                return None
            _raise(exc, uri, "GetObject")
            raise

    def put(self, uri: str, body: bytes) -> None:
        bucket, key = parse_s3_uri(uri)
        self.client.put_object(Bucket=bucket, Key=key, Body=body)

    def exists(self, uri: str) -> bool:
        """An object with exactly this key exists (HeadObject; needs s3:GetObject, which readers have)."""
        bucket, key = parse_s3_uri(uri)
        try:
            self.client.head_object(Bucket=bucket, Key=key)
        except ClientError as exc:
            if _missing(exc):
                return False
            _raise(exc, uri, "HeadObject")
            raise
        return True

    def event_key(self, bucket: str, key: str) -> str:
        """The real key of an S3 event's (possibly URL-encoded) key: the first form that exists, else the decoded."""
        forms = event_key_forms(key)
        if len(forms) > 1:
            for form in forms:
                if self.exists(f"s3://{bucket}/{form}"):
                    return form
        return forms[0]

    def count(self, prefix_uri: str, at_least: int) -> Listing:
        """Count every key under the prefix (zero-byte markers too), stopping once `at_least` (> 0) are seen.

        A bucket that does not exist holds nothing: the count is 0. `sample` holds the first few keys.
        """
        bucket, prefix = parse_s3_uri(prefix_uri)
        seen = 0
        sample: list[str] = []
        kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix}
        try:
            while True:
                page = self.client.list_objects_v2(**kwargs)
                for item in page.get("Contents", []):
                    seen += 1
                    if len(sample) < SAMPLE_SIZE:
                        sample.append(item["Key"])
                    if 0 < at_least <= seen:
                        return Listing(count=seen, sample=sample)
                token = page.get("NextContinuationToken")
                if not page.get("IsTruncated") or not token:
                    return Listing(count=seen, sample=sample)
                kwargs["ContinuationToken"] = token
        except ClientError as exc:
            if _missing(exc):
                return Listing(count=seen, sample=sample)
            _raise(exc, prefix_uri, "ListObjectsV2")
            raise

    def non_empty(self, uri: str) -> bool:
        """An object with size > 0, or for a `/`-terminated prefix a first object with size > 0."""
        bucket, key = parse_s3_uri(uri)
        try:
            if key and not key.endswith("/"):
                head = self.client.head_object(Bucket=bucket, Key=key)
                return int(head.get("ContentLength", 0)) > 0
            kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": key}
            while True:
                page = self.client.list_objects_v2(**kwargs)
                if any(int(item.get("Size", 0)) > 0 for item in page.get("Contents", [])):
                    return True
                token = page.get("NextContinuationToken")
                if not page.get("IsTruncated") or not token:
                    return False
                kwargs["ContinuationToken"] = token
        except ClientError as exc:
            if _missing(exc):
                return False
            _raise(exc, uri, "HeadObject" if key and not key.endswith("/") else "ListObjectsV2")
            raise
