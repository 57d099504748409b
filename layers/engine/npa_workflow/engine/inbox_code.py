"""The step code of a raw inbox upload: a code bundle beside the spec, staged as `submit` stages a folder.

`npa-workflow submit` stages the spec's folder and names it in a run request (`options.codeUri`). A spec uploaded
as it is (`aws s3 cp spec.yaml s3://<bucket>/inbox/`) carries no code, so its tasks would start with nothing
mounted. Its code travels as a gzip'd tar uploaded first, under the spec's key with `.code.tar.gz` for its
extension (`inbox/fit.yaml` → `inbox/fit.code.tar.gz`; `tar -czf fit.code.tar.gz -C <folder> .`):

- the bundle's own upload starts nothing (`is_code_bundle`); the spec's, when a bundle is beside it, is staged from
  it under `code/<digest>/` (the digest `submit` gives the same files, so an unchanged folder is stored once) and
  the run freezes that URI, as a submitted run does;
- a spec that is not one of the stack's deployed specs (those run with the code the deploy gives them, as a run
  request naming one does), whose steps name files of a folder (`python steps/fit.py`, a script, a `workdir`)
  and that has no bundle is rejected with one line saying how to upload it with its code; a spec whose tools are
  in their image (`python -m mypkg.fit`) runs as before. On `serve` (jobs on this machine:
  `Engine.jobs_on_this_machine`) none is rejected: its jobs start in serve's specs folder.

A bundle is checked before anything is stored: regular files and folders only (no links: one could point out of
the checkout), relative paths inside it (no `..`, no absolute name, no name twice), at most `MAX_BUNDLE_FILES` files
and `MAX_BUNDLE_UNPACKED` bytes unpacked, `MAX_BUNDLE_BYTES` packed (refused by its size, before its body is read);
the members are read one header at a time, so a bundle that claims too much is refused at that header, not after
unpacking it. A bundle that fails rejects the spec, naming the member and the fix.
"""

from __future__ import annotations

import hashlib
import io
import re
import shlex
import tarfile
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from npa_workflow.engine.ports import ObjectTooLarge
from npa_workflow.errors import Problem, SpecError
from npa_workflow.render.code import (
    CODE_PREFIX,
    MANIFEST,
    SKIPPED_DIRS,
    SKIPPED_SUFFIXES,
    digest_line,
    manifest_of,
    walk_order,
)

if TYPE_CHECKING:
    from npa_workflow.engine.ports import ObjectStore
    from npa_workflow.spec.validate import LoadedSpec

BUNDLE_SUFFIX = ".code.tar.gz"
# Below `submit`'s limits (render.code): the inbox function holds the bundle and its files in memory (1 GiB) and
# stages them one PUT at a time within its 120 s (protocol.functions.INBOX_FN). Larger code: `npa-workflow submit`.
MAX_BUNDLE_BYTES = 32 * 1024 * 1024  # packed
MAX_BUNDLE_FILES = 1000
MAX_BUNDLE_UNPACKED = 128 * 1024 * 1024
_SPEC_SUFFIX = re.compile(r"\.(ya?ml|json)$", re.IGNORECASE)
_SCRIPT = re.compile(r"\.(py|sh|bash|r|jl|js|rb|pl|ipynb)$", re.IGNORECASE)


def is_code_bundle(key: str) -> bool:
    return key.endswith(BUNDLE_SUFFIX)


def bundle_key(spec_key: str) -> str:
    """`inbox/fit.yaml` → `inbox/fit.code.tar.gz` (a key without a spec extension: the suffix appended)."""
    return _SPEC_SUFFIX.sub("", spec_key) + BUNDLE_SUFFIX


def _upload_hint(spec_key: str) -> str:
    name = spec_key.rsplit("/", 1)[-1]
    return (f"upload it with `npa-workflow submit {name} --stack <stack>` (it stages the code), or upload "
            f"`tar -czf {bundle_key(name)} -C <code folder> .` to {bundle_key(spec_key)} before the spec")


def _bundle_problem(uri: str, message: str, hint: str) -> SpecError:
    return SpecError([Problem("$", f"code bundle {uri}: {message}", hint, file=uri)])


def _too_large(uri: str, size: int) -> SpecError:
    return _bundle_problem(uri, f"{size} bytes packed, more than {MAX_BUNDLE_BYTES // 2**20} MiB",
                           "ship data through S3, not in the code bundle")


def _members(uri: str, body: bytes) -> tuple[list[tuple[str, bool, tarfile.TarInfo]], tarfile.TarFile]:
    """The bundle's files (relative path, executable, member), checked, in the digest's order; the archive."""
    fix = "pack the folder's regular files: tar -czf NAME.code.tar.gz -C <folder> ."
    if len(body) > MAX_BUNDLE_BYTES:
        raise _too_large(uri, len(body))
    try:
        archive = tarfile.open(fileobj=io.BytesIO(body), mode="r:gz")
        files = _checked(uri, archive, fix)
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise _bundle_problem(uri, f"not a gzip'd tar ({exc})", fix) from None
    return [(rel, x, m) for rel, (x, m) in sorted(files.items(), key=lambda item: walk_order(item[0]))], archive


