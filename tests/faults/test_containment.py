"""Fault: processes that try to escape their job (forked child left behind, `setsid` daemon, SIGTERM
ignored). Every one ends with the job: on its own end, on cancel, and when the wrapper itself was killed."""

from __future__ import annotations

import json
import os
import signal
import textwrap
from pathlib import Path

import pytest

from npa_workflow.local_jobs.executor import CANCELLED, SUCCEEDED, LocalExecutor

from .conftest import PY, alive, read_pid, wait_terminal, wait_until

LEFTOVER = textwrap.dedent(
    """
    import os, subprocess, sys, time
    out = sys.argv[1]
    def record(pid):
        with open(out + ".tmp", "w") as fh:
            fh.write(str(pid))
        os.replace(out + ".tmp", out)
    if sys.argv[2] == "fork":
        pid = os.fork()
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        record(pid)
    else:  # a daemon in its own session (setsid), ignoring SIGTERM, that records its own pid
        daemon = ("import os, signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); os.setsid(); "
                  "open(sys.argv[1] + '.tmp', 'w').write(str(os.getpid())); "
                  "os.replace(sys.argv[1] + '.tmp', sys.argv[1]); time.sleep(60)")
        if os.fork() == 0:
            subprocess.Popen([sys.executable, "-c", daemon, out])
            os._exit(0)  # the daemon's parent exits at once: the daemon is an orphan
        while not os.path.exists(out):
            time.sleep(0.01)
    if sys.argv[3] == "exit":
        sys.exit(0)
    time.sleep(60)
    """
)


def _launch(ex: LocalExecutor, tmp_path: Path, how: str, then: str) -> tuple[str, int]:
    script = tmp_path / "leftover.py"
    script.write_text(LEFTOVER)
    out = tmp_path / f"{how}-{then}.pid"
    job_id = ex.launch(f"escape-{how}-{then}", [PY, str(script), str(out), how, then])
    return job_id, read_pid(out)


def test_a_child_forked_by_a_job_that_exits_0_ends_with_the_job(ex: LocalExecutor, tmp_path: Path) -> None:
    job_id, child = _launch(ex, tmp_path, "fork", "exit")
    info = wait_terminal(ex, job_id)
    assert info.status == SUCCEEDED
    assert not alive(child), "the forked child outlived its job"


def test_a_setsid_daemon_of_a_job_that_exits_0_ends_with_the_job(ex: LocalExecutor, tmp_path: Path) -> None:
    job_id, daemon = _launch(ex, tmp_path, "setsid", "exit")
    assert os.getsid(daemon) != os.getsid(os.getpid())
    info = wait_terminal(ex, job_id)
    assert info.status == SUCCEEDED
    assert not alive(daemon), "the setsid daemon outlived its job"


def test_cancel_ends_a_setsid_daemon_that_ignores_sigterm(ex: LocalExecutor, tmp_path: Path) -> None:
    job_id, daemon = _launch(ex, tmp_path, "setsid", "stay")
    assert ex.cancel([job_id], grace_seconds=0.5) == [job_id]
    assert ex.wait_gone([job_id], timeout=5)
    assert not alive(daemon)
    assert ex.statuses([job_id])[job_id].status == CANCELLED


def test_cancel_reaches_the_daemon_even_after_the_wrapper_was_killed(ex: LocalExecutor, tmp_path: Path) -> None:
    """kill -9 of the wrapper (the subreaper) orphans the daemon to init: only the containment still knows it."""
    job_id, daemon = _launch(ex, tmp_path, "setsid", "stay")
    record = json.loads((ex.jobs_dir / f"{job_id}.json").read_text())
    os.kill(record["pid"], signal.SIGKILL)
    fresh = LocalExecutor(ex.state_dir)  # as after a restart of the runtime
    assert fresh.statuses([job_id])[job_id].status == "RUNNING"  # the job's daemon still runs: not "lost"
    assert fresh.cancel([job_id], grace_seconds=0.3) == [job_id]
    assert fresh.wait_gone([job_id], timeout=5)
    assert not alive(daemon)


def test_wait_gone_is_false_while_any_process_of_the_job_remains(ex: LocalExecutor, tmp_path: Path) -> None:
    job_id, daemon = _launch(ex, tmp_path, "setsid", "stay")
    record = json.loads((ex.jobs_dir / f"{job_id}.json").read_text())
    os.killpg(record["pgid"], signal.SIGKILL)  # the group is gone; the daemon is not in it
    wait_until(lambda: not alive(record["pid"]), 5, "wrapper gone")
    assert alive(daemon)
    assert ex.wait_gone([job_id], timeout=0.3) is False
    ex.cancel([job_id], grace_seconds=0.2)
    assert ex.wait_gone([job_id], timeout=5)


def test_an_ended_jobs_cgroup_is_removed_off_the_status_read(ex: LocalExecutor, mode: str,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The status read that sees a job end (the watch's, before it completes the token) does not wait for the
    kernel to remove the job's cgroup: a thread of the executor does, and close() removes what is still queued."""
    import threading

    from npa_workflow.local_jobs import containment

    if mode != "cgroup":
        pytest.skip("no cgroups: nothing to remove")
    removed_on: list[str] = []
    gate = threading.Event()
    remove = containment.remove_cgroup

    def slow_remove(path: object) -> None:  # the kernel's grace period, made long
        removed_on.append(threading.current_thread().name)
        gate.wait(5)
        remove(path)

    monkeypatch.setattr(containment, "remove_cgroup", slow_remove)
    job_id = ex.launch("short", [PY, "-c", "pass"])
    cgroup = Path(json.loads((ex.jobs_dir / f"{job_id}.json").read_text())["cgroup"])
    assert cgroup.is_dir()
    assert wait_terminal(ex, job_id).status == SUCCEEDED  # answered while the removal still waits
    assert cgroup.is_dir()
    gate.set()
    wait_until(lambda: not cgroup.exists(), 5, "the cgroup removed")
    assert set(removed_on) == {"npa-cgroup-release"}

    second = ex.launch("second", [PY, "-c", "pass"])
    wait_terminal(ex, second)
    ex.close()  # whatever is still queued is removed now, on the closing thread
    assert not Path(json.loads((ex.jobs_dir / f"{second}.json").read_text())["cgroup"]).exists()
