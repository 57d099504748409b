"""Stage a code bundle (`render.code`) under the engine bucket's `code/<digest>/`, once.

Every file is uploaded, then the manifest: a prefix with a manifest is complete, so a submit killed
half-way leaves a prefix the next submit fills again, and a prefix with one is reused as it is (the
digest names its content).
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from npa_workflow.render.code import CODE_PREFIX, MANIFEST, CodeBundle, manifest_json


def stage_code(s3: Any, bucket: str, bundle: CodeBundle) -> tuple[str, bool]:
    """(the bundle's URI, whether anything was uploaded)."""
    prefix = f"{CODE_PREFIX}{bundle.digest}/"
    try:
        s3.head_object(Bucket=bucket, Key=prefix + MANIFEST)
        return bundle.uri(bucket), False
    except ClientError as exc:
        if str(exc.response.get("Error", {}).get("Code")) not in ("404", "NoSuchKey", "NotFound"):
            raise
    for rel, path, _ in bundle.files:
        s3.put_object(Bucket=bucket, Key=prefix + rel, Body=path.read_bytes())
    s3.put_object(Bucket=bucket, Key=prefix + MANIFEST, Body=manifest_json(bundle))
    return bundle.uri(bucket), True
