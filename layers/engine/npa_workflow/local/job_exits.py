"""Event-driven completion: wake the watch as soon as a local job exits, instead of at the next tick.

In the cloud the watch runs on a schedule; locally the moment a process exits is observable, so a finished wave
can complete at once (the tick stays as the safety net, as in the cloud). The local executor's wrapper writes
`<jobs>/<job-id>.exit` atomically (a rename into the jobs folder), and every entry created or renamed in a
folder changes the folder's modification time: one `stat` of the folder per poll sees any exit, without a hook
in the executor and without listing the folder. Other entries (a new job's record and log) wake it too; the
cost of that is one extra watch pass.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

__all__ = ["JobExits"]

POLL_SECONDS = 0.01


class JobExits:
    def __init__(self, jobs_dir: Path) -> None:
        self.jobs_dir = Path(jobs_dir)
        self._seen = self._mtime()

    def _mtime(self) -> int:
        try:
            return os.stat(self.jobs_dir).st_mtime_ns
        except FileNotFoundError:
            return 0

    def changed(self) -> bool:
        now = self._mtime()
        if now != self._seen:
            self._seen = now
            return True
        return False

    def wait(self, timeout: float, stop: threading.Event) -> bool:
        """Until the jobs folder changes (True), `timeout` seconds pass or `stop` is set (False)."""
        deadline = time.monotonic() + timeout
        while not stop.is_set():
            if self.changed():
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            stop.wait(min(POLL_SECONDS, left))
        return False
