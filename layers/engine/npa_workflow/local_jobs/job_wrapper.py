"""Run one local job inside its containment and record its exit code durably.

Usage (run by :class:`npa_workflow.local_jobs.executor.LocalExecutor`, never by hand)::

    python -I job_wrapper.py <exit-file> [--cgroup DIR] [--grace SECONDS]
        [--gpus N --gpu-devices I=UUID,... --gpu-locks DIR --started-file PATH] -- <command> [args...]
    python -I job_wrapper.py <exit-file> [--cgroup DIR] [--grace SECONDS] --job-on-stdin

Started ahead (``--job-on-stdin``; the executor keeps one such wrapper ready, in its cgroup, so that a launch
does not wait for a process to start and join its cgroup): instead of ``go`` the wrapper reads one JSON line,
``{"command": [...], "env": {...}, "cwd": "..." | null}``, and starts that command with exactly that
environment. Its stdin ending before that line is read means either the job was recorded and its launcher
stopped (the exit file says it never started, as below) or no job was ever given to it (no record next to the
exit file: it leaves nothing behind and exits).

The launch is a transaction. The executor writes the job's record (its id, and its cgroup when the machine
has them) *before* it starts this wrapper, starts it in a new session, records the wrapper's pid/pgid and
only then writes ``go`` on the wrapper's stdin. The wrapper starts the command only after reading ``go``;
if its stdin ends first (the launcher was killed mid-launch) it writes an exit file saying the job never
started and exits: a job nobody recorded never runs.

Containment. The wrapper makes itself a child subreaper (``PR_SET_CHILD_SUBREAPER``), so a process the
command orphans (``fork`` and exit, ``setsid`` daemons) is re-parented to the wrapper instead of init.
When the command ends, every process still in the job (its cgroup's members, else the wrapper's
descendants) gets SIGTERM, then SIGKILL after ``--grace`` seconds; the exit file is written after that,
so a job is never reported ended while a process of it still runs. SIGTERM/SIGINT/SIGHUP sent to the
wrapper are forwarded to the command and to every other job process.

GPUs (only on a machine that has them; docs/local.md). After ``go`` the wrapper takes ``--gpus N`` of the
``--gpu-devices`` by locking one file per device under ``--gpu-locks`` (``flock``, non-blocking): it takes
N free devices at once or none (so two waiting jobs cannot each hold half of what the other needs), and
retries until it has them, the job staying PENDING meanwhile. Then it writes ``--started-file``
(``{"devices": [...], "started_at": ...}``) and starts the command with ``CUDA_VISIBLE_DEVICES`` set to
exactly those devices (empty for ``--gpus 0``: no device) and ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` (CUDA's
default order is fastest-first; nvidia-smi numbers in PCI bus order). The command inherits the lock
files' descriptors: a device stays taken while the wrapper *or* the command (or a child that kept the
descriptor) lives, and the kernel frees it when the last of them ends however it ends (kill -9 included).

The exit file (JSON, written atomically)::

    {"exit_code": 0, "signal": null, "error": null, "child_pid": 1234, "ended_at": "…Z"}

A child killed by a signal gets the shell's convention ``128 + signal number`` as exit code and the
signal's name in ``signal``. A command that cannot be started gets 127 (not found) or 126 (not
executable) and the reason in ``error``; a job that never got its go-signal has ``"not_started": true``.

The file only imports the standard library so that it runs with ``python -I`` from any environment,
whatever the job's ``PYTHONPATH``: the exit code of a job is known even when the executor that launched
it has gone away.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime

_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_PR_SET_CHILD_SUBREAPER = 36
_GO = b"go\n"
_GPU_POLL_S = 0.2


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _write_exit(path: str, record: dict) -> None:
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(record, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _become_subreaper() -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _read_stdin(enough: Callable[[bytes], bool], size: Callable[[bytes], int]) -> bytes | None:
    """What the launcher writes on stdin, read until `enough` of it (`size`: how much to read next, so as never to
    read past it); None when stdin ends or fails first. Then stdin is /dev/null: the command reads nothing of the
    launcher's pipe."""
    data = b""
    while not enough(data):
        try:
            chunk = os.read(0, size(data))
        except InterruptedError:  # pragma: no cover - PEP 475 retries
            continue
        except OSError:
            return None
        if not chunk:
            return None
        data += chunk
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
    return data


def _wait_for_go() -> bool:
    return _read_stdin(lambda data: len(data) >= len(_GO), lambda data: len(_GO) - len(data)) == _GO


