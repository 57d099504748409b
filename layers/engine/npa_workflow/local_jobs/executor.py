"""Local job executor: each job is a real subprocess with a durable job id.

This is the laptop stand-in for SkyPilot managed jobs (docs/local.md). It offers
the same small surface the cloud runtime needs from SkyPilot: launch with a name, look a job up
by name (adopt on retry), query many jobs in one call, cancel by exact id.

Durability. Everything about a job lives in files under ``state_dir/jobs/``:

- ``<id>.json``  the record (name, command, pid, pgid, status, exit code, timestamps, log path),
  rewritten atomically under a per-job ``fcntl`` lock (``<id>.lock``);
- ``<id>.log``   stdout and stderr of the job;
- ``<id>.exit``  written atomically by :mod:`npa_workflow.local_jobs.job_wrapper` when the command
  ends, so the exit code is known even if the executor that launched the job has exited;
- ``names/<digest of the name>/<id>``  an empty entry, created before the record: looking a job up by
  name (every launch does, to adopt) lists that folder, not every record of every job the home ever ran
  (2,000 of them cost 65 ms per launch). An entry without a record is ignored; records made before the
  index existed are indexed once, by the first lookup (``names/.complete`` says it is done).

Any :class:`LocalExecutor` on the same ``state_dir`` (in any process) sees the same jobs.
A job whose wrapper process is gone without having written its exit file (killed with SIGKILL,
machine rebooted) is reported ``FAILED`` with the error ``process lost …``; it is never
reported ``RUNNING`` forever.

Launch is a transaction (docs/faults.md: "adopt one immutable ID, retry only after authoritative
absence"). The record, with the job's id and its containment (cgroup), is written and
fsynced *before* the wrapper starts; the wrapper starts the command only after the launcher recorded
its pid/pgid and wrote ``go`` on its stdin. A launcher killed at any line leaves either a record whose
job never ran (the wrapper reads end-of-file instead of ``go`` and says so in its exit file) or a record
that names every process of the job.

Containment (:mod:`npa_workflow.local_jobs.containment`). Every job runs in its own session and process
group, in its own cgroup where the machine allows it, and under a wrapper that is a child subreaper;
its members are the cgroup's processes, else the processes carrying the job's id in their environment
plus its process group. :meth:`LocalExecutor.cancel` sends SIGTERM to every member and SIGKILL to what
remains after a grace period; :meth:`LocalExecutor.wait_gone` confirms that no member remains. The
wrapper ends what the command left behind when the command exits, so a job that forks a child or a
``setsid`` daemon and exits 0 leaves nothing running. Liveness checks use ``/proc`` (process start
time and boot id guard against pid reuse, zombies count as gone).

GPUs (:mod:`npa_workflow.local_jobs.gpu_devices`, docs/local.md). On a machine whose ``nvidia-smi -L`` lists
devices, a job launched with ``gpus=N`` is PENDING until its wrapper holds N devices (one ``flock``-ed file
per device under ``gpu_lock_dir``, shared by every executor of this user on the machine), then RUNNING
with ``CUDA_VISIBLE_DEVICES`` set to exactly those devices (``gpus=0``: empty, no device). The locks are
held by the job's processes themselves, so the devices come free when the job ends, is cancelled, or its
processes are killed, whatever happened to the launcher. Asking more than the machine has raises
:class:`GpuRequestError` before any record is written. Without GPUs nothing is allocated and the job's
environment gets no ``CUDA_VISIBLE_DEVICES`` from here.

Environment. A job starts from :func:`npa_workflow.local_jobs.job_environment.base_environment` (an
allow-list), not from this process's whole environment.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import weakref
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from npa_workflow.local_jobs import containment
from npa_workflow.local_jobs.gpu_devices import Gpu, GpuReader, NvidiaSmi
from npa_workflow.local_jobs.job_environment import base_environment
from npa_workflow.timestamps import to_epoch, utc_now

__all__ = [
    "CANCELLED",
    "FAILED",
    "PENDING",
    "GpuRequestError",
    "RUNNING",
    "SUCCEEDED",
    "TERMINAL_STATUSES",
    "JobInfo",
    "LocalExecutor",
    "job_files",
]

PENDING = "PENDING"
RUNNING = "RUNNING"
SUCCEEDED = "SUCCEEDED"
FAILED = "FAILED"
CANCELLED = "CANCELLED"
TERMINAL_STATUSES = frozenset({SUCCEEDED, FAILED, CANCELLED})

LOG = logging.getLogger(__name__)
_WRAPPER = Path(__file__).with_name("job_wrapper.py")
# The wrapper is standard library only: isolated (no user site, no PYTHON* variables, not its own folder on the path)
# and without `site` (the environment's site-packages and their .pth files: about a third of its start-up's CPU,
# which runs beside the job before it on this machine's other core).
_WRAPPER_PYTHON = (sys.executable, "-I", "-S")
_NAMES = "names"  # jobs/names/<digest>/<job id>: the index of jobs by name
_INDEXED = ".complete"  # jobs/names/.complete: every record is in the index
_PROC = Path("/proc")
# A record that never got a pid and whose job has no process (the launching process died between
# writing the record and starting the wrapper) is declared lost once it is this old.
_PENDING_LOST_AFTER_S = 2.0
# What the wrapper gives the command's leftovers (children, daemons) between SIGTERM and SIGKILL.
_SWEEP_GRACE_S = 2.0
# log_tail reads at most this many bytes from the end of a log, whatever its size or line length.
TAIL_BYTES = 64 * 1024


@dataclass(frozen=True)
class JobInfo:
    """What the executor knows about one job at the time of the query."""

    job_id: str
    name: str
    status: str
    exit_code: int | None
    submitted_at: str | None
    started_at: str | None
    ended_at: str | None
    error: str | None
    log_path: str
    secret_names: tuple[str, ...] = ()  # names (never values) of the secrets the job was given
    gpus: int = 0  # devices asked for
    devices: tuple[str, ...] = ()  # the devices it got (its CUDA_VISIBLE_DEVICES), once it started

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES


class GpuRequestError(ValueError):
    """A job asks for more GPUs than this machine has: it could never start."""


def default_gpu_lock_dir() -> Path:
    """Per user and machine (not per state dir): two runs, or `run` beside `serve`, share the same devices."""
    explicit = os.environ.get("NPA_WORKFLOW_GPU_LOCK_DIR", "").strip()
    if explicit:
        return Path(explicit)
    runtime = os.environ.get("XDG_RUNTIME_DIR", "").strip()
    base = Path(runtime) if runtime and Path(runtime).is_dir() else Path(tempfile.gettempdir())
    return base / f"npa-workflow-{os.getuid()}" / "gpu-locks"


def _boot_id() -> str | None:
    try:
        return (_PROC / "sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


def _proc_stat(pid: int) -> tuple[str, int, int] | None:
    """``(state, pgrp, starttime)`` of a process from ``/proc/<pid>/stat``, or None if absent."""
    try:
        raw = (_PROC / str(pid) / "stat").read_bytes().decode("ascii", "replace")
    except (FileNotFoundError, ProcessLookupError):
        return None
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may contain spaces and parentheses.
    rest = raw[raw.rfind(")") + 2 :].split()
    try:
        return rest[0], int(rest[2]), int(rest[19])
    except (IndexError, ValueError):
        return None


def _has_proc() -> bool:
    return (_PROC / "self" / "stat").exists()


def _name_digest(job_name: str) -> str:
    return hashlib.sha256(job_name.encode("utf-8")).hexdigest()[:32]


def _name_entry(jobs_dir: Path, job_name: str, job_id: str) -> Path:
    return jobs_dir / _NAMES / _name_digest(job_name) / job_id


def job_files(jobs_dir: Path, job_id: str) -> list[Path]:
    """Every file of job `job_id` under `jobs_dir` (its record, log, exit file, lock and name entry): what
    pruning a job removes."""
    files = sorted(jobs_dir.glob(f"{job_id}.*"))
    record = _read_json(jobs_dir / f"{job_id}.json")
    if record and isinstance(record.get("name"), str):
        files.append(_name_entry(jobs_dir, record["name"], job_id))
    return files


def _write_json_atomic(path: Path, data: Mapping[str, Any], *, durable: bool = True) -> None:
    """Write `path` whole or not at all (a rename). `durable`: flushed to the disk before the rename, for what
    cannot be found again (a job's identity, its processes); a status read from the world (its exit file, its
    processes gone) can be, so an observation's write need not wait for the disk."""
    tmp = path.with_name(f"{path.name}.tmp.{os.getpid()}.{threading.get_ident()}")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=1, sort_keys=True)
        if durable:
            fh.flush()
            os.fsync(fh.fileno())
    os.replace(tmp, path)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return None


