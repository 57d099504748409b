"""A run ended by a recorded cancel is ABORTED in every interleaving of the cancel with the run's own end (issue 18,
item 8), and a paused runtime's Tasks do not time out for the pause. Real moto, real local jobs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from deadlines import deadline as scaled

from npa_workflow.embedded_aws.pause_aware_waits import PauseAwareEvent, pause_aware_waits
from npa_workflow.engine.cleanup import cleanup, reap
from npa_workflow.engine.runs import RunOptions
from npa_workflow.ledger import RunError, RunRecord, RunStatus
from npa_workflow.protocol.errors import RUN_CANCELLED

SPEC = """
apiVersion: npa.workflow/v0.0.1
kind: Workflow
metadata: {name: t}
states:
  work: {run: {argv: ["true"]}, terminal: true}
"""
FAILED_TASK = {"run_id": "r1", "state": "work", "error": {"Error": "Wave.Failed", "Cause": "exit code 1"}}


def _start(engine) -> None:
    engine.runs.freeze("r1", SPEC, "", {}, RunOptions())
    engine.ledger.put_run(RunRecord(run_id="r1", workflow="t"))


def test_cancel_recorded_before_the_cleanup_looks(moto_engine) -> None:
    _start(moto_engine)
    moto_engine.ledger.request_cancel("r1", "npa-workflow cancel")
    assert cleanup(moto_engine, FAILED_TASK)["error"] == RUN_CANCELLED
    assert moto_engine.ledger.get_run("r1").status == RunStatus.ABORTED


def test_cancel_recorded_while_the_cleanup_runs(moto_engine) -> None:
    """The cancel lands after cleanup's first look and before its FAILED write: ABORTED, not FAILED."""
    _start(moto_engine)
    ledger = moto_engine.ledger
    original = ledger.update_run_status

    def cancel_just_before(run_id: str, status, *args, **kwargs):  # the cancel lands right before the FAILED write
        if status == RunStatus.FAILED:
            ledger.request_cancel(run_id, "npa-workflow cancel")
        return original(run_id, status, *args, **kwargs)

    ledger.update_run_status = cancel_just_before  # type: ignore[method-assign]
    out = cleanup(moto_engine, FAILED_TASK)
    run = ledger.get_run("r1")
    assert out["error"] == RUN_CANCELLED and run.status == RunStatus.ABORTED
    assert "cancelled with npa-workflow cancel" in run.error.message


def test_a_failed_written_after_the_cancel_is_rewritten_aborted_by_the_reap(moto_engine) -> None:
    _start(moto_engine)
    moto_engine.ledger.request_cancel("r1", "npa-workflow cancel")
    time.sleep(0.002)
    moto_engine.ledger.update_run_status("r1", RunStatus.FAILED, RunError(state="work", message="exit code 1"))
    reap(moto_engine, "r1", "execution ended FAILED", RunStatus.FAILED)
    assert moto_engine.ledger.get_run("r1").status == RunStatus.ABORTED


def test_a_run_that_failed_before_the_cancel_keeps_its_failure(moto_engine) -> None:
    _start(moto_engine)
    moto_engine.ledger.update_run_status("r1", RunStatus.FAILED, RunError(state="work", message="exit code 1"))
    time.sleep(0.002)
    moto_engine.ledger.request_cancel("r1", "npa-workflow cancel")
    reap(moto_engine, "r1", "execution ended FAILED", RunStatus.FAILED)
    run = moto_engine.ledger.get_run("r1")
    assert run.status == RunStatus.FAILED and run.error.message == "exit code 1"


@pytest.mark.parametrize("ended", ["TIMED_OUT", "FAILED", "ABORTED"])
def test_a_reaped_run_with_a_recorded_cancel_is_aborted_however_its_execution_ended(moto_engine, ended) -> None:
    _start(moto_engine)
    moto_engine.ledger.request_cancel("r1", "npa-workflow cancel")
    reap(moto_engine, "r1", f"execution ended {ended}", RunStatus(ended))
    run = moto_engine.ledger.get_run("r1")
    assert run.status == RunStatus.ABORTED and "cancelled with npa-workflow cancel" in run.error.message


@pytest.mark.parametrize("error", ["States.HeartbeatTimeout", "States.Timeout"])
def test_a_timeout_whose_job_had_exited_0_says_so_and_blames_no_schedule(moto_engine, error) -> None:
    """The wait ran out (a frozen runtime, a late watch) after the job did its work: the message says the job
    exited 0, lists it as nothing cancelled, and sends the user neither to the watch schedule nor the deadline."""
    from npa_workflow.engine.launch import launch

    from .conftest import wait_until

    _start(moto_engine)
    job_id = launch(moto_engine, {"run_id": "r1", "state": "work", "loops": {}, "token": "t1"})["job_id"]
    local = moto_engine.executor.local
    wait_until(lambda: local.statuses([job_id])[job_id].status == "SUCCEEDED", 10, "the job exited 0")
    out = cleanup(moto_engine, {"run_id": "r1", "state": "work", "error": {"Error": error, "Cause": ""},
                                "deadline": {"timeoutSeconds": 12, "heartbeatSeconds": 11}})
    assert f"its job {job_id} exited 0" in out["cause"] and "cancelled job(s): none" in out["cause"], out
    assert "watch schedule" not in out["cause"] and "raise it with" not in out["cause"]
    [attempt] = moto_engine.ledger.attempts("r1")
    assert attempt.status.value == "SUCCEEDED"


