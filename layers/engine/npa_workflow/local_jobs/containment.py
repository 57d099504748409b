"""Which processes belong to a local job, wherever they went (new sessions, daemons, orphans).

A process group is not a container: a step can `setsid` out of it, or fork a child and exit. Two ways of
holding a job's whole process tree, chosen once per executor:

- **cgroup v2** (Linux, where this process may create cgroups: root on most machines, not in most CI
  containers): one cgroup per job, created *before* the job's wrapper may start its command. The kernel
  puts every descendant in it, whatever it does with sessions or parents, so its `cgroup.procs` is the
  authoritative member list and `cgroup.kill` (Linux ≥ 5.14) ends them all at once.
- **marker** (everywhere else): every job process inherits `NPA_LOCAL_JOB_ID=<id>` in its environment and
  the wrapper is a child subreaper (`PR_SET_CHILD_SUBREAPER`, Linux ≥ 3.4), so orphans stay its
  descendants. Members are the processes whose `/proc/<pid>/environ` carries the marker, plus the job's
  process group. A process that rewrites its own environment escapes this mode (not the cgroup one).

The cgroup mode looks for the marker too: a root step may write its pid into another cgroup's `cgroup.procs`
and leave the job's cgroup, but it keeps its environment. Only a step that does both escapes.

`NPA_WORKFLOW_CGROUPS=off` forces the marker mode (tests pin both modes on machines that allow cgroups).
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterable
from pathlib import Path

MARKER_ENV = "NPA_LOCAL_JOB_ID"
CGROUPS_ENV = "NPA_WORKFLOW_CGROUPS"
_PROC = Path("/proc")
# cgroup v2: a pure v2 host mounts it at /sys/fs/cgroup, a hybrid (v1 + v2) host at /sys/fs/cgroup/unified.
_CGROUP_MOUNTS = (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/unified"))
_PARENT = "npa-workflow-jobs"


def _live(pid: int) -> bool:
    try:
        raw = (_PROC / str(pid) / "stat").read_bytes()
    except OSError:
        return False
    state = raw[raw.rfind(b")") + 2 :].split()[:1]
    return bool(state) and state[0] not in (b"Z", b"X")


def _pgrp(pid: int) -> int | None:
    try:
        raw = (_PROC / str(pid) / "stat").read_bytes()
    except OSError:
        return None
    fields = raw[raw.rfind(b")") + 2 :].split()
    try:
        return int(fields[2])
    except (IndexError, ValueError):
        return None


def cgroup_root() -> Path | None:
    """The directory under which this process may create per-job cgroups, or None."""
    if os.environ.get(CGROUPS_ENV, "").strip().lower() in ("0", "off", "false", "no"):
        return None
    for mount in _CGROUP_MOUNTS:
        if not (mount / "cgroup.procs").exists() or not (mount / "cgroup.controllers").exists():
            continue
        parent = mount / _PARENT
        try:
            parent.mkdir(exist_ok=True)
            probe = parent / f"probe-{os.getpid()}"
            probe.mkdir(exist_ok=True)
            probe.rmdir()
        except OSError:
            continue
        return parent
    return None


def create_cgroup(root: Path, job_id: str) -> Path | None:
    path = root / job_id
    try:
        path.mkdir(exist_ok=True)
    except OSError:
        return None
    return path


def join_cgroup(cgroup: Path, pid: int) -> bool:
    try:
        (cgroup / "cgroup.procs").write_text(f"{pid}\n")
    except OSError:
        return False
    return True


def remove_cgroup(cgroup: str | Path | None) -> None:
    if cgroup:
        with contextlib.suppress(OSError):
            Path(cgroup).rmdir()


def prune(root: Path, min_age_seconds: float = 60.0) -> int:
    """Remove the empty job cgroups left under `root` (a cgroup cannot be removed while its last process is
    still exiting, so an ended job's may outlive it). Young ones are kept: a job being launched has an empty
    cgroup until its wrapper joins it."""
    import time

    removed = 0
    try:
        entries = list(os.scandir(root))
    except OSError:
        return 0
    for entry in entries:
        if not entry.is_dir(follow_symlinks=False) or entry.name.startswith("probe-"):
            continue
        try:
            if time.time() - entry.stat().st_mtime < min_age_seconds or _cgroup_members(Path(entry.path)):
                continue
            os.rmdir(entry.path)
            removed += 1
        except OSError:
            continue
    return removed


def _cgroup_members(cgroup: Path) -> set[int] | None:
    try:
        text = (cgroup / "cgroup.procs").read_text()
    except FileNotFoundError:
        return set()
    except OSError:
        return None
    return {int(p) for p in text.split() if p.isdigit()}


def _marked(job_id: str) -> set[int]:
    needle = f"{MARKER_ENV}={job_id}".encode()
    found: set[int] = set()
    try:
        entries = list(os.scandir(_PROC))
    except OSError:
        return found
    for entry in entries:
        if not entry.name.isdigit():
            continue
        try:
            environ = (_PROC / entry.name / "environ").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0"):
            found.add(int(entry.name))
    return found


def _group(pgid: int) -> set[int]:
    found: set[int] = set()
    with contextlib.suppress(OSError):
        for entry in os.scandir(_PROC):
            if entry.name.isdigit() and _pgrp(int(entry.name)) == pgid:
                found.add(int(entry.name))
    return found


def members(job_id: str, cgroup: str | None, pgid: int | None) -> set[int]:
    """Live processes of the job. With a cgroup: its members, and any process carrying the job's marker (root may
    move a process into another cgroup; it keeps its environment)."""
    if cgroup:
        found = _cgroup_members(Path(cgroup))
        if found is not None:
            return {p for p in found | _marked(job_id) if _live(p)}
    pids = _marked(job_id)
    if pgid:
        pids |= _group(pgid)
    return {p for p in pids if _live(p)}


def signal_all(pids: Iterable[int], sig: signal.Signals, cgroup: str | None = None) -> None:
    if cgroup and sig == signal.SIGKILL:
        # One write ends every member, including any forked while we iterate (Linux >= 5.14).
        with contextlib.suppress(OSError):
            (Path(cgroup) / "cgroup.kill").write_text("1\n")
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
