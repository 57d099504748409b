"""Fault: kill -9 of the launching process at each line of a local launch, then a second launch of the
same job (what a resume does). The job never runs twice, never runs unrecorded, and never leaks.

The kill is injected in a real launcher process by wrapping the executor's record writer: the n-th
record write SIGKILLs the process before (or just after) it writes. Write 1 is the PENDING record
(before the wrapper exists), write 2 the record with the wrapper's pid (after the wrapper started,
before its go-signal).
"""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

import pytest
from deadlines import deadline as scaled

from npa_workflow.engine.ports import JobRequest
from npa_workflow.local_jobs.executor import FAILED, RUNNING, LocalExecutor
from npa_workflow.local_jobs.job_executor import LocalJobExecutor

from .conftest import ENGINE_ROOT, PY, plan_step, wait_terminal, wait_until

LAUNCHER = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    import npa_workflow.local_jobs.executor as ex_mod
    kill_at, when = int(sys.argv[2]), sys.argv[3]
    real_write, calls = ex_mod._write_json_atomic, [0]
    def write(path, data):
        calls[0] += 1
        if calls[0] == kill_at and when == "before":
            os.kill(os.getpid(), signal.SIGKILL)
        real_write(path, data)
        if calls[0] == kill_at and when == "after":
            os.kill(os.getpid(), signal.SIGKILL)
    ex_mod._write_json_atomic = write
    ex = ex_mod.LocalExecutor(Path(sys.argv[1]))
    ex.launch("run1.work.a1", [sys.executable, "-c", sys.argv[4]])
    """
)
# The job appends one line per start to a counter file, then stays up: a second copy shows as a second line.
JOB = "import sys, time; open(sys.argv[1] if len(sys.argv) > 1 else {counter!r}, 'a').write('ran\\n'); time.sleep(30)"


def _launch_and_die(state: Path, counter: Path, kill_at: int, when: str) -> int:
    env = {**os.environ, "PYTHONPATH": ENGINE_ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([PY, "-c", LAUNCHER, str(state), str(kill_at), when, JOB.format(counter=str(counter))],
                          env=env, capture_output=True, timeout=30)
    return proc.returncode


def _request(counter: Path) -> JobRequest:
    step = plan_step([PY, "-c", JOB.format(counter=str(counter))])
    return JobRequest(name="run1.work.a1", step=step, env={})


@pytest.mark.parametrize(("kill_at", "when"), [(1, "before"), (1, "after"), (2, "before"), (2, "after")])
def test_kill_9_mid_launch_never_runs_an_unrecorded_job_and_the_retry_runs_it_once(
    tmp_path: Path, mode: str, kill_at: int, when: str
) -> None:
    state, counter = tmp_path / "state", tmp_path / "runs.txt"
    assert _launch_and_die(state, counter, kill_at, when) == -9
    ex = LocalExecutor(state)
    ids = ex.find_by_name("run1.work.a1")
    if (kill_at, when) == (1, "before"):
        assert ids == []  # nothing durable, nothing started
    else:
        [job_id] = ids  # the identity was durable before anything could start
        info = wait_terminal(ex, job_id, timeout=10)
        assert info.status == FAILED and (info.error or "").startswith("process lost: the job was never started")
        assert ex.wait_gone([job_id], timeout=scaled(5))
    # the launcher is dead and no process of the job remains: nothing can write the counter from now on
    assert not counter.exists(), "the job ran although its launch never completed"

    # The retry (a resume's launch of the same attempt) finds no started job of that name: it launches once.
    jobs = LocalJobExecutor(ex, cancel_grace_seconds=0.5)
    submitted = jobs.submit(_request(counter))
    named = ex.find_by_name("run1.work.a1")
    try:
        wait_until(lambda: counter.exists() and counter.read_text() == "ran\n", 10, "job started")
        again = jobs.submit(_request(counter))  # and a third launch adopts it
        assert again.job_id == submitted.job_id
        assert ex.find_by_name("run1.work.a1") == named  # no further job: its record would precede its start
        assert counter.read_text() == "ran\n"
    finally:
        jobs.cancel([submitted.job_id])
        assert jobs.confirm_cancelled([submitted.job_id], 5)


def test_a_launcher_killed_after_launch_leaves_a_job_the_retry_adopts_never_doubles(
    tmp_path: Path, mode: str
) -> None:
    """kill -9 after the go-signal (write 3 never happens): the job runs, the retry adopts its exact id."""
    state, counter = tmp_path / "state", tmp_path / "runs.txt"
    assert _launch_and_die(state, counter, 3, "before") == 0  # no third write: the launcher exits normally
    ex = LocalExecutor(state)
    [job_id] = ex.find_by_name("run1.work.a1")
    wait_until(lambda: counter.exists(), 10, "job started")
    assert ex.statuses([job_id])[job_id].status == RUNNING
    jobs = LocalJobExecutor(ex, cancel_grace_seconds=0.5)
    assert jobs.submit(_request(counter)).job_id == job_id
    assert ex.find_by_name("run1.work.a1") == [job_id]  # adopted: a second job's record would precede its start
    assert counter.read_text() == "ran\n"
    jobs.cancel([job_id])
    assert jobs.confirm_cancelled([job_id], 5)