@dataclass(frozen=True)
class _Started:
    """A job wrapper started ahead of its job: in its own session and cgroup, waiting for a job on stdin."""

    job_id: str
    proc: subprocess.Popen[bytes]
    cgroup: str | None
    proc_start: int | None


class _Ahead:
    """The one wrapper kept started ahead (`start_ahead`): taken by a launch, refilled on a thread after it.

    Starting a wrapper costs a process start and, with cgroups, its move into the job's cgroup (the kernel waits
    for an RCU grace period: 5-15 ms here); ahead, neither is on a launch's path. A wrapper started ahead has no
    record and runs nothing until it is given a job, after its record is written; let go (`close`, this
    process ending: its stdin ends), it exits and removes its empty log."""

    def __init__(self, enabled: bool) -> None:
        self._lock = threading.Lock()
        self._ready: _Started | None = None
        self._starting = False
        self._closed = not enabled

    def take(self) -> _Started | None:
        with self._lock:
            ready, self._ready = self._ready, None
        if ready is not None and ready.proc.poll() is not None:  # it died waiting (killed): start one anew
            _let_go(ready)
            return None
        return ready

    def claim(self) -> bool:
        """Whether the caller should start the next one (none ready, none being started, not closed)."""
        with self._lock:
            if self._closed or self._ready is not None or self._starting:
                return False
            self._starting = True
            return True

    def fill(self, start: Any) -> None:
        started = None
        try:
            started = start()
        finally:
            with self._lock:
                self._starting = False
                keep = started is not None and not self._closed
                if keep:
                    self._ready = started
        if started is not None and not keep:
            _let_go(started)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            ready, self._ready = self._ready, None
        if ready is not None:
            _let_go(ready)


