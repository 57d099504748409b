"""`local_jobs.job_exits.JobExits`: a job's exit file wakes the waiter; other entries and `stop` do as they should."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import pytest

from npa_workflow.local_jobs.job_exits import JobExits


def later(seconds: float, action) -> threading.Thread:
    thread = threading.Thread(target=lambda: (time.sleep(seconds), action()), daemon=True)
    thread.start()
    return thread


def exit_file(folder: Path, name: str) -> None:
    tmp = folder / f".{name}.tmp"
    tmp.write_text("{}")
    os.replace(tmp, folder / name)  # as the wrapper writes it: a rename into the folder


def test_an_exit_wakes_the_waiter_and_other_entries_do_not(tmp_path: Path) -> None:
    exits = JobExits(tmp_path)
    stop = threading.Event()
    later(0.05, lambda: exit_file(tmp_path, "local-a.json"))  # a record: not an exit
    started = time.monotonic()
    assert exits.wait(0.3, stop) is False
    assert time.monotonic() - started >= 0.29
    later(0.05, lambda: exit_file(tmp_path, "local-a.exit"))
    started = time.monotonic()
    assert exits.wait(5.0, stop) is True
    assert time.monotonic() - started < 1.0
    if sys.platform.startswith("linux"):
        assert exits._notices_of_folder() is not None  # the kernel's notices, not polling
    exit_file(tmp_path, "local-b.exit")
    exit_file(tmp_path, "local-c.json")  # two changes, maybe within one tick of the file system's clock
    assert exits.changed(notified=True) is True
    assert exits.wait(0.05, stop) is False  # nothing new since


def test_stop_ends_the_wait_and_a_missing_folder_is_polled(tmp_path: Path) -> None:
    folder = tmp_path / "jobs"
    exits = JobExits(folder)  # the executor creates the folder later
    stop = threading.Event()
    later(0.05, stop.set)
    started = time.monotonic()
    assert exits.wait(5.0, stop) is False
    assert time.monotonic() - started < 1.0
    stop.clear()
    folder.mkdir()
    later(0.05, lambda: exit_file(folder, "local-d.exit"))
    assert exits.wait(5.0, stop) is True


@pytest.mark.parametrize("notices", [False, True])
def test_the_same_with_or_without_notices(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, notices: bool) -> None:
    if not notices:
        monkeypatch.setattr("npa_workflow.local_jobs.job_exits._folder_notices", lambda folder: None)
    exits = JobExits(tmp_path)
    later(0.05, lambda: exit_file(tmp_path, "local-e.exit"))
    assert exits.wait(5.0, threading.Event()) is True


@pytest.mark.parametrize("notices", [False, True])
def test_a_nudge_ends_the_wait_at_once_and_only_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     notices: bool) -> None:
    if not notices:
        monkeypatch.setattr("npa_workflow.local_jobs.job_exits._folder_notices", lambda folder: None)
    exits = JobExits(tmp_path)
    stop = threading.Event()
    later(0.05, exits.nudge)  # from another thread, while the wait sleeps
    started = time.monotonic()
    assert exits.wait(5.0, stop) is False
    assert time.monotonic() - started < 1.0
    exits.nudge()  # before a wait: that wait ends at once
    started = time.monotonic()
    assert exits.wait(5.0, stop) is False
    assert time.monotonic() - started < 1.0
    started = time.monotonic()
    assert exits.wait(0.2, stop) is False  # spent: the next wait sleeps its time out
    assert time.monotonic() - started >= 0.19
    later(0.05, lambda: exit_file(tmp_path, "local-f.exit"))
    assert exits.wait(5.0, stop) is True  # exits still wake it


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the kernel's notices are Linux inotify")
def test_notices_name_the_exit_without_listing_the_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(50):  # a folder of earlier jobs: listed once, when the watch begins
        exit_file(tmp_path, f"old-{i}.exit")
    exits = JobExits(tmp_path)
    assert exits._named
    listings: list[int] = []
    listing = JobExits._exit_files
    monkeypatch.setattr(JobExits, "_exit_files", lambda self: listings.append(1) or listing(self))
    stop = threading.Event()
    later(0.05, lambda: (exit_file(tmp_path, "local-g.json"), exit_file(tmp_path, "local-g.exit")))
    assert exits.wait(5.0, stop) is True
    assert exits.wait(0.1, stop) is False  # the same exit is not new twice
    assert listings == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the kernel's notices are Linux inotify")
def test_an_overflow_or_a_new_folder_is_listed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from npa_workflow.local_jobs import job_exits

    folder = tmp_path / "jobs"
    folder.mkdir()
    exits = JobExits(folder)
    stop = threading.Event()
    real_drain = JobExits._drain

    class Overflow:
        mask, name = job_exits._Q_OVERFLOW, ""

    monkeypatch.setattr(JobExits, "_drain", staticmethod(lambda notices: [*real_drain(notices), Overflow()]))
    exit_file(folder, "local-h.exit")
    assert exits.changed() is True  # the kernel dropped notices: found by listing
    monkeypatch.undo()
    folder.rename(tmp_path / "gone")  # the watch ends with its folder ...
    folder.mkdir()  # ... and a new one is watched and listed
    assert exits.changed() is False
    later(0.05, lambda: exit_file(folder, "local-i.exit"))
    assert exits.wait(5.0, stop) is True