def _parents() -> dict[int, int]:
    parents: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                raw = fh.read()
        except OSError:
            continue
        fields = raw[raw.rfind(b")") + 2 :].split()
        if len(fields) > 1 and fields[0] not in (b"Z", b"X"):
            parents[int(name)] = int(fields[1])
    return parents


def _marked(marker: str) -> set[int]:
    """Processes whose environment carries the job's marker (`NPA_LOCAL_JOB_ID=<id>`): one that wrote its pid into
    another cgroup's `cgroup.procs` left the job's cgroup, not its environment."""
    needle, found = f"NPA_LOCAL_JOB_ID={marker}".encode(), set()
    for name in os.listdir("/proc") if marker and os.path.isdir("/proc") else ():
        if name.isdigit():
            with contextlib.suppress(OSError):
                with open(f"/proc/{name}/environ", "rb") as fh:
                    if needle in fh.read().split(b"\0"):
                        found.add(int(name))
    return found


def _job_processes(cgroup: str | None) -> set[int]:
    """Every live process of the job except this wrapper."""
    me = os.getpid()
    if cgroup:
        try:
            with open(os.path.join(cgroup, "cgroup.procs")) as fh:
                return {int(p) for p in fh.read().split() if p.isdigit()} - {me}
        except OSError:
            pass
    if not os.path.isdir("/proc"):
        return set()
    parents = _parents()
    found: set[int] = set()
    frontier = [me]
    while frontier:
        parent = frontier.pop()
        for pid, ppid in parents.items():
            if ppid == parent and pid not in found:
                found.add(pid)
                frontier.append(pid)
    return found