class _Releaser:
    """Ended jobs' cgroups, removed on a thread of their own. The kernel's removal of a cgroup waits for an RCU
    grace period (2-5 ms here), and the status read that sees a job end is the watch's, before it completes the
    job's token: off that path, the removal costs the run nothing. A cgroup whose last process is still exiting
    cannot be removed yet: it is tried again for a moment. What is queued when the executor closes (or its
    process exits) is removed before that returns; a process killed first leaves empty cgroups, which
    `containment.prune` removes."""

    RETRIES_S = (0.0, 0.01, 0.05, 0.2)  # a cgroup busy with an exiting process: tried again after these

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[str | threading.Event] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def release(self, cgroup: str | Path | None) -> None:
        if not cgroup:
            return
        self._queue.put(str(cgroup))
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="npa-cgroup-release", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if isinstance(item, threading.Event):  # a flush: everything queued before it is done
                item.set()
                continue
            for delay in self.RETRIES_S:
                time.sleep(delay)
                containment.remove_cgroup(item)
                if not os.path.isdir(item):
                    break

    def flush(self, timeout: float = 2.0) -> None:
        """Return once what was queued before is removed (or `timeout` passed)."""
        with self._lock:
            if self._thread is None:
                return
        done = threading.Event()
        self._queue.put(done)
        done.wait(timeout)


def _let_go(started: _Started) -> None:
    """End a wrapper started ahead that never got a job: its stdin ends, it exits (no exit file, no log). Not
    waited for here (it may still be starting): `subprocess` reaps a dropped child at its next start."""
    with contextlib.suppress(OSError):
        if started.proc.stdin is not None:
            started.proc.stdin.close()


def _close(ahead: _Ahead, releaser: _Releaser) -> None:
    ahead.close()
    releaser.flush()


