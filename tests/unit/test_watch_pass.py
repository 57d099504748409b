"""The watch pass at scale and under partial failure, on moto S3/DynamoDB and real subprocess jobs:
one unreadable output fails only its own wave; unchanged waves cost no ledger write; heartbeats go out
when due, not every tick; the pass stops at its budget and leaves the rest to the next tick."""

from __future__ import annotations

import json
import time
from pathlib import Path

import boto3
import pytest
import test_engine_functions as base
from deadlines import deadline as scaled

from npa_workflow.adapters.s3_store import S3Store
from npa_workflow.engine.launch import launch
from npa_workflow.engine.ports import StoreAccessDenied
from npa_workflow.engine.runs import RunOptions
from npa_workflow.engine.watch import HeartbeatClock, watch_pass
from npa_workflow.ledger import RunRecord, WaveStatus

engine = base.engine  # the fixture: moto S3 + DynamoDB in-process, real subprocess jobs
SPEC, settle, start = base.SPEC, base.settle, base.start

DENY_ALL = {"Version": "2012-10-17", "Statement": [{
    "Effect": "Deny", "Principal": "*", "Action": "s3:*",
    "Resource": ["arn:aws:s3:::locked", "arn:aws:s3:::locked/*"]}]}


def lock_bucket() -> None:
    """A bucket the stack does not own: moto enforces its bucket policy, so HeadObject answers a bare 403
    (HeadObject has no body, so S3 cannot say AccessDenied) — what the watch role meets on AWS."""
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket="locked")
    s3.put_object(Bucket="locked", Key="out.txt", Body=b"x")
    s3.put_bucket_policy(Bucket="locked", Policy=json.dumps(DENY_ALL))


def test_the_store_names_the_uri_and_the_missing_permission_on_a_403(engine):
    lock_bucket()
    with pytest.raises(StoreAccessDenied) as info:
        S3Store(boto3.client("s3")).non_empty("s3://locked/out.txt")
    assert "s3://locked/out.txt" in str(info.value) and "s3:GetObject" in str(info.value)
    assert info.value.operation == "HeadObject"


def test_an_unreadable_output_fails_its_own_wave_and_the_others_proceed(engine):
    lock_bucket()
    start(engine, "good")
    engine.runs.freeze("bad", SPEC.replace("s3://data/out/", "s3://locked/"), "", {}, RunOptions())
    engine.ledger.put_run(RunRecord(run_id="bad", workflow="t"))
    engine.store.put("s3://data/out/1.txt", b"ok")
    launch(engine, {"run_id": "bad", "state": "work", "loops": {"l1": 1}, "token": "t-bad"})
    launch(engine, {"run_id": "good", "state": "work", "loops": {"l1": 1}, "token": "t-good"})
    [(kind, _, _)] = settle(engine, "t-good")
    assert kind == "succeed"
    [(kind, _, (error, cause))] = settle(engine, "t-bad")
    # Retrying the job cannot fix a permission: a configuration failure, not a workload retry.
    assert (kind, error) == ("fail", "Wave.ConfigurationFailed")
    assert "s3://locked/1.txt" in cause and "s3:GetObject" in cause and "HeadObject" in cause
    assert engine.ledger.latest_attempt("bad", "work|refine=1").status == WaveStatus.FAILED


