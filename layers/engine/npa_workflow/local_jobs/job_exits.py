"""Event-driven completion: wake the watch as soon as a local job exits, instead of at the next tick.

In the cloud the watch runs on a schedule; locally the moment a process exits is observable, so a finished wave
can complete at once (the tick stays as the safety net, as in the cloud). The local executor's wrapper writes
`<jobs>/<job-id>.exit` atomically (a rename into the jobs folder).

Where the kernel gives notices of the folder (Linux `inotify`), they name every entry created, written or renamed
into it since the watch began, so a new exit file is read from the names, without listing the folder (which
holds four entries per job ever run there). The folder is listed once when the watch begins (what was there
before it) and again only if the kernel's queue overflowed. Elsewhere, every entry created or renamed in a
folder changes its modification time: one `stat` per poll sees any exit, and only when it changed is the folder
listed, to tell a new exit file from a new job's record, log or lock.

Between looks the waiter sleeps on the kernel's word where it can (Linux `inotify` on the folder, through
`inotify_simple`: an entry created, written or renamed into it wakes it at once), else it polls every
`POLL_SECONDS`. :meth:`JobExits.nudge` (any thread) ends a wait at once: the runtime is told so when its
execution ends (`embedded_aws.execution_ends`). A wake-up is only a hint to look again, so the kernel's notice of an
unrelated entry costs one `stat`; a missed notice costs at most `NOTIFY_SLICE_SECONDS` (the longest sleep
between looks, which also bounds how late `stop` is seen).
"""

from __future__ import annotations

import contextlib
import os
import select
import threading
import time
import weakref
from pathlib import Path
from typing import Any

__all__ = ["JobExits"]

POLL_SECONDS = 0.01
NOTIFY_SLICE_SECONDS = 0.05
EXIT_SUFFIX = ".exit"  # the local executor's `<job-id>.exit`
_Q_OVERFLOW = 0x00004000  # IN_Q_OVERFLOW (inotify(7)): the kernel's queue was full, notices were dropped
# IN_MOVE_SELF | IN_DELETE_SELF | IN_IGNORED: the watched folder was moved or removed, or its watch ended
_FOLDER_GONE = 0x00000800 | 0x00000400 | 0x00008000


def _folder_notices(folder: Path) -> Any:
    """A non-blocking `inotify_simple.INotify` watching `folder`, or None (not Linux, no such folder, no inotify)."""
    try:
        from inotify_simple import INotify, flags
    except (ImportError, OSError):  # the package is installed on Linux only (pyproject: sys_platform marker)
        return None
    try:
        notices = INotify(nonblocking=True)
    except (OSError, AttributeError):  # AttributeError: a libc without inotify_init1
        return None
    try:
        notices.add_watch(folder, flags.CLOSE_WRITE | flags.MOVED_TO | flags.CREATE | flags.DELETE_SELF
                          | flags.MOVE_SELF)
    except OSError:
        notices.close()
        return None
    return notices


def _close_fds(*fds: int) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


class JobExits:
    def __init__(self, jobs_dir: Path) -> None:
        self.jobs_dir = Path(jobs_dir)
        self._notices: Any = None
        self._named = False  # the notices name every entry since the folder was last listed
        self.last_exits: set[str] = set()  # the ids of the jobs whose exit the last `wait` that saw one saw
        self._nudged = threading.Event()
        self._nudge_r, self._nudge_w = os.pipe()  # wakes a `select` on the folder's notices
        os.set_blocking(self._nudge_r, False)
        os.set_blocking(self._nudge_w, False)
        weakref.finalize(self, _close_fds, self._nudge_r, self._nudge_w)
        self._notices_of_folder()  # before the listing: an exit after it is in the notices
        self._seen = self._mtime()
        self._exits = self._exit_files()
        self._named = self._notices is not None

    def nudge(self) -> None:
        """End the current (or next) `wait` now, from any thread."""
        self._nudged.set()
        try:
            os.write(self._nudge_w, b"!")
        except (BlockingIOError, OSError):  # a full pipe has a wake-up pending already; a closed one no waiter
            pass

    def _notices_of_folder(self) -> Any:
        if self._notices is None and self.jobs_dir.is_dir():
            self._notices = _folder_notices(self.jobs_dir)
            if self._notices is not None:
                weakref.finalize(self, self._notices.close)
        return self._notices

    def _sleep(self, seconds: float, stop: threading.Event) -> bool:
        """Sleep until the kernel notices a change in the folder (True) or for a slice of `seconds` (False)."""
        notices = self._notices_of_folder()
        if notices is None:
            stop.wait(min(POLL_SECONDS, seconds))
            return False
        ready, _, _ = select.select([notices, self._nudge_r], [], [], min(NOTIFY_SLICE_SECONDS, seconds))
        if self._nudge_r in ready:
            with contextlib.suppress(BlockingIOError, OSError):
                os.read(self._nudge_r, 4096)
        return notices in ready  # `changed` reads them

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

    def changed(self, notified: bool = False) -> bool:
        """A job exited since the last call: an exit file appeared that was not there before (a new job's record,
        log or lock is not an exit). From the kernel's notices where there are; else from a listing of the folder
        when its modification time moved, or when `notified` (two changes within one tick of the file system's
        clock look like none)."""
        notices = self._notices_of_folder()
        if notices is not None and self._named:
            events = self._drain(notices)
            if any(e.mask & _FOLDER_GONE for e in events):  # the folder was removed or moved: watch it anew
                notices.close()
                self._notices, self._named = None, False
                notices = self._notices_of_folder()
            elif not any(e.mask & _Q_OVERFLOW for e in events):
                new = {e.name for e in events if e.name.endswith(EXIT_SUFFIX)} - self._exits
                self._exits |= new
                return self._found(new)
            notified = True  # the kernel dropped notices, or the watch began anew: list the folder
        elif notices is not None:  # the notices began after the folder appeared: list what came before them
            self._drain(notices)
            notified = True
        now = self._mtime()
        if now == self._seen and not notified:
            return False
        self._seen = now
        exits = self._exit_files()
        new = exits - self._exits
        self._exits = exits
        self._named = notices is not None
        return self._found(new)

    def _found(self, names: set[str]) -> bool:
        if names:
            self.last_exits = {name[: -len(EXIT_SUFFIX)] for name in names}
        return bool(names)

    @staticmethod
    def _drain(notices: Any) -> list[Any]:
        try:
            return list(notices.read(timeout=0))
        except BlockingIOError:
            return []

    def wait(self, timeout: float, stop: threading.Event) -> bool:
        """Until a job exits (True), `timeout` seconds pass, `stop` is set or `nudge` is called (False)."""
        deadline = time.monotonic() + timeout
        notified = False
        while not stop.is_set():
            if self.changed(notified):
                return True
            if self._nudged.is_set():
                self._nudged.clear()
                return False
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            notified = self._sleep(left, stop)
        return False