def _reap_children() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _signal(pids: set[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _sweep(cgroup: str | None, grace: float, find: Callable[[], set[int]] | None = None) -> None:
    """End whatever the command left behind (`find`: the job's processes): SIGTERM, then SIGKILL after the grace,
    until none is left."""
    find = find or (lambda: _job_processes(cgroup))
    _reap_children()
    left = find()
    if not left:
        return
    _signal(left, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        _reap_children()
        left = find()
    for _ in range(50):  # new forks may appear while we kill: repeat until none is left
        if not left:
            break
        _signal(left, signal.SIGKILL)
        time.sleep(0.02)
        _reap_children()
        left = find()


def _try_take(lock_dir: str, devices: list[tuple[str, str]], count: int) -> list[tuple[str, int]] | None:
    """``count`` devices as (index, locked descriptor), all or none."""
    held: list[tuple[str, int]] = []
    for index, lock_name in devices:
        fd = os.open(os.path.join(lock_dir, f"{lock_name}.lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        held.append((index, fd))
        if len(held) == count:
            return held
    for _, fd in held:  # not enough free: give back what we took, so nobody waits on a partial holder
        os.close(fd)
    return None


def _take_gpus(lock_dir: str, devices: list[tuple[str, str]], count: int) -> list[tuple[str, int]]:
    os.makedirs(lock_dir, mode=0o700, exist_ok=True)
    while True:
        held = _try_take(lock_dir, devices, count)
        if held is not None:
            return held
        time.sleep(_GPU_POLL_S)


def _read_job() -> dict | None:
    """The job given on stdin (one JSON line), or None when stdin ends first or the line is not a job."""
    data = _read_stdin(lambda data: data.endswith(b"\n"), lambda data: 65536)
    if data is None:
        return None
    try:
        job = json.loads(data)
    except ValueError:
        return None
    command = job.get("command") if isinstance(job, dict) else None
    if not (isinstance(command, list) and command and all(isinstance(c, str) for c in command)):
        return None
    if not isinstance(job.get("env"), dict):
        return None
    return job


class _Args:
    def __init__(self, exit_path: str, command: list[str]) -> None:
        self.exit_path, self.command = exit_path, command
        self.job_on_stdin = False
        self.cgroup: str | None = None
        self.grace = 2.0
        self.gpus: int | None = None  # None: the machine has no GPUs, no allocation
        self.gpu_devices: list[tuple[str, str]] = []
        self.gpu_locks = ""
        self.started_file = ""


def _parse(argv: list[str]) -> _Args | None:
    if not argv or argv[0] in ("--", "--job-on-stdin"):
        return None
    if "--" in argv:
        split = argv.index("--")
        head, command = argv[:split], argv[split + 1 :]
        if not command:
            return None
    elif "--job-on-stdin" in argv:
        head, command = argv, []
    else:
        return None
    args = _Args(head[0], command)
    rest = head[1:]
    while rest:
        if rest[0] == "--job-on-stdin":
            args.job_on_stdin, rest = True, rest[1:]
            continue
        flag, value, rest = rest[0], rest[1] if len(rest) > 1 else "", rest[2:]
        if flag == "--cgroup":
            args.cgroup = value or None
        elif flag == "--grace":
            args.grace = float(value)
        elif flag == "--gpus":
            args.gpus = int(value)
        elif flag == "--gpu-devices":
            args.gpu_devices = [tuple(d.split("=", 1)) for d in value.split(",") if "=" in d]  # type: ignore[misc]
        elif flag == "--gpu-locks":
            args.gpu_locks = value
        elif flag == "--started-file":
            args.started_file = value
        else:
            return None
    if args.gpus is not None and (not args.gpu_locks or not args.started_file or args.gpus > len(args.gpu_devices)):
        return None
    if args.job_on_stdin and (args.command or args.gpus is not None):  # GPU jobs are started with their command
        return None
    return args


def _sibling(exit_path: str, suffix: str) -> str:
    """The job's other file with `suffix` (its record `.json`, its log `.log`) beside `<jobs>/<id>.exit`."""
    return (exit_path[: -len(".exit")] if exit_path.endswith(".exit") else exit_path) + suffix


def _child_env(args: _Args) -> tuple[dict[str, str] | None, list[int]]:
    """The command's environment and the lock descriptors it inherits (waits for the devices)."""
    if args.gpus is None:
        return None, []
    held = _take_gpus(args.gpu_locks, args.gpu_devices, args.gpus) if args.gpus else []
    devices = [index for index, _ in held]
    _write_exit(args.started_file, {"devices": devices, "started_at": _now()})
    env = dict(os.environ)
    env["CUDA_VISIBLE_DEVICES"] = ",".join(devices)
    env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    return env, [fd for _, fd in held]


REDACT_ENV = "NPA_WORKFLOW_REDACT"  # names (never values) of the secrets in the job's environment


def _log_redactor(env: dict[str, str] | os._Environ[str]) -> Callable[[str], str] | None:
    """A redactor of the job's secrets (npa_workflow/redact.py, standard library only, loaded by path: this
    wrapper runs isolated), or None when the job has none: its output then goes straight to the log."""
    names = [n for n in str(env.get(REDACT_ENV, "")).split(",") if n and env.get(n)]
    if not names:
        return None
    import importlib.util

    location = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "redact.py")
    spec = importlib.util.spec_from_file_location("_npa_redact", location)
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    redactor = module.Redactor({n: env[n] for n in names})
    return redactor if redactor else None


class _RedactingPump:
    """The command's output on its way to the log, without its secrets: the log on disk never holds a value.

    Text is redacted a line at a time; a line longer than `_PUMP_CHUNK` is cut, keeping its last
    `longest form - 1` characters for the next cut, so a value split across two reads is still found."""

    def __init__(self, pipe: object, redactor: Callable[[str], str]) -> None:
        import threading

        self._pipe = pipe
        self._redactor = redactor
        self.failed = ""
        self._hold = max((len(form) for form, _ in getattr(redactor, "_pairs", [])), default=1) - 1
        self._thread = threading.Thread(target=self._run, name="npa-log-redact", daemon=True)
        self._thread.start()

    def _write(self, text: str) -> None:
        data = self._redactor(text).encode("utf-8", "surrogateescape")
        out = sys.stdout.buffer
        try:
            out.write(data)
            out.flush()
        except OSError as exc:  # the log cannot be written (a full disk): the job's output is dropped, said once
            if not self.failed:
                self.failed = f"cannot write the job's log: {exc.strerror or exc}"

    def _run(self) -> None:
        pending = ""
        read = self._pipe.read1  # type: ignore[attr-defined]
        while True:
            chunk = read(_PUMP_CHUNK)
            if not chunk:
                break
            pending += chunk.decode("utf-8", "surrogateescape")
            cut = pending.rfind("\n") + 1
            if cut:
                self._write(pending[:cut])
                pending = pending[cut:]
            elif len(pending) > _PUMP_CHUNK:
                keep = min(self._hold, len(pending))
                self._write(pending[: len(pending) - keep])
                pending = pending[len(pending) - keep:]
        if pending:
            self._write(pending)

    def finish(self, timeout: float = 10.0) -> None:
        self._thread.join(timeout)


_PUMP_CHUNK = 64 * 1024


def main(argv: list[str]) -> int:
    parsed = _parse(argv)
    if parsed is None:
        print("usage: job_wrapper.py <exit-file> [--cgroup DIR] [--grace S] [--gpus N --gpu-devices I=UUID,... "
              "--gpu-locks DIR --started-file PATH] -- <command> [args...]\n"
              "       job_wrapper.py <exit-file> [--cgroup DIR] [--grace S] --job-on-stdin", file=sys.stderr)
        return 2
    exit_path, cgroup, grace, command = parsed.exit_path, parsed.cgroup, parsed.grace, parsed.command
    _become_subreaper()
    if parsed.job_on_stdin:
        job = _read_job()
        given = job is not None
    else:
        job, given = None, _wait_for_go()
    if not given:
        if parsed.job_on_stdin and not os.path.exists(_sibling(exit_path, ".json")):
            # started ahead and never given a job: no record, so no job to say anything about; its log goes too
            with contextlib.suppress(OSError):
                if os.path.getsize(_sibling(exit_path, ".log")) == 0:
                    os.unlink(_sibling(exit_path, ".log"))
            return 0
        _write_exit(exit_path, {
            "exit_code": None, "signal": None, "not_started": True, "child_pid": None, "ended_at": _now(),
            "error": "process lost: the job was never started (its launcher stopped before the go-signal)",
        })
        return 0

    cwd = None
    try:
        if job is not None:
            command, cwd = job["command"], job.get("cwd") or None
            env, lock_fds = {str(k): str(v) for k, v in job["env"].items()}, []
        else:
            env, lock_fds = _child_env(parsed)
    except OSError as exc:  # the lock folder cannot be made or written: the job cannot be given its devices
        message = f"cannot take GPUs under {parsed.gpu_locks}: {exc}"
        print(f"[npa-workflow job] {message}", file=sys.stderr, flush=True)
        _write_exit(exit_path, {"exit_code": 126, "signal": None, "error": message, "child_pid": None,
                                "ended_at": _now()})
        return 126
    child_env = env if env is not None else os.environ
    redactor = _log_redactor(child_env)
    try:
        child = subprocess.Popen(command, env=env, pass_fds=lock_fds, cwd=cwd,
                                 stdout=subprocess.PIPE if redactor else None,
                                 stderr=subprocess.STDOUT if redactor else None)
    except OSError as exc:
        code = 127 if isinstance(exc, FileNotFoundError) else 126
        message = f"cannot start {command[0]!r}: {exc}"
        print(f"[npa-workflow job] {message}", file=sys.stderr, flush=True)
        _write_exit(
            exit_path,
            {"exit_code": code, "signal": None, "error": message, "child_pid": None, "ended_at": _now()},
        )
        return code

    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(signum)
        _signal(_job_processes(cgroup) - {child.pid}, signum)

    for signum in _FORWARDED:
        signal.signal(signum, forward)

    pump = _RedactingPump(child.stdout, redactor) if redactor and child.stdout is not None else None
    while True:
        try:
            returncode = child.wait()
            break
        except InterruptedError:  # pragma: no cover - PEP 475 retries, kept for safety
            continue
    _sweep(cgroup, grace)
    if pump is not None:
        pump.finish()  # every process holding the pipe is gone: the rest of the output is read and written

    sig_name = None
    error = None
    exit_code = returncode
    if returncode < 0:
        signum = -returncode
        try:
            sig_name = signal.Signals(signum).name
        except ValueError:
            sig_name = f"SIG{signum}"
        exit_code = 128 + signum
        error = f"killed by signal {sig_name}"
    if pump is not None and pump.failed:  # its output is lost: the step failed, whatever its command said
        error = f"{error}; {pump.failed}" if error else pump.failed
        exit_code = exit_code or 74  # EX_IOERR
    _write_exit(
        exit_path,
        {
            "exit_code": exit_code,
            "signal": sig_name,
            "error": error,
            "child_pid": child.pid,
            "ended_at": _now(),
        },
    )
    marker = (env if env is not None else os.environ).get("NPA_LOCAL_JOB_ID", "")
    if cgroup and marker:  # after the exit is recorded: a scan of every process's environment is off the wave's path
        _sweep(cgroup, grace, lambda: _marked(marker) - {os.getpid()})
    return exit_code if exit_code < 256 else 255


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