def test_one_waves_unexpected_error_is_reported_and_does_not_stop_the_pass(engine, monkeypatch):
    start(engine, "a")
    start(engine, "b")
    engine.store.put("s3://data/out/1.txt", b"ok")
    launch(engine, {"run_id": "a", "state": "work", "loops": {"l1": 1}, "token": "ta"})
    launch(engine, {"run_id": "b", "state": "work", "loops": {"l1": 1}, "token": "tb"})
    real = engine.callbacks.succeed

    def flaky(token, output):
        if token == "ta":
            raise RuntimeError("Step Functions throttled us")
        return real(token, output)

    monkeypatch.setattr(engine.callbacks, "succeed", flaky)
    reported: list[str] = []

    def a_reported() -> bool:
        return any("run a " in e and "throttled" in e for e in reported)

    deadline = time.monotonic() + scaled(20)
    while time.monotonic() < deadline:  # until both jobs ended and were tended (b's can end first: its wrapper was
        reported += watch_pass(engine).errors  # started ahead)
        if engine.callbacks.outcomes("tb") and a_reported():
            break
        time.sleep(0.1)
    assert engine.callbacks.outcomes("tb")[0][0] == "succeed"  # b completes although a's completion raised
    assert [e for e in reported if "run a " in e and "throttled" in e]
    # The success of a was never delivered, so its attempt is still active: the next tick delivers it.
    assert engine.ledger.latest_attempt("a", "work|refine=1").status != WaveStatus.SUCCEEDED
    monkeypatch.setattr(engine.callbacks, "succeed", real)
    [(kind, _, _)] = settle(engine, "ta")
    assert kind == "succeed" and engine.ledger.latest_attempt("a", "work|refine=1").status == WaveStatus.SUCCEEDED


def running_waves(engine, n: int) -> None:
    slow = SPEC.replace('code: "pass"', 'code: "import time; time.sleep(30)"')
    for i in range(n):
        engine.runs.freeze(f"s{i}", slow, "", {}, RunOptions())
        engine.ledger.put_run(RunRecord(run_id=f"s{i}", workflow="t"))
        launch(engine, {"run_id": f"s{i}", "state": "work", "loops": {"l1": 1}, "token": f"tok{i}"})


def count_calls(engine, monkeypatch) -> dict[str, int]:
    calls = {"mark_status": 0}
    real = engine.ledger.mark_status

    def counted(*args, **kwargs):
        calls["mark_status"] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(engine.ledger, "mark_status", counted)
    return calls


def wait_running(engine, n: int) -> None:
    deadline = time.monotonic() + scaled(20)
    while time.monotonic() < deadline:
        if watch_pass(engine, heartbeat_every_seconds=0).running == n:
            return
        time.sleep(0.02)
    raise AssertionError("jobs never ran")


def test_running_waves_cost_no_ledger_write_and_heartbeat_only_when_due(engine, monkeypatch):
    running_waves(engine, 3)
    try:
        wait_running(engine, 3)
        calls = count_calls(engine, monkeypatch)
        clock = HeartbeatClock()
        before = len(engine.callbacks.calls)
        first = watch_pass(engine, heartbeat_every_seconds=120, clock=clock)
        second = watch_pass(engine, heartbeat_every_seconds=120, clock=clock)
        assert first.running == second.running == 3
        assert calls["mark_status"] == 0  # already RUNNING in the ledger: nothing written
        assert (first.heartbeats, second.heartbeats) == (3, 0)  # a cold clock beats once, then not until due
        assert len(engine.callbacks.calls) - before == 3
    finally:
        engine.executor.cancel([a.job_id for a in engine.ledger.active_waves() if a.job_id])


def test_the_steady_tick_reads_the_active_index_without_timelines_and_tends_no_quiet_wave(engine, monkeypatch):
    """Scale (docs/cloud.md): the pass's Query projects only WATCH_FIELDS, and a wave needing no call never reaches
    the thread pool (its hand-over cost more per wave than the rest of the steady tick)."""
    from npa_workflow.engine import watch

    running_waves(engine, 2)
    try:
        wait_running(engine, 2)
        queries: list[dict] = []
        engine.ledger.client.meta.events.register(
            "provide-client-params.dynamodb.Query", lambda params, **_: queries.append(dict(params)))
        tended: list[str] = []
        real_tend = watch._Pass.tend
        monkeypatch.setattr(watch._Pass, "tend", lambda self, wave, obs: (tended.append(wave.run_id),
                                                                         real_tend(self, wave, obs)))
        clock = HeartbeatClock()
        assert watch_pass(engine, heartbeat_every_seconds=120, clock=clock).heartbeats == 2  # cold: both beaten
        tended.clear()
        queries.clear()
        report = watch_pass(engine, heartbeat_every_seconds=120, clock=clock)
        assert report.running == 2 and report.heartbeats == 0 and tended == []
        [active] = [q for q in queries if q.get("IndexName") == "active" and
                    q["ExpressionAttributeValues"][":p"]["S"] == "ACTIVE"]
        read = set(active["ExpressionAttributeNames"].values())
        assert read == set(watch.WATCH_FIELDS) and "timeline" not in read
    finally:
        engine.executor.cancel([a.job_id for a in engine.ledger.active_waves() if a.job_id])


