"""Event-driven completion: wake the watch as soon as a local job exits, instead of at the next tick.

In the cloud the watch runs on a schedule; locally the moment a process exits is observable, so a finished wave
can complete at once (the tick stays as the safety net, as in the cloud). The local executor's wrapper writes
`<jobs>/<job-id>.exit` atomically (a rename into the jobs folder), and every entry created or renamed in a
folder changes the folder's modification time: one `stat` of the folder per poll sees any exit, without a hook
in the executor; only when it changed is the folder listed, to tell a new exit file from a new job's record,
log or lock.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

__all__ = ["JobExits"]

POLL_SECONDS = 0.01
EXIT_SUFFIX = ".exit"  # the local executor's `<job-id>.exit`


class JobExits:
    def __init__(self, jobs_dir: Path) -> None:
        self.jobs_dir = Path(jobs_dir)
        self._seen = self._mtime()
        self._exits = self._exit_files()

    def _mtime(self) -> int:
        try:
            return os.stat(self.jobs_dir).st_mtime_ns
        except FileNotFoundError:
            return 0

    def _exit_files(self) -> set[str]:
        try:
            with os.scandir(self.jobs_dir) as entries:
                return {e.name for e in entries if e.name.endswith(EXIT_SUFFIX)}
        except FileNotFoundError:
            return set()

    def changed(self) -> bool:
        """A job exited since the last call: the folder changed and holds an exit file it did not hold before (a
        new job's record, log or lock changes the folder too, and is not an exit)."""
        now = self._mtime()
        if now == self._seen:
            return False
        self._seen = now
        exits = self._exit_files()
        new = exits - self._exits
        self._exits = exits
        return bool(new)

    def wait(self, timeout: float, stop: threading.Event) -> bool:
        """Until a job exits (True), `timeout` seconds pass or `stop` is set (False)."""
        deadline = time.monotonic() + timeout
        while not stop.is_set():
            if self.changed():
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            stop.wait(min(POLL_SECONDS, left))
        return False
