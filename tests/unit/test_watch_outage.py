"""The watch pass against a slow, loaded or unreachable SkyPilot API server: the real `SkyPilotApi` client and
`SkyPilotExecutor` talk HTTP to the protocol double on 127.0.0.1 (`tests/integration/skypilot/double.py`, its
answers built from recordings of a real 0.14.1 server); the ledger is moto's DynamoDB; Task callbacks are
recorded through the TaskCallbacks port.

Each test names the AWS or SkyPilot fact it relies on:
- Step Functions fails a waitForTaskToken Task with States.HeartbeatTimeout when no SendTaskHeartbeat arrives
  within its HeartbeatSeconds — healthy jobs included, so heartbeats must never wait on SkyPilot;
- SkyPilot's `GET /api/status` takes a list (`request_ids` repeated) and answers without blocking; a launch's job
  id appears only once its request ended, and `/api/get` reads it then;
- an unreachable server refuses the connection (the client retries, then raises SkyPilotUnavailable).
"""

from __future__ import annotations

import importlib.util
import math
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from moto import mock_aws
from test_engine_functions import RecordingCallbacks

from npa_workflow.adapters.s3_store import S3Store
from npa_workflow.adapters.secrets import EnvironmentSecrets
from npa_workflow.adapters.skypilot_api import SkyPilotApi
from npa_workflow.adapters.skypilot_executor import STATUS_BATCH, SkyPilotExecutor
from npa_workflow.engine import watch
from npa_workflow.engine.cleanup import cleanup
from npa_workflow.engine.context import Engine
from npa_workflow.engine.runs import RunOptions, RunStore
from npa_workflow.engine.watch import BUDGET_MARGIN_SECONDS, RECONCILES_PER_TICK, HeartbeatClock, watch_pass
from npa_workflow.ledger import DynamoLedger, RunRecord, RunStatus, WaveAttempt, WaveStatus

pytestmark = pytest.mark.timeout(120)  # each test: an outage costs the client's 1 s retry deadline a pass
DOUBLE_PATH = Path(__file__).resolve().parents[1] / "integration" / "skypilot" / "double.py"
spec = importlib.util.spec_from_file_location("npa_skypilot_double_outage", DOUBLE_PATH)
double_mod = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = double_mod
spec.loader.exec_module(double_mod)

SPEC = """
apiVersion: npa.workflow/v0.0.1
kind: Workflow
metadata: {name: t}
states:
  work: {run: {shell: "true"}, terminal: true}
"""


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


class OrderedCallbacks(RecordingCallbacks):
    """Records, for each heartbeat, how many calls the SkyPilot server had received by then."""

    def __init__(self, double) -> None:
        super().__init__()
        self.double = double
        self.skypilot_calls_at_beat: list[int] = []

    def heartbeat(self, token):
        self.skypilot_calls_at_beat.append(len(self.double.calls))
        return super().heartbeat(token)


