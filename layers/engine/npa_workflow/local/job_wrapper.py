"""Run one local job and record its exit code durably.

Usage (run by :class:`npa_workflow.local.executor.LocalExecutor`, never by hand)::

    python -I job_wrapper.py <exit-file> -- <command> [args...]

The wrapper is the leader of the job's process group (the executor starts it with
``start_new_session=True``). It starts the command as its child, forwards SIGTERM/SIGINT/SIGHUP
to it, waits for it, and then writes ``<exit-file>`` atomically (temporary file + rename) as
JSON::

    {"exit_code": 0, "signal": null, "error": null, "child_pid": 1234, "ended_at": "…Z"}

A child killed by a signal gets the shell's convention ``128 + signal number`` as exit code
and the signal's name in ``signal``. A command that cannot be started gets 127 (not found)
or 126 (not executable) and the reason in ``error``.

The file only imports the standard library so that it runs with ``python -I`` from any
environment, whatever the job's ``PYTHONPATH``: the exit code of a job is known even when the
executor that launched it has gone away.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import UTC, datetime

_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _write_exit(path: str, record: dict) -> None:
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(record, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: job_wrapper.py <exit-file> -- <command> [args...]", file=sys.stderr)
        return 2
    exit_path, command = argv[0], argv[2:]

    try:
        child = subprocess.Popen(command)
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
        try:
            child.send_signal(signum)
        except ProcessLookupError:
            pass

    for signum in _FORWARDED:
        signal.signal(signum, forward)

    while True:
        try:
            returncode = child.wait()
            break
        except InterruptedError:  # pragma: no cover - PEP 475 retries, kept for safety
            continue

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
    return exit_code if exit_code < 256 else 255


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
