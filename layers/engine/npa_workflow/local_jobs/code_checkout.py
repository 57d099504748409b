"""A run's staged step code, checked out for local jobs: what SkyPilot's `file_mounts` do for a task.

`submit` stages the spec's code folder under `s3://<bucket>/code/<digest>/` and the run freezes that URI
(`render.code`, `code_stage`). A task on a cluster starts in a copy of that prefix, so it runs the code as it was
submitted, whatever the folder holds later. A local job of such a run (one `serve` started) does the same: the
prefix is copied once into `<home>/code/<digest>/` (from its manifest, which `stage_code` writes last: a prefix
with one is complete) and the job starts there. The digest names the content, so a complete checkout is reused
by every later job of every run that staged the same code.

The copy is made in a temporary folder and renamed into place: a checkout killed half-way leaves no folder a
later job would take for complete. Paths come from the manifest, which a user's upload can write: each must be
a plain relative path inside the checkout.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

from npa_workflow.render.code import MANIFEST, CodeBundle, code_bundle, manifest_json

__all__ = ["CHECKOUTS", "CodeCheckoutError", "checkout", "stage_folder", "stage_local"]

CHECKOUTS = "code"  # under the local home: one folder per digest, shared by every run and job of that code
_lock = threading.Lock()


class CodeCheckoutError(RuntimeError):
    """The staged code cannot be checked out (not staged, or a manifest naming a path outside it)."""


def _split(code_uri: str) -> tuple[str, str, str]:
    if not code_uri.startswith("s3://") or "/" not in code_uri[5:]:
        raise CodeCheckoutError(f"code uri {code_uri!r}: expected s3://<bucket>/code/<digest>/")
    bucket, _, prefix = code_uri[5:].partition("/")
    prefix = prefix.rstrip("/") + "/"
    digest = prefix.rstrip("/").rsplit("/", 1)[-1]
    if not digest or digest in (".", "..") or "/" in digest:
        raise CodeCheckoutError(f"code uri {code_uri!r}: no digest")
    return bucket, prefix, digest


def _safe(rel: Any) -> str:
    path = PurePosixPath(str(rel))
    if not str(rel) or path.is_absolute() or ".." in path.parts or str(path) in (".", MANIFEST):
        raise CodeCheckoutError(f"the code manifest names {rel!r}: not a file inside the staged folder")
    return str(path)


def checkout(code_uri: str, root: Path, s3: Any = None) -> Path:
    """The local folder holding the code staged at `code_uri` (made under `root` on first use)."""
    bucket, prefix, digest = _split(code_uri)
    target = Path(root) / digest
    if (target / MANIFEST).is_file():
        return target
    if s3 is None:
        import boto3

        s3 = boto3.client("s3")  # the stack's S3 (locally the embedded one: AWS_ENDPOINT_URL)
    try:
        manifest_body = s3.get_object(Bucket=bucket, Key=prefix + MANIFEST)["Body"].read()
    except Exception as exc:  # noqa: BLE001 - said as the launch's configuration failure
        raise CodeCheckoutError(f"the run's code {code_uri} is not staged (no {MANIFEST}): {type(exc).__name__}; "
                                "submit the spec again (it stages the code), or resume after re-staging") from None
    manifest = json.loads(manifest_body)
    files = [(_safe(f.get("path")), bool(f.get("executable"))) for f in manifest.get("files", [])]
    return _materialize(Path(root), digest, manifest_body,
                        [(rel, x, lambda rel=rel: s3.get_object(Bucket=bucket, Key=prefix + rel)["Body"].read())
                         for rel, x in files])


def stage_local(bundle: CodeBundle, root: Path) -> Path:
    """The bundle's folder as a checkout under `root` (`<root>/<digest>/`), copied from the folder itself: what
    `run` stages for its jobs. Same layout and manifest as a checkout of a staged prefix, so a later `serve` job of
    the same code, or the next run, reuses it; an unchanged folder costs its digest and one `stat`."""
    target = Path(root) / bundle.digest
    if (target / MANIFEST).is_file():
        return target
    return _materialize(Path(root), bundle.digest, manifest_json(bundle),
                        [(rel, x, path.read_bytes) for rel, path, x in bundle.files])


def stage_folder(folder: Path, home: Path) -> tuple[Path, str]:
    """`run`'s stage: the code folder copied (once per content) to `<home>/code/<digest>/`; (that copy, the digest).
    Raises `render.code.CodeError` for a folder that cannot be staged (the message names it and the fix)."""
    bundle = code_bundle(folder, exclude=home)
    return stage_local(bundle, home / CHECKOUTS), bundle.digest


def _materialize(root: Path, digest: str, manifest_body: bytes,
                 files: list[tuple[str, bool, Callable[[], bytes]]]) -> Path:
    """Write `files` (relative path, executable, content) and the manifest into `<root>/<digest>/`, whole or not
    at all (a temporary folder renamed into place)."""
    target = root / digest
    with _lock:  # one checkout at a time in this process; another process's is settled by the rename
        if (target / MANIFEST).is_file():
            return target
        root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{digest[:12]}-", dir=root))
        try:
            for rel, executable, content in files:
                dest = tmp / rel
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(content())
                if executable:
                    dest.chmod(0o755)
            (tmp / MANIFEST).write_bytes(manifest_body)
            try:
                os.rename(tmp, target)
            except OSError:
                if not (target / MANIFEST).is_file():  # not another process's complete checkout: a real failure
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return target