def test_the_pass_stops_at_its_budget_and_defers_the_rest(engine):
    running_waves(engine, 2)
    try:
        wait_running(engine, 2)
        report = watch_pass(engine, budget_seconds=0)  # no time left after the margin
        assert report.active == 2 and report.deferred == 2 and report.heartbeats == 0
    finally:
        engine.executor.cancel([a.job_id for a in engine.ledger.active_waves() if a.job_id])


EXAMPLES = sorted(p for p in (Path(__file__).resolve().parents[2] / "specs").glob("*.yaml") if p.name != "tools.yaml")


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_write_under_the_deployments_own_bucket(engine, path: Path):
    """The examples named `s3://npa-workflow-examples`, a globally named bucket no stack owns: every output
    check answered 403 on AWS. They write under `{{run.bucket}}`, the bucket the run is frozen in."""
    text = path.read_text()
    assert "npa-workflow-examples" not in text
    engine.runs.freeze("ex", text, (path.parent / "tools.yaml").read_text(), {}, RunOptions())
    run = engine.runs.load("ex")
    assert run.run_ctx.config["bucket"] == engine.runs.bucket == "engine"
    uris = [v for v in run.run_ctx.config.values() if isinstance(v, str) and v.startswith("s3://")]
    assert uris and all(u.startswith("s3://engine/") for u in uris)


ORPHAN_JOB_SECONDS = 30  # how long an orphan's job runs by itself on an idle machine (scaled to this one): every
# wait of these tests ends well before


def orphan_setup(engine, monkeypatch, run_id: str, *, stop: bool) -> tuple[str, str]:
    """A running job whose Task token is gone (moto's interpreter answers InvalidToken, as AWS does for an ended
    execution) and a real execution of the run on moto, stopped or not."""
    from moto.core.config import default_user_config

    from npa_workflow.adapters.sfn_callbacks import SfnCallbacks
    from npa_workflow.adapters.sfn_executions import SfnExecutions

    monkeypatch.setitem(default_user_config, "stepfunctions", {"execute_state_machine": True})

    sfn = boto3.client("stepfunctions")
    machine = sfn.create_state_machine(
        name=f"m-{run_id}", roleArn="arn:aws:iam::123456789012:role/sfn",
        definition=json.dumps({"StartAt": "w", "States": {"w": {"Type": "Wait", "Seconds": 600, "End": True}}}))
    arn = sfn.start_execution(stateMachineArn=machine["stateMachineArn"], name=run_id)["executionArn"]
    started, lifetime = time.monotonic(), scaled(ORPHAN_JOB_SECONDS)
    if stop:
        # moto's worker thread sets up the execution's environment after StartExecution returns; a stop before
        # that meets no environment (AttributeError in moto's worker). Stop once it has entered its Wait state.
        while not any(e["type"] == "WaitStateEntered"
                      for e in sfn.get_execution_history(executionArn=arn)["events"]):
            assert time.monotonic() < started + lifetime / 4, "moto never started the execution"
            time.sleep(0.02)
        sfn.stop_execution(executionArn=arn)
    engine.callbacks = SfnCallbacks(sfn)
    engine.executions = SfnExecutions(sfn)
    slow = SPEC.replace('code: "pass"', f'code: "import time; time.sleep({lifetime:.0f})"')
    engine.runs.freeze(run_id, slow, "", {}, RunOptions())
    engine.ledger.put_run(RunRecord(run_id=run_id, workflow="t", execution_arn=arn))
    job = launch(engine, {"run_id": run_id, "state": "work", "loops": {"l1": 1}, "token": "gone-token"})["job_id"]
    if stop:
        # moto's worker thread records the stop when it next looks (later under load): the pass must describe
        # an ended execution. Bounded by the job's own lifetime, past which nothing would be orphaned.
        deadline = started + lifetime / 2
        while sfn.describe_execution(executionArn=arn)["status"] == "RUNNING":
            assert time.monotonic() < deadline, "moto never recorded the stop of the execution"
            time.sleep(0.05)
    return arn, job