class LocalExecutor:
    """Launch, query and cancel local jobs whose state lives under ``state_dir``.

    ``env`` is the base environment of every job (default: the allow-listed part of this process's
    environment, see :mod:`npa_workflow.local_jobs.job_environment`); the ``env`` given to :meth:`launch` is
    laid over it. ``start_ahead``: after each launch, the next job's wrapper is started (and moved into its
    cgroup) on a thread, so that the next launch hands it its job instead of starting a process (`_Ahead`;
    jobs that take GPUs are started with their command as before). Methods are thread-safe and may be called
    concurrently from several processes sharing ``state_dir``.
    """

    def __init__(
        self,
        state_dir: Path,
        env: Mapping[str, str] | None = None,
        *,
        grace_seconds: float = 10.0,
        gpu_reader: GpuReader | None = None,
        gpu_lock_dir: Path | None = None,
        start_ahead: bool = False,
    ) -> None:
        self.state_dir = Path(state_dir)
        self.jobs_dir = self.state_dir / "jobs"
        if not self.jobs_dir.exists():  # a new home: no record from before the name index
            (self.jobs_dir / _NAMES).mkdir(parents=True, exist_ok=True)
            (self.jobs_dir / _NAMES / _INDEXED).touch()
        self.jobs_dir.mkdir(parents=True, exist_ok=True)
        self._base_env = base_environment() if env is None else dict(env)
        self.grace_seconds = grace_seconds
        self._gpu_reader = gpu_reader if gpu_reader is not None else NvidiaSmi()
        self._gpu_list: list[Gpu] | None = None
        self.gpu_lock_dir = Path(gpu_lock_dir) if gpu_lock_dir is not None else default_gpu_lock_dir()
        self._cgroups = containment.cgroup_root()
        if self._cgroups is not None:
            containment.prune(self._cgroups)
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self._procs_lock = threading.Lock()
        self._boot_id = _boot_id()
        self._use_proc = _has_proc()
        self._ahead = _Ahead(start_ahead)
        self._releaser = _Releaser()
        weakref.finalize(self, _close, self._ahead, self._releaser)  # also at this process's exit

    # ------------------------------------------------------------------ paths and records
    def _record_path(self, job_id: str) -> Path:
        return self.jobs_dir / f"{job_id}.json"

    def _log_path(self, job_id: str) -> Path:
        return self.jobs_dir / f"{job_id}.log"

    def _exit_path(self, job_id: str) -> Path:
        return self.jobs_dir / f"{job_id}.exit"

    def _started_path(self, job_id: str) -> Path:
        return self.jobs_dir / f"{job_id}.started"

    def gpus(self) -> list[Gpu]:
        """This machine's GPUs (read once per executor)."""
        if self._gpu_list is None:
            self._gpu_list = self._gpu_reader.gpus()
        return list(self._gpu_list)

    @contextlib.contextmanager
    def _locked(self, job_id: str) -> Iterator[None]:
        with open(self.jobs_dir / f"{job_id}.lock", "a+b") as fh:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)

    @staticmethod
    def _valid_id(job_id: str) -> bool:
        return bool(job_id) and "/" not in job_id and "\\" not in job_id and not job_id.startswith(".")

    # ------------------------------------------------------------------ launch
    def launch(
        self,
        job_name: str,
        command: list[str],
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        *,
        secret_names: tuple[str, ...] = (),
        gpus: int = 0,
    ) -> str:
        """Start ``command`` as a new job and return its durable job id.

        ``gpus``: devices the job gets to itself (on a machine with GPUs; it waits PENDING until they are free).
        """
        if not command:
            raise ValueError(f"job {job_name!r}: empty command")
        machine_gpus = self.gpus()
        if machine_gpus and gpus > len(machine_gpus):
            raise GpuRequestError(f"job {job_name!r} asks for {gpus} GPU(s) but this machine has "
                                  f"{len(machine_gpus)} (nvidia-smi -L)")
        ahead = None if machine_gpus else self._ahead.take()  # a GPU job's wrapper takes its devices: not ahead
        job_id = ahead.job_id if ahead else f"local-{uuid.uuid4().hex[:16]}"
        record_path = self._record_path(job_id)
        log_path = self._log_path(job_id)
        if ahead:
            cgroup = Path(ahead.cgroup) if ahead.cgroup else None
        else:
            cgroup = containment.create_cgroup(self._cgroups, job_id) if self._cgroups else None
        record: dict[str, Any] = {
            "job_id": job_id,
            "name": job_name,
            "command": [str(c) for c in command],
            "cwd": str(cwd) if cwd is not None else None,
            "env_keys": sorted((env or {}).keys()),
            "secret_names": list(secret_names),
            "gpus": gpus if machine_gpus else 0,
            "devices": [],
            "status": PENDING,
            "exit_code": None,
            "error": None,
            "pid": None,
            "pgid": None,
            "proc_start": None,
            "cgroup": str(cgroup) if cgroup else None,
            "boot_id": self._boot_id,
            "submitted_at": utc_now(),
            "started_at": None,
            "ended_at": None,
            "cancel_requested_at": None,
            "log_path": str(log_path),
        }
        job_env = dict(self._base_env)
        job_env.update({str(k): str(v) for k, v in (env or {}).items()})
        job_env[containment.MARKER_ENV] = job_id
        job_env["NPA_LOCAL_JOB_NAME"] = job_name
        if ahead:
            return self._launch_in(ahead, record, job_env)

        with self._locked(job_id):
            # The name entry first (a lookup by name must find every recorded job), then the identity and the
            # containment, durable before any process of the job exists.
            self._index(job_name, job_id)
            _write_json_atomic(record_path, record)
            argv = [*_WRAPPER_PYTHON, str(_WRAPPER), str(self._exit_path(job_id)), "--grace", str(_SWEEP_GRACE_S)]
            if cgroup:
                argv += ["--cgroup", str(cgroup)]
            if machine_gpus:
                argv += ["--gpus", str(record["gpus"]),
                         "--gpu-devices", ",".join(f"{g.index}={g.lock_name}" for g in machine_gpus),
                         "--gpu-locks", str(self.gpu_lock_dir), "--started-file", str(self._started_path(job_id))]
            argv += ["--", *record["command"]]
            try:
                with open(log_path, "ab") as log:
                    proc = subprocess.Popen(
                        argv,
                        stdin=subprocess.PIPE,  # the go-signal: the command starts only after "go"
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        cwd=str(cwd) if cwd is not None else None,
                        env=job_env,
                        start_new_session=True,
                        close_fds=True,
                    )
            except OSError as exc:
                record.update(
                    status=FAILED,
                    exit_code=None,
                    error=f"could not start job: {exc}",
                    ended_at=utc_now(),
                )
                _write_json_atomic(record_path, record)
                containment.remove_cgroup(cgroup)
                return job_id
            if cgroup and not containment.join_cgroup(cgroup, proc.pid):
                containment.remove_cgroup(cgroup)
                record["cgroup"] = None  # the marker and the group still hold the job
            stat = _proc_stat(proc.pid) if self._use_proc else None
            waits = bool(record["gpus"])  # PENDING until its wrapper holds the devices (its started file)
            record.update(
                status=PENDING if waits else RUNNING,
                pid=proc.pid,
                pgid=proc.pid,  # start_new_session: the wrapper leads its own group
                proc_start=stat[2] if stat else None,
                started_at=None if waits else utc_now(),
            )
            _write_json_atomic(record_path, record)
            assert proc.stdin is not None
            with contextlib.suppress(OSError):  # a wrapper already gone is found by the next observation
                proc.stdin.write(b"go\n")
                proc.stdin.close()
        with self._procs_lock:
            self._procs[job_id] = proc
        self._start_ahead()
        return job_id

    def _launch_in(self, ahead: _Started, record: dict[str, Any], job_env: dict[str, str]) -> str:
        """The job in a wrapper started ahead: its record, complete (the wrapper's pid, group and cgroup are
        known), is durable before the wrapper is given the job, the one thing it waits for."""
        job_id = record["job_id"]
        with self._locked(job_id):
            self._index(record["name"], job_id)
            record.update(status=RUNNING, pid=ahead.proc.pid, pgid=ahead.proc.pid, proc_start=ahead.proc_start,
                          started_at=utc_now())
            _write_json_atomic(self._record_path(job_id), record)
            job = {"command": record["command"], "env": job_env, "cwd": record["cwd"]}
            assert ahead.proc.stdin is not None
            with contextlib.suppress(OSError):  # a wrapper gone since is found by the next observation
                ahead.proc.stdin.write(json.dumps(job).encode("utf-8") + b"\n")
                ahead.proc.stdin.close()
        with self._procs_lock:
            self._procs[job_id] = ahead.proc
        self._start_ahead()
        return job_id

    def _start_ahead(self) -> None:
        """Start the next job's wrapper now, on a thread, so that the next launch finds it ready."""
        if not self.gpus() and self._ahead.claim():  # (a GPU job's wrapper is started with its command)
            threading.Thread(target=self._ahead.fill, args=(self._start_wrapper_ahead,), daemon=True,
                             name="npa-job-ahead").start()

    def _start_wrapper_ahead(self) -> _Started | None:
        job_id = f"local-{uuid.uuid4().hex[:16]}"
        cgroup = containment.create_cgroup(self._cgroups, job_id) if self._cgroups else None
        argv = [*_WRAPPER_PYTHON, str(_WRAPPER), str(self._exit_path(job_id)), "--grace", str(_SWEEP_GRACE_S)]
        if cgroup:
            argv += ["--cgroup", str(cgroup)]
        argv.append("--job-on-stdin")
        try:
            with open(self._log_path(job_id), "ab") as log:
                proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT,
                                        env=dict(self._base_env), start_new_session=True, close_fds=True)
        except OSError as exc:
            LOG.debug("could not start a job wrapper ahead: %s", exc)
            containment.remove_cgroup(cgroup)
            self._log_path(job_id).unlink(missing_ok=True)
            return None
        if cgroup and not containment.join_cgroup(cgroup, proc.pid):
            containment.remove_cgroup(cgroup)
            cgroup = None  # the group and the marker still hold the job
        stat = _proc_stat(proc.pid) if self._use_proc else None
        return _Started(job_id, proc, str(cgroup) if cgroup else None, stat[2] if stat else None)

    def close(self) -> None:
        """Let the wrapper started ahead go (it exits, leaving nothing); later launches start their own. Ended
        jobs' cgroups still queued for removal are removed."""
        _close(self._ahead, self._releaser)

    # ------------------------------------------------------------------ lookups
    def find_by_name(self, job_name: str) -> list[str]:
        """Ids of all jobs named exactly ``job_name``, oldest first."""
        self._index_records_once()
        try:
            candidates = os.listdir(self.jobs_dir / _NAMES / _name_digest(job_name))
        except FileNotFoundError:
            return []
        found: list[tuple[str, str]] = []
        for job_id in candidates:
            record = _read_json(self._record_path(job_id)) if self._valid_id(job_id) else None
            if record and record.get("name") == job_name and record.get("job_id") == job_id:
                found.append((record.get("submitted_at") or "", job_id))
        return [job_id for _, job_id in sorted(found)]

    def _index(self, job_name: str, job_id: str) -> None:
        entry = _name_entry(self.jobs_dir, job_name, job_id)
        entry.parent.mkdir(parents=True, exist_ok=True)
        entry.touch()

    def _index_records_once(self) -> None:
        """Index the records of a home that had jobs before the index existed (once; idempotent if two
        processes do it at once)."""
        done = self.jobs_dir / _NAMES / _INDEXED
        if done.exists():
            return
        for path in self.jobs_dir.glob("*.json"):
            record = _read_json(path)
            if record and isinstance(record.get("name"), str) and record.get("job_id") == path.stem:
                self._index(record["name"], path.stem)
        done.parent.mkdir(parents=True, exist_ok=True)
        done.touch()

    def statuses(self, job_ids: list[str]) -> dict[str, JobInfo]:
        """Current :class:`JobInfo` of each known id; unknown ids are absent from the result."""
        self._reap()
        result: dict[str, JobInfo] = {}
        for job_id in dict.fromkeys(job_ids):
            if not self._valid_id(job_id) or not self._record_path(job_id).exists():
                continue
            record = self._refresh(job_id)
            if record is not None:
                result[job_id] = self._info(record)
        return result

    def status(self, job_id: str) -> JobInfo | None:
        return self.statuses([job_id]).get(job_id)

    def log_tail(self, job_id: str, lines: int = 50) -> str:
        """The last ``lines`` lines of the job's combined stdout/stderr ('' if none)."""
        if not self._valid_id(job_id) or lines <= 0:
            return ""
        path = self._log_path(job_id)
        try:
            with open(path, "rb") as fh:
                # One read of at most TAIL_BYTES from the end: the cost does not grow with the log's size
                # or its line length (a log with no newline at all is one line).
                end = fh.seek(0, os.SEEK_END)
                start = max(0, end - TAIL_BYTES)
                fh.seek(start)
                data = fh.read(end - start)
        except (FileNotFoundError, IsADirectoryError, PermissionError):
            return ""
        if start > 0 and b"\n" in data:
            data = data[data.index(b"\n") + 1 :] or data  # drop the partial first line
        text = data.decode("utf-8", "replace")
        tail = text.splitlines()[-lines:]
        return "\n".join(tail) + ("\n" if tail and text.endswith("\n") else "")

    # ------------------------------------------------------------------ cancel
    def cancel(self, job_ids: list[str], grace_seconds: float | None = None) -> list[str]:
        """Cancel jobs by exact id: SIGTERM to every process of each job, SIGKILL after the grace.

        The request is recorded first (``cancel_requested_at``), so the job is reported CANCELLED even
        if this process dies while signalling. Jobs already finished keep their status. Returns the ids
        that were (or already had been) cancelled; :meth:`wait_gone` confirms that no process remains.
        """
        grace = self.grace_seconds if grace_seconds is None else grace_seconds
        self._reap()
        targets: dict[str, dict[str, Any]] = {}
        cancelled: list[str] = []
        for job_id in dict.fromkeys(job_ids):
            if not self._valid_id(job_id):
                continue
            with self._locked(job_id):
                record = _read_json(self._record_path(job_id))
                if record is None:
                    continue
                if record.get("status") == CANCELLED:
                    cancelled.append(job_id)
                    continue
                if record.get("status") in TERMINAL_STATUSES:
                    continue
                observed = self._observe(job_id, record)
                if observed.get("status") in TERMINAL_STATUSES:
                    # Finished on its own before the cancel: keep its real outcome.
                    _write_json_atomic(self._record_path(job_id), observed)
                    continue
                record["cancel_requested_at"] = record.get("cancel_requested_at") or utc_now()
                _write_json_atomic(self._record_path(job_id), record)
            cancelled.append(job_id)
            targets[job_id] = record

        self._kill(list(targets.values()), grace)
        for job_id in cancelled:
            self._finalize_cancel(job_id)
        return cancelled

    def _kill(self, records: list[dict[str, Any]], grace: float) -> None:
        """SIGTERM to every member of these jobs, then SIGKILL (repeated) to whatever is left."""
        if not records:
            return
        members = {r["job_id"]: self._members(r) for r in records}
        for record in records:
            containment.signal_all(members[record["job_id"]], signal.SIGTERM)
        deadline = time.monotonic() + max(grace, 0.0)
        while any(members.values()) and time.monotonic() < deadline:
            time.sleep(0.05)
            self._reap()
            members = {r["job_id"]: self._members(r) for r in records}
        for _ in range(40):  # a job may fork while it is being killed: repeat until nothing is left
            if not any(members.values()):
                break
            for record in records:
                if members[record["job_id"]]:
                    containment.signal_all(members[record["job_id"]], signal.SIGKILL, record.get("cgroup"))
            time.sleep(0.025)
            self._reap()
            members = {r["job_id"]: self._members(r) for r in records}

    def wait_gone(self, job_ids: list[str], timeout: float = 10.0) -> bool:
        """True once no process of any of these jobs remains (False on timeout)."""
        records = [r for r in (_read_json(self._record_path(j)) for j in dict.fromkeys(job_ids)
                               if self._valid_id(j)) if r]
        deadline = time.monotonic() + timeout
        while True:
            self._reap()
            records = [r for r in records if self._members(r)]
            if not records:
                for job_id in job_ids:
                    self._release(job_id)
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)

    # ------------------------------------------------------------------ internals
    def _reap(self) -> None:
        """Collect exit statuses of wrappers started by this instance (no zombies left)."""
        with self._procs_lock:
            for job_id, proc in list(self._procs.items()):
                if proc.poll() is not None:
                    del self._procs[job_id]

    def _leader_alive(self, record: Mapping[str, Any]) -> bool:
        pid = record.get("pid")
        if not pid:
            return False
        if record.get("boot_id") and self._boot_id and record["boot_id"] != self._boot_id:
            return False
        if self._use_proc:
            stat = _proc_stat(int(pid))
            if stat is None or stat[0] in ("Z", "X"):
                return False
            start = record.get("proc_start")
            return start is None or stat[2] == int(start)
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def _trusted_pgid(self, record: Mapping[str, Any]) -> int | None:
        """The job's pgid unless the number may now belong to an unrelated group (other boot, pid reuse)."""
        pgid = record.get("pgid")
        if not pgid:
            return None
        if record.get("boot_id") and self._boot_id and record["boot_id"] != self._boot_id:
            return None
        if self._use_proc:
            stat = _proc_stat(int(pgid))
            start = record.get("proc_start")
            if stat is not None and stat[0] not in ("Z", "X") and start is not None and stat[2] != int(start):
                return None  # the number now belongs to an unrelated process
        # Leader gone but the group still exists: the kernel does not hand out a number that
        # is still in use as a process-group id, so the group is still ours.
        return int(pgid)

    def _members(self, record: Mapping[str, Any]) -> set[int]:
        """Live processes of the job (its cgroup, else its marker and its process group)."""
        if record.get("boot_id") and self._boot_id and record["boot_id"] != self._boot_id:
            return set()
        pgid = self._trusted_pgid(record)
        if not self._use_proc:
            return {pgid} if pgid is not None and self._kill_probe(pgid) else set()
        return containment.members(str(record.get("job_id", "")), record.get("cgroup"), pgid)

    @staticmethod
    def _kill_probe(pgid: int) -> bool:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def _release(self, job_id: str) -> None:
        """Remove an ended job's (empty) cgroup."""
        record = _read_json(self._record_path(job_id)) if self._valid_id(job_id) else None
        if record and record.get("status") in TERMINAL_STATUSES:
            containment.remove_cgroup(record.get("cgroup"))

    def _read_exit(self, job_id: str) -> dict[str, Any] | None:
        return _read_json(self._exit_path(job_id))

    def _refresh(self, job_id: str) -> dict[str, Any] | None:
        """Bring the record up to date with the process world; persist terminal transitions."""
        record = _read_json(self._record_path(job_id))
        if record is None or record.get("status") in TERMINAL_STATUSES:
            return record
        with self._locked(job_id):
            record = _read_json(self._record_path(job_id))
            if record is None or record.get("status") in TERMINAL_STATUSES:
                return record
            updated = self._observe(job_id, record)
            if updated is not record:
                # Observed, not decided: lost with the machine (not with this process), it is observed again.
                _write_json_atomic(self._record_path(job_id), updated, durable=False)
                if updated.get("status") in TERMINAL_STATUSES:
                    self._releaser.release(updated.get("cgroup"))
            return updated

    def _started(self, record: dict[str, Any]) -> dict[str, Any]:
        """A job that waited for GPUs is RUNNING once its wrapper wrote which devices it got."""
        if record.get("status") != PENDING or not record.get("pid") or not record.get("gpus"):
            return record
        started = _read_json(self._started_path(str(record["job_id"])))
        if started is None:
            return record
        return {**record, "status": RUNNING, "devices": [str(d) for d in started.get("devices") or []],
                "started_at": started.get("started_at") or utc_now()}

    def _observe(self, job_id: str, record: dict[str, Any]) -> dict[str, Any]:
        exit_info = self._read_exit(job_id)
        record = self._started(record)
        if exit_info is None:
            if self._leader_alive(record) or self._members(record):
                # Running (or PENDING, waiting for GPUs); or the wrapper died (SIGKILL) but processes of the
                # job still run: it is still working, its exit code will not be known.
                return record
            # The wrapper may have written the exit file just before exiting.
            exit_info = self._read_exit(job_id)
        if exit_info is None:
            if record.get("status") == PENDING and not record.get("pid") and not self._use_proc:
                # Without /proc the job's processes cannot be listed: give the launcher time.
                submitted = to_epoch(record.get("submitted_at")) or 0.0
                if time.time() - submitted <= _PENDING_LOST_AFTER_S:
                    return record
            if record.get("cancel_requested_at"):
                return {**record, "status": CANCELLED, "error": "cancelled",
                        "ended_at": record.get("ended_at") or utc_now()}
            if record.get("status") == PENDING and not record.get("pid"):
                error = "process lost: the job was never started (its launcher died before starting it)"
            else:
                error = (f"process lost: job process {record.get('pid')} is gone and recorded no exit "
                         "code (killed, or the machine restarted)")
            return {**record, "status": FAILED, "error": error, "ended_at": utc_now()}
        exit_code = exit_info.get("exit_code")
        if record.get("cancel_requested_at"):
            status, error = CANCELLED, "cancelled"
        elif exit_info.get("not_started"):
            status, error = FAILED, str(exit_info.get("error") or "process lost: the job was never started")
        elif exit_code == 0:
            status, error = SUCCEEDED, None
        else:
            status = FAILED
            error = exit_info.get("error") or f"exit code {exit_code}"
        return {
            **record,
            "status": status,
            "exit_code": exit_code,
            "error": error,
            "ended_at": exit_info.get("ended_at") or utc_now(),
        }

    def _finalize_cancel(self, job_id: str) -> None:
        with self._locked(job_id):
            record = _read_json(self._record_path(job_id))
            if record is None or record.get("status") in TERMINAL_STATUSES:
                return
            exit_info = self._read_exit(job_id) or {}
            record.update(
                status=CANCELLED,
                exit_code=exit_info.get("exit_code"),
                error="cancelled",
                ended_at=exit_info.get("ended_at") or utc_now(),
            )
            _write_json_atomic(self._record_path(job_id), record)

    @staticmethod
    def _info(record: Mapping[str, Any]) -> JobInfo:
        return JobInfo(
            job_id=record["job_id"],
            name=record.get("name", ""),
            status=record.get("status", FAILED),
            exit_code=record.get("exit_code"),
            submitted_at=record.get("submitted_at"),
            started_at=record.get("started_at"),
            ended_at=record.get("ended_at"),
            error=record.get("error"),
            log_path=record.get("log_path", ""),
            secret_names=tuple(record.get("secret_names") or ()),
            gpus=int(record.get("gpus") or 0),
            devices=tuple(record.get("devices") or ()),
        )


def waiting_for_gpus(state_dir: Path, job_id: str) -> int:
    """How many GPUs a job waits for before it starts (0: it does not wait). A plain read of its record and
    started file, no lock and no write: what status views ask several times a second."""
    if not LocalExecutor._valid_id(job_id):
        return 0
    jobs = Path(state_dir) / "jobs"
    record = _read_json(jobs / f"{job_id}.json")
    if not record or record.get("status") != PENDING or not record.get("gpus"):
        return 0
    return 0 if (jobs / f"{job_id}.started").exists() else int(record["gpus"])