# ------------------------------------------------------------------------------------------------ pauses
def _pause_self_for(seconds: float) -> None:
    """SIGSTOP this process from a helper process, which SIGCONTs it `seconds` later."""
    subprocess.Popen([sys.executable, "-c", f"import os, signal, time; os.kill({os.getpid()}, signal.SIGSTOP); "
                      f"time.sleep({seconds}); os.kill({os.getpid()}, signal.SIGCONT)"])


@pytest.mark.timeout(30)
def test_a_pause_is_not_counted_against_a_wait() -> None:
    event = PauseAwareEvent()
    setter = threading.Timer(3.5, event.set)  # what "the watch reports the job" is, once the process runs again
    started = time.monotonic()
    setter.start()
    _pause_self_for(3.0)  # during a 2 s wait: a plain Event would time out at the first look after the pause
    got = event.wait(2.0)
    assert got, f"the wait timed out after {time.monotonic() - started:.1f} s, its pause counted"
    plain = threading.Event()
    assert not plain.wait(0.1)


@pytest.mark.timeout(10)
def test_a_wait_without_a_pause_still_times_out_on_time() -> None:
    started = time.monotonic()
    assert not PauseAwareEvent().wait(1.2)
    assert 1.15 <= time.monotonic() - started < 2.0


def test_the_interpreters_waits_are_pause_aware_while_active() -> None:
    from moto.stepfunctions.parser.asl.component.state.exec import execute_state
    from moto.stepfunctions.parser.asl.eval.callback import callback

    with pause_aware_waits():
        assert callback.Event is PauseAwareEvent and execute_state.threading.Event is PauseAwareEvent
        assert execute_state.threading.Thread is threading.Thread
    assert callback.Event is threading.Event and execute_state.threading is threading
    assert signal.SIGSTOP  # (the pause test above stops this very process)


@pytest.mark.e2e
@pytest.mark.timeout(180)
def test_a_job_that_exited_0_while_the_runtime_was_frozen_succeeds(tmp_path) -> None:
    """SIGSTOP the whole `npa-workflow run` (not its job) past the Task's heartbeat and deadline; the job exits 0
    within its deadline meanwhile. After SIGCONT the run is SUCCEEDED, nothing blames the watch schedule."""
    import json
    from pathlib import Path

    ws = Path(tmp_path) / "ws"
    ws.mkdir()
    spec = ws / "frozen.yaml"
    spec.write_text("apiVersion: npa.workflow/v0.0.1\nkind: Workflow\nmetadata: {name: frozen}\ninitial: a\n"
                    "states:\n  a: {run: {shell: \"echo started; sleep 2; echo finished\"}, terminal: true}\n")
    home = Path(tmp_path) / "home"
    env = {**{k: v for k, v in os.environ.items() if k != "AWS_ENDPOINT_URL"}, "NPA_WORKFLOW_HOME": str(home)}
    # --max-wait-seconds 12: a 12 s deadline and an 11 s heartbeat, both shorter than the 20 s freeze
    runtime = subprocess.Popen([sys.executable, "-c", "from npa_workflow.cli.app import main; main()", "run",
                                str(spec), "--run-id", "frozen1", "--max-wait-seconds", "12", "--json"], cwd=ws,
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + scaled(120)
        while not any(p.read_text().startswith("started") for p in (home / "jobs").glob("*.log")) \
                if (home / "jobs").is_dir() else True:
            assert time.monotonic() < deadline and runtime.poll() is None, "the step did not start"
            time.sleep(0.05)
        runtime.send_signal(signal.SIGSTOP)
        time.sleep(20)  # the job (its own session) ends meanwhile, exit 0
        runtime.send_signal(signal.SIGCONT)
        stdout, stderr = runtime.communicate(timeout=120)
    finally:
        if runtime.poll() is None:
            runtime.send_signal(signal.SIGCONT)
            runtime.kill()
    report = json.loads(stdout)
    assert runtime.returncode == 0 and report["status"] == "SUCCEEDED", (report.get("error"), stderr[-2000:])
    assert [w["status"] for w in report["waves"]] == ["SUCCEEDED"]
    assert "watch schedule" not in stdout + stderr