def test_the_watch_reaps_a_run_whose_reap_event_was_lost(engine, monkeypatch):
    arn, job = orphan_setup(engine, monkeypatch, "lost", stop=True)
    report = watch_pass(engine, clock=HeartbeatClock())
    assert report.reaped == ["lost"], report
    attempt = engine.ledger.latest_attempt("lost", "work|refine=1")
    assert attempt.status == WaveStatus.CANCELLED
    assert "ended ABORTED" in attempt.error and "reap event was missed" in attempt.error
    assert engine.executor.local.statuses([job])[job].status == "CANCELLED"  # by its exact id
    assert engine.ledger.get_run("lost").status == "ABORTED"


def test_a_lost_reap_of_many_waves_describes_and_reaps_the_run_once(engine, monkeypatch):
    """A 10,000-member group whose reap was lost answers every heartbeat "gone": the pass describes the run's
    execution once and reaps the run once (all its jobs, by id); its other waves cost no further call."""
    arn, first = orphan_setup(engine, monkeypatch, "lost", stop=True)
    second = launch(engine, {"run_id": "lost", "state": "work", "loops": {"l1": 2}, "token": "gone-token-2"})["job_id"]
    described: list[str] = []
    real = engine.executions.describe
    monkeypatch.setattr(engine.executions, "describe", lambda execution_arn: (described.append(execution_arn),
                                                                             real(execution_arn))[1])
    report = watch_pass(engine, clock=HeartbeatClock(), workers=1)
    assert report.reaped == ["lost"] and described == [arn]
    assert report.heartbeats == 1  # the second wave's token went with its run: not beaten
    for job in (first, second):
        assert engine.executor.local.statuses([job])[job].status == "CANCELLED"
    assert {a.status for a in engine.ledger.attempts("lost")} == {WaveStatus.CANCELLED}


def test_the_watch_reaps_a_run_whose_state_machine_a_deploy_deleted(engine, monkeypatch):
    """A deploy that removes or renames a spec deletes its machine (RemovalPolicy DESTROY). AWS DeleteStateMachine:
    the machine's executions are terminated at their next state transition and, once it is deleted, they are gone
    (DescribeExecution: ExecutionDoesNotExist, as moto answers for a deleted machine's execution); no status change
    reaches reap. The watch finds the token gone, the execution gone, and cancels the run's jobs by id."""
    arn, job = orphan_setup(engine, monkeypatch, "deleted", stop=False)
    machine = arn.replace(":execution:", ":stateMachine:").rsplit(":", 1)[0]
    boto3.client("stepfunctions").delete_state_machine(stateMachineArn=machine)
    report = watch_pass(engine, clock=HeartbeatClock())
    assert report.reaped == ["deleted"], report
    attempt = engine.ledger.latest_attempt("deleted", "work|refine=1")
    assert attempt.status == WaveStatus.CANCELLED
    assert "no longer exists" in attempt.error and "a deploy removed or renamed the spec" in attempt.error
    assert engine.executor.local.statuses([job])[job].status == "CANCELLED"  # by its exact id
    assert engine.ledger.get_run("deleted").status == "ABORTED"