@pytest.fixture
def setup(monkeypatch) -> Iterator[tuple[Engine, object]]:
    dummy = {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x", "AWS_DEFAULT_REGION": "us-east-1"}
    for key, value in dummy.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws(), double_mod.SkyPilotDouble() as double:
        double.request_polls = 0
        double.job_statuses = ["RUNNING"]
        double.clock = Clock()
        s3 = boto3.client("s3")
        s3.create_bucket(Bucket="engine")
        ledger = DynamoLedger("ledger")
        ledger.create_table()
        store = S3Store(s3)
        # A short retry deadline: an outage costs each test ~1 s, not the client's 30 s default.
        api = SkyPilotApi(double.endpoint, retry_deadline=1.0, backoff_initial=0.05, backoff_max=0.2,
                          poll_interval=0.02, poll_interval_max=0.05)
        engine = Engine(ledger=ledger, runs=RunStore(store, "engine"), store=store,
                        executor=SkyPilotExecutor(api, EnvironmentSecrets({}), confirm_poll_seconds=0.05),
                        callbacks=OrderedCallbacks(double), cancel_confirm_seconds=2)
        yield engine, double


def seed(engine: Engine, double, n: int, *, pending: bool = True, runs: int = 1) -> None:
    """`n` waves with a token each: a launch request still RUNNING on the server (pending) or a RUNNING job."""
    items = []
    for i in range(n):
        name = f"job-{i}"
        ids = {"request_id": double.seed_launch(name)} if pending else {"job_id": str(double.seed_job(name))}
        status = WaveStatus.LAUNCHING if pending else WaveStatus.RUNNING
        items.append(WaveAttempt(run_id=f"run-{i % runs}", wave_key=f"w{i}", state="work", attempt=1, job_name=name,
                                 task_token=f"token-{i}", status=status, **ids).to_item())
    for start in range(0, len(items), 25):
        engine.ledger.client.batch_write_item(
            RequestItems={"ledger": [{"PutRequest": {"Item": item}} for item in items[start:start + 25]]})


def test_heartbeats_go_out_before_skypilot_is_asked_anything(setup):
    """HeartbeatSeconds: a Task without a heartbeat in time fails States.HeartbeatTimeout. 1,000 launches whose job
    ids SkyPilot takes 10–40 s to produce used to cost a status + get each before the first heartbeat."""
    engine, double = setup
    double.launch_seconds = 60
    seed(engine, double, 40)
    double.latency = 0.05
    report = watch_pass(engine, clock=HeartbeatClock(), heartbeat_every_seconds=120)
    assert report.heartbeats == report.due == 40
    assert engine.callbacks.skypilot_calls_at_beat == [0] * 40  # every beat before the server saw a call


def test_one_status_call_per_batch_of_pending_launches_and_one_get_per_launch_in_its_life(setup, monkeypatch):
    """SkyPilot's /api/status takes a list of request ids (non-blocking); /api/get only once a request ended."""
    from npa_workflow.adapters import skypilot_executor

    assert STATUS_BATCH == 200  # ~10 KB of query: under the 16 KiB request head uvicorn (h11) accepts
    monkeypatch.setattr(skypilot_executor, "STATUS_BATCH", 20)  # the same batching at a tenth of the waves
    engine, double = setup
    double.launch_seconds = 30
    seed(engine, double, 45)
    clock = HeartbeatClock()
    report = watch_pass(engine, clock=clock, heartbeat_every_seconds=120)
    status_calls = double.calls_to("/api/status")
    assert len(status_calls) == math.ceil(45 / 20) == 3
    assert sum(len(c["query"]["request_ids"]) for c in status_calls) == 45
    assert double.calls_to("/api/get") == [] and report.active == 45
    double.calls.clear()
    double.clock.t += 31  # the server finished the launches
    watch_pass(engine, clock=clock, heartbeat_every_seconds=120)
    # A queue request is itself asynchronous: its POST, then one status and one get of its own request id.
    assert len(double.calls_to("/jobs/queue/v2")) == 1
    assert len(double.calls_to("/api/status")) == 3 + 1 and len(double.calls_to("/api/get")) == 45 + 1
    assert all(w.job_id for w in engine.ledger.active_waves())  # every job id recorded
    double.calls.clear()
    watch_pass(engine, clock=clock, heartbeat_every_seconds=120)
    # Job ids known: one queue request for all 45 jobs, nothing per wave.
    assert [c["path"] for c in double.calls] == ["/jobs/queue/v2", "/api/status", "/api/get"]


def test_skypilot_down_loses_no_wave_and_every_due_heartbeat_goes_out(setup):
    """An unreachable server (connection refused) says nothing about the jobs: every due heartbeat is sent, no
    wave is failed, and the outage is recorded with when it began; the server back, the pass carries on."""
    engine, double = setup
    seed(engine, double, 10, pending=False)
    seed_pending = [double.seed_launch(f"late-{i}") for i in range(3)]
    for i, rid in enumerate(seed_pending):
        engine.ledger.client.put_item(TableName="ledger", Item=WaveAttempt(
            run_id="run-late", wave_key=f"l{i}", state="work", attempt=1, job_name=f"late-{i}", request_id=rid,
            task_token=f"late-token-{i}", status=WaveStatus.LAUNCHING).to_item())
    double.outage()
    clock = HeartbeatClock()
    started = time.monotonic()
    report = watch_pass(engine, clock=clock, heartbeat_every_seconds=0, budget_seconds=BUDGET_MARGIN_SECONDS + 20)
    assert time.monotonic() - started < 20
    assert report.heartbeats == 13 and report.failed == [] and report.succeeded == []
    assert "unreachable" in report.scheduler_unreachable and report.scheduler_unreachable_since
    assert [c for c in engine.callbacks.calls if c[0] != "heartbeat"] == []
    since, why = engine.ledger.scheduler_outage()
    assert since == report.scheduler_unreachable_since and "unreachable" in why
    again = watch_pass(engine, clock=clock, heartbeat_every_seconds=0, budget_seconds=BUDGET_MARGIN_SECONDS + 20)
    assert again.heartbeats == 13 and again.scheduler_unreachable_since == since  # the outage's start is kept
    double.recover()
    back = watch_pass(engine, clock=clock, heartbeat_every_seconds=0, budget_seconds=BUDGET_MARGIN_SECONDS + 20)
    assert back.scheduler_unreachable == "" and back.running == 13
    assert engine.ledger.scheduler_outage() is None
    assert all(w.job_id for w in engine.ledger.active_waves())


def test_a_pass_against_a_slow_server_ends_within_its_budget_and_keeps_what_it_read(setup):
    """Each /api/get is a round trip: 48 finished launches at 300 ms, 8 at a time, do not fit a 2 s budget; the
    pass stops at its budget, records the job ids it read, and the next passes read the rest (no outage)."""
    engine, double = setup
    double.launch_seconds = 1
    seed(engine, double, 48)
    launches = {c for c in double._requests}
    double.clock.t += 2
    double.latency = 0.3
    budget = BUDGET_MARGIN_SECONDS + 2.0
    clock = HeartbeatClock()
    for i in range(48):  # beaten just now: this test's budget goes to the scheduler round
        clock.beat(f"token-{i}", time.monotonic())
    started = time.monotonic()
    first = watch_pass(engine, clock=clock, heartbeat_every_seconds=120, budget_seconds=budget)
    took = time.monotonic() - started
    assert took <= budget, took
    assert first.scheduler_unreachable == ""
    assert sum(1 for w in engine.ledger.active_waves() if w.job_id) < 48  # cut short by the budget
    for _ in range(20):
        watch_pass(engine, clock=clock, heartbeat_every_seconds=120, budget_seconds=budget)
        if all(w.job_id for w in engine.ledger.active_waves()):
            break
    assert all(w.job_id for w in engine.ledger.active_waves())
    read = [c["query"]["request_id"][0] for c in double.calls_to("/api/get")]
    read = [rid for rid in read if rid in launches]
    # Every launch's result read (again only when a pass ran out of time between reading and recording it).
    assert set(read) == launches
    assert engine.ledger.scheduler_outage() is None


def test_ticks_never_overlap(setup):
    """EventBridge starts a watch every minute whether or not the last one ended: the ledger's lease lets one
    tick at a time work; a tick killed at its timeout frees the lease by its expiry."""
    engine, double = setup
    seed(engine, double, 3, pending=False)
    assert engine.ledger.take_watch_lease("another tick", 60)
    skipped = watch_pass(engine, clock=HeartbeatClock(), budget_seconds=60)
    assert skipped.skipped and skipped.heartbeats == 0 and double.calls == []
    engine.ledger.release_watch_lease("another tick")
    assert watch_pass(engine, clock=HeartbeatClock(), budget_seconds=60).heartbeats == 3
    assert engine.ledger.take_watch_lease("killed tick", 0)  # its lease ran out with it
    assert watch_pass(engine, clock=HeartbeatClock(), budget_seconds=60).heartbeats == 3


def test_reconciles_are_capped_per_tick_and_every_waiting_wave_is_heartbeaten(setup):
    """An unknown launch outcome is reconciled by exact name: a `/jobs/queue/v2` request with `name_match` each."""
    engine, double = setup
    n = RECONCILES_PER_TICK + 7
    for i in range(n):
        engine.ledger.client.put_item(TableName="ledger", Item=WaveAttempt(
            run_id="r", wave_key=f"u{i}", state="work", attempt=1, job_name=f"unknown-{i}", task_token=f"u-{i}",
            status=WaveStatus.UNKNOWN).to_item())
    report = watch_pass(engine, clock=HeartbeatClock(), heartbeat_every_seconds=120)
    assert report.heartbeats == n and report.reconcile_deferred == 7
    asked = [c for c in double.calls_to("/jobs/queue/v2") if c["body"].get("name_match")]
    assert len(asked) == RECONCILES_PER_TICK


def test_a_state_that_timed_out_during_an_outage_says_since_when_skypilot_was_unreachable(setup):
    """States.Timeout reaches cleanup (the Catch); with SkyPilot down, its cancel cannot run: cleanup records the
    root cause first, the cancel fails within its budget and never becomes the execution's error."""
    engine, double = setup
    engine.runs.freeze("r1", SPEC, "", {}, RunOptions())
    engine.ledger.put_run(RunRecord(run_id="r1", workflow="t"))
    job = double.seed_job("r1-job")
    engine.ledger.client.put_item(TableName="ledger", Item=WaveAttempt(
        run_id="r1", wave_key="work", state="work", attempt=1, job_name="r1-job", job_id=str(job), task_token="t1",
        status=WaveStatus.RUNNING).to_item())
    double.outage()
    report = watch_pass(engine, clock=HeartbeatClock(), budget_seconds=BUDGET_MARGIN_SECONDS + 10)
    assert report.heartbeats == 1 and report.scheduler_unreachable_since
    result = cleanup(engine, {"run_id": "r1", "state": "work",
                              "error": {"Error": "States.Timeout", "Cause": ""}, "deadline": {"timeoutSeconds": 600}})
    assert result["error"] == "Wave.TimedOut"
    assert f"unreachable since {report.scheduler_unreachable_since}" in result["cause"]
    assert "cancelling its job(s) did not complete" in result["cause"]
    run = engine.ledger.get_run("r1")
    assert run.status == RunStatus.FAILED and run.error.state == "work"
    assert engine.ledger.latest_attempt("r1", "work").status == WaveStatus.RUNNING  # the watch/reap cancel it later
    double.recover()


def test_cleanup_of_a_failed_wave_keeps_the_root_cause_when_skypilot_is_down(setup):
    engine, double = setup
    engine.runs.freeze("r2", SPEC, "", {}, RunOptions())
    engine.ledger.put_run(RunRecord(run_id="r2", workflow="t"))
    engine.ledger.client.put_item(TableName="ledger", Item=WaveAttempt(
        run_id="r2", wave_key="work", state="work", attempt=1, job_name="r2-a", job_id="7", task_token="t2",
        status=WaveStatus.FAILED, error="state 'work' (job 7): exit 3", error_category="workload",
        ended_at="2026-12-01T00:00:00.000Z").to_item())
    engine.ledger.client.put_item(TableName="ledger", Item=WaveAttempt(
        run_id="r2", wave_key="other", state="other", attempt=1, job_name="r2-b",
        job_id=str(double.seed_job("r2-b")), task_token="t3", status=WaveStatus.RUNNING).to_item())
    double.outage()
    result = cleanup(engine, {"run_id": "r2", "state": "work",
                              "error": {"Error": "Wave.Failed", "Cause": "x"}})
    assert result["error"] == "Wave.Failed" and result["cause"].startswith("state 'work' (job 7): exit 3")
    assert "SkyPilotUnavailable" in result["cause"]
    assert engine.ledger.get_run("r2").status == RunStatus.FAILED
    double.recover()


def test_budget_reaches_the_executors_threads():
    """The invocation's budget is a context variable: the pass's pool runs each item in a copy of its context."""
    from npa_workflow import budget

    seen: list[float | None] = []
    with budget.within(30):
        watch._pool_each([1, 2, 3], lambda _: seen.append(budget.remaining()), workers=3)
    assert len(seen) == 3 and all(s is not None and 0 < s <= 30 for s in seen)


def test_a_flaky_server_is_retried_and_fails_no_wave(setup):
    """HTTP 503 (SkyPilot's "Server is shutting down", a proxy's "unavailable") is retried by the client within
    its deadline: with 60 % of the answers 503, the pass still follows every job and fails none."""
    engine, double = setup
    seed(engine, double, 5, pending=False)
    double.error_rate = 0.6
    report = watch_pass(engine, clock=HeartbeatClock(), budget_seconds=BUDGET_MARGIN_SECONDS + 20)
    assert report.running == 5 and report.failed == [] and report.scheduler_unreachable == ""
    assert report.heartbeats == 5
    assert len(double.calls) > 3  # one queue request is 3 calls (POST, status, get): some were answered 503, retried
