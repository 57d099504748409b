"""Fault: a cancel that races a launch (cancel right after submit, before any execution or job exists; a cancel
recorded while a submit is in flight). The cancel is recorded first; no launch after it starts a job, and a job
submitted during it is cancelled by exact id."""

from __future__ import annotations

import sys
import time

from npa_workflow.engine import errors
from npa_workflow.engine.launch import launch
from npa_workflow.engine.runs import RunOptions
from npa_workflow.ledger import RunRecord
from npa_workflow.local_jobs.job_executor import LocalJobExecutor

from .conftest import wait_until

SPEC = f"""
apiVersion: npa.workflow/v0.0.1
kind: Workflow
metadata: {{name: t}}
config: {{bucket: data}}
states:
  work: {{run: {{argv: ["{sys.executable}", "-c", "import time; time.sleep(30)"]}}, terminal: true}}
"""
EVENT = {"run_id": "r1", "state": "work", "loops": {}, "token": "t1"}


def _start(engine) -> None:
    engine.runs.freeze("r1", SPEC, "", {}, RunOptions())
    engine.ledger.put_run(RunRecord(run_id="r1", workflow="t"))


def test_a_launch_after_the_cancel_was_recorded_starts_nothing(moto_engine) -> None:
    _start(moto_engine)
    requested = moto_engine.ledger.request_cancel("r1", "test")
    assert moto_engine.ledger.request_cancel("r1") == requested  # idempotent: the first request stands
    out = launch(moto_engine, EVENT)
    assert out["cancelled"] is True
    [(kind, token, (error, cause))] = moto_engine.callbacks.calls
    assert (kind, token, error) == ("fail", "t1", errors.WAVE_CANCELLED) and "cancelled" in cause
    assert moto_engine.ledger.attempts("r1") == []
    assert list(moto_engine.executor.local.jobs_dir.glob("*.json")) == []


def test_a_job_submitted_while_the_cancel_is_recorded_is_cancelled_by_id(moto_engine) -> None:
    _start(moto_engine)
    ledger = moto_engine.ledger

    class CancelDuringSubmit(LocalJobExecutor):
        def submit(self, job):
            submission = super().submit(job)
            ledger.request_cancel("r1", "raced")  # the cancel lands between the launch's check and its record
            return submission

    moto_engine.executor = CancelDuringSubmit(moto_engine.executor.local, cancel_grace_seconds=0.5)
    out = launch(moto_engine, EVENT)
    job_id = out["job_id"]
    local = moto_engine.executor.local
    wait_until(lambda: local.statuses([job_id])[job_id].status == "CANCELLED", 10, "job cancelled")
    assert local.wait_gone([job_id], timeout=5)


def test_a_resume_clears_the_cancel(moto_engine) -> None:
    _start(moto_engine)
    moto_engine.ledger.request_cancel("r1")
    moto_engine.ledger.clear_cancel("r1")
    assert moto_engine.ledger.cancel_requested("r1") is None
    out = launch(moto_engine, EVENT)
    assert out.get("job_id")
    time.sleep(0.1)
    moto_engine.executor.cancel([out["job_id"]])


def test_a_cancelled_runs_catch_reports_the_cancel_not_the_tasks_timeout(moto_engine) -> None:
    # After StopExecution the Task's wait may end by its own timeout (States.Timeout) and reach the Catch: the run
    # was cancelled, and that is what it reports.
    from npa_workflow.engine.cleanup import cleanup
    from npa_workflow.protocol.errors import RUN_CANCELLED

    _start(moto_engine)
    job_id = launch(moto_engine, EVENT)["job_id"]
    requested = moto_engine.ledger.request_cancel("r1", "npa-workflow cancel")
    out = cleanup(moto_engine, {"run_id": "r1", "state": "work",
                                "error": {"Error": "States.Timeout", "Cause": "Task timed out"}})
    assert out["error"] == RUN_CANCELLED and requested in out["cause"] and "Timeout" not in out["cause"]
    run = moto_engine.ledger.get_run("r1")
    assert run.status.value == "ABORTED" and "cancelled with npa-workflow cancel" in run.error.message
    assert "timed out" not in run.error.message
    [attempt] = moto_engine.ledger.attempts("r1")
    assert attempt.status.value == "CANCELLED" and attempt.job_id == job_id
    assert moto_engine.executor.local.wait_gone([job_id], timeout=5)


def _exit_0_then_cancel(engine, spec: str) -> str:
    """A run whose only job exits 0, then cancelled and reaped (the signal comes too late for it)."""
    from npa_workflow.engine.cleanup import reap

    engine.runs.freeze("r1", spec, "", {}, RunOptions())
    engine.ledger.put_run(RunRecord(run_id="r1", workflow="t"))
    job_id = launch(engine, EVENT)["job_id"]
    local = engine.executor.local
    wait_until(lambda: local.statuses([job_id])[job_id].status == "SUCCEEDED", 10, "the job exited 0")
    engine.ledger.request_cancel("r1", "npa-workflow cancel")
    reap(engine, "r1", "execution ended ABORTED")
    return job_id


def test_a_job_that_exited_0_before_the_cancel_reached_it_is_not_reported_cancelled(moto_engine) -> None:
    job_id = _exit_0_then_cancel(moto_engine, SPEC.replace("time.sleep(30)", "pass"))
    local = moto_engine.executor.local
    [attempt] = moto_engine.ledger.attempts("r1")
    assert attempt.status.value == "SUCCEEDED", attempt  # what the scheduler saw, not "CANCELLED"
    assert local.statuses([job_id])[job_id].exit_code == 0
    run = moto_engine.ledger.get_run("r1")
    assert run.status.value == "ABORTED" and "cancelled with npa-workflow cancel" in run.error.message


def test_a_job_that_exited_0_without_its_declared_output_is_not_recorded_succeeded(moto_engine) -> None:
    # A resume replays a SUCCEEDED wave without looking: reap says SUCCEEDED only as the watch would.
    _exit_0_then_cancel(moto_engine, SPEC.replace("time.sleep(30)", "pass").replace(
        "terminal: true}", "terminal: true, outputs: [{uri: 's3://data/never-written.json'}]}"))
    [attempt] = moto_engine.ledger.attempts("r1")
    assert attempt.status.value == "FAILED" and "never-written.json" in attempt.error, attempt