def test_a_gone_token_of_a_live_execution_is_left_to_its_catch(engine, monkeypatch):
    arn, job = orphan_setup(engine, monkeypatch, "live", stop=False)
    try:
        report = watch_pass(engine, clock=HeartbeatClock())
        assert report.heartbeats == 1 and report.reaped == []
        assert engine.ledger.latest_attempt("live", "work|refine=1").status != WaveStatus.CANCELLED
    finally:
        engine.executor.cancel([job])


def test_cleanup_finds_a_just_launched_attempt_the_active_index_does_not_show_yet(engine, monkeypatch):
    """On AWS the `active` GSI is eventually consistent: cleanup reads the run's attempts from the base table."""
    from npa_workflow.engine.cleanup import cancel_active

    running_waves(engine, 1)
    monkeypatch.setattr(engine.ledger, "active_waves", lambda limit=None: [])  # the index has not caught up
    cancelled = cancel_active(engine, "s0", "test")
    assert len(cancelled) == 1
    assert engine.ledger.latest_attempt("s0", "work|refine=1").status == WaveStatus.CANCELLED


def test_a_trigger_whose_completion_failed_is_completed_on_the_next_wake_up(engine, monkeypatch):
    from npa_workflow.engine.trigger import trigger

    start(engine, "tr")
    trigger(engine, {"run_id": "tr", "state": "wait", "loops": {}, "token": "tt"})
    engine.store.put("s3://data/landing/a", b"1")
    engine.store.put("s3://data/landing/b", b"2")
    real = engine.callbacks.succeed

    def throttled(token, output):
        raise RuntimeError("ThrottlingException")

    monkeypatch.setattr(engine.callbacks, "succeed", throttled)
    assert watch_pass(engine).triggers_completed == 0  # the send failed: still waiting, not recorded satisfied
    assert not engine.ledger.watermark("tr", "wait").satisfied
    monkeypatch.setattr(engine.callbacks, "succeed", real)
    assert watch_pass(engine).triggers_completed == 1
    assert [c[0] for c in engine.callbacks.outcomes("tt")] == ["succeed"]


def test_a_recorded_cancel_whose_stop_never_came_is_finished_by_the_watch(engine, monkeypatch):
    # `npa-workflow cancel` writes the CANCEL item, then stops the execution; killed in between, the run's
    # running job must not run on: the watch cancels it by id and its token fails as Wave.Cancelled (not retried).
    running_waves(engine, 2)
    try:
        wait_running(engine, 2)
        engine.ledger.request_cancel("s0", "npa-workflow cancel")
        [job] = [a.job_id for a in engine.ledger.attempts("s0")]
        reads: list[str] = []
        real = engine.ledger.cancel_requested
        monkeypatch.setattr(engine.ledger, "cancel_requested", lambda run_id: (reads.append(run_id), real(run_id))[1])
        clock = HeartbeatClock()
        report = watch_pass(engine, heartbeat_every_seconds=120, clock=clock)
        assert report.cancelled == [job]
        assert sorted(reads) == ["s0", "s1"]  # once per run, when its heartbeat was due
        assert watch_pass(engine, heartbeat_every_seconds=120, clock=clock).cancelled == []
        assert sorted(reads) == ["s0", "s1"]  # no heartbeat due: no read
        [(kind, _, (error, _cause))] = settle(engine, "tok0")
        assert (kind, error) == ("fail", "Wave.Cancelled")
        assert engine.ledger.latest_attempt("s0", "work|refine=1").status == WaveStatus.CANCELLED
        assert engine.ledger.latest_attempt("s1", "work|refine=1").status == WaveStatus.RUNNING  # not cancelled
    finally:
        engine.executor.cancel([a.job_id for a in engine.ledger.active_waves() if a.job_id])
