"""Step code that reaches the cluster: a folder, content-addressed, mounted into every task.

A spec's commands (`python steps/train.py …`) run from the folder of the spec (or the `workdir` the spec,
else the tool catalog, names). `submit` stages that folder once under `s3://<engine bucket>/code/<digest>/` — the digest
is a sha256 over every file's path, mode and content, so an unchanged folder is never uploaded twice —
and the run freezes the URI and digest. Each task then mounts it (`file_mounts`, SkyPilot copies the S3
prefix onto the node before `setup`) and its `run` starts in it.

Pure: the digest walks files, nothing here talks to S3 (`code_stage.py` does).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from npa_workflow.spec.validate import LoadedSpec

CODE_PREFIX = "code/"
CODE_DIR = "/npa-workflow/code"  # where a task finds the staged folder (and starts its run)
MANIFEST = ".npa-code.json"  # written last: a prefix holding it is complete
SKIPPED_DIRS = {".git", "__pycache__", ".npa-workflow", ".venv", "node_modules", ".mypy_cache", ".pytest_cache"}
SKIPPED_SUFFIXES = (".pyc", ".pyo")
MAX_FILES = 5000
MAX_BYTES = 200 * 1024 * 1024


class CodeError(ValueError):
    """A folder that cannot be staged; the message names it and the fix."""


@dataclass(frozen=True)
class CodeBundle:
    root: Path
    digest: str  # sha256 hex
    files: tuple[tuple[str, Path, bool], ...]  # (relative path, absolute path, executable)

    def uri(self, bucket: str) -> str:
        return f"s3://{bucket}/{CODE_PREFIX}{self.digest}/"


def _walk(root: Path, exclude: Path | None = None) -> list[Path]:
    found: list[Path] = []
    for base, dirs, names in os.walk(root):
        # `exclude`: the local home when it lies inside the folder under another name ($NPA_WORKFLOW_HOME): its
        # checkouts of earlier stages would otherwise be shipped, and grow the next digest every run.
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS and Path(base) / d != exclude)
        for name in sorted(names):
            if not name.endswith(SKIPPED_SUFFIXES) and name != MANIFEST:
                found.append(Path(base) / name)
    return found


def code_bundle(root: str | Path, exclude: str | Path | None = None) -> CodeBundle:
    """The folder's files and their digest (paths, modes, contents), in a fixed order; `exclude`: a folder inside
    it that is not code (the local home)."""
    root = Path(root).resolve()
    if not root.is_dir():
        raise CodeError(f"code folder {root} does not exist (set workdir in the spec or the tool catalog, or "
                        "keep the spec beside its steps)")
    files: list[tuple[str, Path, bool]] = []
    total = 0
    digest = hashlib.sha256()
    for path in _walk(root, Path(exclude).resolve() if exclude else None):
        info = path.lstat()
        if not stat.S_ISREG(info.st_mode):
            continue  # symlinks and sockets are not shipped: a link may point out of the folder
        total += info.st_size
        if len(files) >= MAX_FILES or total > MAX_BYTES:
            raise CodeError(f"code folder {root} holds more than {MAX_FILES} files or {MAX_BYTES // 2**20} MiB: "
                            "point workdir at the steps' own folder, and ship data through S3")
        rel = path.relative_to(root).as_posix()
        executable = bool(info.st_mode & stat.S_IXUSR)
        content = hashlib.sha256(path.read_bytes()).hexdigest()
        digest.update(digest_line(rel, executable, content))
        files.append((rel, path, executable))
    return CodeBundle(root, digest.hexdigest(), tuple(files))


def manifest_json(bundle: CodeBundle) -> bytes:
    """The manifest a staged prefix (and a local checkout) ends with: its presence says the copy is complete."""
    return manifest_of(bundle.digest, [(rel, x) for rel, _, x in bundle.files])


def manifest_of(digest: str, files: list[tuple[str, bool]]) -> bytes:
    """The manifest of `files` ((relative path, executable), in the digest's order)."""
    entries = [{"path": rel, "executable": x} for rel, x in files]
    return json.dumps({"digest": digest, "files": entries}, indent=1).encode("utf-8")


def digest_line(rel: str, executable: bool, content_sha256: str) -> bytes:
    """One file's part of a folder's digest (`code_bundle`, and an inbox code bundle: `engine.inbox_code`)."""
    return f"{rel}\0{'x' if executable else '-'}\0{content_sha256}\n".encode()


def walk_order(rel: str) -> tuple[tuple[int, str], ...]:
    """The order `code_bundle` visits `rel` in (a folder's files, sorted, before its sub-folders, sorted): a
    digest of the same files listed otherwise (a tar's members) comes out the same."""
    *folders, name = rel.split("/")
    return (*((1, f) for f in folders), (0, name))


def code_root(spec_path: str | Path, catalog_workdir: str = "", catalog_path: str | Path | None = None,
              spec_workdir: str = "") -> Path:
    """The folder to ship, and where every step's command starts: the spec's `workdir` (relative to the spec
    file), else the catalog's (relative to the catalog file), else the spec's folder."""
    if spec_workdir:
        return (Path(spec_path).resolve().parent / spec_workdir).resolve()
    if catalog_workdir:
        base = Path(catalog_path).parent if catalog_path else Path(spec_path).parent
        return (base / catalog_workdir).resolve()
    return Path(spec_path).resolve().parent


def spec_code_root(spec_path: str | Path, loaded: LoadedSpec) -> Path:
    """`code_root` of a loaded spec (its own `workdir`, its catalog's)."""
    return code_root(spec_path, loaded.catalog.workdir, loaded.catalog.source or None, loaded.spec.workdir)