def _checked(uri: str, archive: tarfile.TarFile, fix: str) -> dict[str, tuple[bool, tarfile.TarInfo]]:
    files: dict[str, tuple[bool, tarfile.TarInfo]] = {}
    total = 0
    for count, member in enumerate(archive, 1):  # lazily: each header is checked before the next is read
        if count > 2 * MAX_BUNDLE_FILES:  # folders count too: a tar of nothing but folders is no smaller to read
            raise _bundle_problem(uri, f"more than {2 * MAX_BUNDLE_FILES} members", fix)
        name = member.name
        path = PurePosixPath(name)
        parts = [p for p in path.parts if p != "."]
        if path.is_absolute() or ".." in parts:
            raise _bundle_problem(uri, f"member {name!r} is outside the bundle's folder", fix)
        if member.isdir() or not parts:
            continue
        if not member.isfile():
            kind = "a link" if member.issym() or member.islnk() else "not a regular file"
            raise _bundle_problem(uri, f"member {name!r} is {kind}: a bundle holds regular files only",
                                  "pack the files themselves (tar --dereference), not links to them")
        rel = "/".join(parts)
        if any(p in SKIPPED_DIRS for p in parts[:-1]) or rel.endswith(SKIPPED_SUFFIXES) or rel == MANIFEST:
            continue  # what `submit` would not stage either: the same files give the same digest
        if rel in files:
            raise _bundle_problem(uri, f"member {rel!r} is in the bundle twice", fix)
        total += member.size
        if len(files) >= MAX_BUNDLE_FILES or total > MAX_BUNDLE_UNPACKED:
            raise _bundle_problem(uri, f"more than {MAX_BUNDLE_FILES} files or {MAX_BUNDLE_UNPACKED // 2**20} MiB "
                                       "unpacked", "bundle the steps' own folder and ship data through S3, or stage "
                                                   "larger code with `npa-workflow submit`")
        files[rel] = (bool(member.mode & 0o100), member)
    return files


def stage_bundle(store: ObjectStore, bucket: str, key: str, body: bytes) -> str:
    """Stage the bundle's files under `code/<digest>/` of `bucket` (once per content); the code URI."""
    uri = f"s3://{bucket}/{key}"
    members, archive = _members(uri, body)
    contents: list[bytes] = []
    digest = hashlib.sha256()
    for rel, executable, member in members:
        handle = archive.extractfile(member)
        content = handle.read() if handle is not None else b""
        contents.append(content)
        digest.update(digest_line(rel, executable, hashlib.sha256(content).hexdigest()))
    prefix = f"s3://{bucket}/{CODE_PREFIX}{digest.hexdigest()}/"
    if not store.exists(prefix + MANIFEST):  # a prefix with its manifest is complete: reused as it is
        for (rel, _, _), content in zip(members, contents, strict=True):
            store.put(prefix + rel, content)
        store.put(prefix + MANIFEST, manifest_of(digest.hexdigest(), [(rel, x) for rel, x, _ in members]))
    return prefix


def names_folder_code(loaded: LoadedSpec) -> str:
    """Why the spec's steps need files of a folder ("" when none is seen): a `workdir`, or a command word that
    is a relative path to a program (`steps/fit.py`, `./run.sh`)."""
    if loaded.spec.workdir or loaded.catalog.workdir:
        return f"it names workdir {loaded.spec.workdir or loaded.catalog.workdir!r}"
    from npa_workflow.plan.planner import build_plan

    for step in build_plan(loaded).steps:
        words: list[str] = []
        for word in step.command:
            try:
                words += shlex.split(word) if " " in word else [word]
            except ValueError:
                words += word.split()
        for word in words:
            if word.startswith(("/", "-", "{{", "s3://", "http://", "https://", "$")) or "=" in word:
                continue
            if word.startswith("./") or _SCRIPT.search(word):
                return f"state {step.state!r} runs {word}, a file of the spec's folder"
    return ""


def raw_upload_code(store: ObjectStore, bucket: str, key: str, loaded: LoadedSpec, machine: str,
                    jobs_on_this_machine: bool = False) -> str:
    """The code URI a raw spec upload runs with: its bundle's, staged; "" when its steps need no folder. Raises
    `SpecError` (the inbox's rejection) for a bad bundle, or for steps that need code and have none. `machine`:
    "deployed" (a spec of the stack's specs folder, which runs with the code the deploy gives it, as a run request
    naming it does) or "ad-hoc". `jobs_on_this_machine`: `serve`'s inbox, whose jobs without code start in its specs
    folder."""
    uri = f"s3://{bucket}/{bundle_key(key)}"
    try:
        body = store.get(uri, max_bytes=MAX_BUNDLE_BYTES)  # refused by its size before it is read into memory
    except ObjectTooLarge as exc:
        raise _too_large(uri, exc.size) from None
    if body is not None:
        return stage_bundle(store, bucket, bundle_key(key), body)
    if machine == "deployed" or jobs_on_this_machine:
        return ""  # a deployed spec; or serve, whose jobs start in its specs folder (engine.launch._workdir)
    why = names_folder_code(loaded)
    if why:
        raise SpecError([Problem("$", f"the upload carries no step code, and {why}", _upload_hint(key),
                                 file=f"s3://{bucket}/{key}")])
    return ""
