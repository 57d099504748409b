"""The engine functions on real parts: moto S3 and DynamoDB in-process, real subprocess jobs.

Task callbacks are recorded through our own TaskCallbacks port (the state machine itself is
exercised end to end in tests/e2e); everything else is the code the Lambdas run.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from npa_workflow.adapters.s3_store import S3Store
from npa_workflow.embedded_aws.durable_aws import durable_aws
from npa_workflow.engine.cleanup import cleanup, reap
from npa_workflow.engine.context import Engine
from npa_workflow.engine.decide import decide
from npa_workflow.engine.errors import DecisionMalformed, DecisionMissing, RunNotFound
from npa_workflow.engine.launch import launch
from npa_workflow.engine.ports import SubmitError
from npa_workflow.engine.runs import RunOptions, RunStore
from npa_workflow.engine.trigger import trigger
from npa_workflow.engine.watch import watch_pass
from npa_workflow.engine.watermarks import on_object_created
from npa_workflow.errors import SpecError
from npa_workflow.ledger import DynamoLedger, RunRecord, WaveStatus
from npa_workflow.local_jobs.job_executor import LocalJobExecutor

PY = sys.executable
SPEC = f"""
apiVersion: npa.workflow/v0.0.1
kind: Workflow
metadata: {{name: t}}
config:
  bucket: data
  decision_uri: "s3://data/decision.json"
states:
  work:
    run: {{argv: ["{PY}", "-c", "{{{{config.code}}}}"]}}
    outputs: [{{uri: "s3://data/out/{{{{loop.refine}}}}.txt"}}]
    params: {{code: "pass"}}
  refine: {{sequence: [work, gate], loop: {{max: 2, until: promote_checkpoint}}, next: route}}
  gate: {{run: {{shell: "true"}}, writesDecision: true, outputs: [{{uri: "s3://data/gate.json", schema: decision}}]}}
  route:
    run: {{shell: "true"}}
    transitions: [{{when: promote_checkpoint, goto: done}}]
    next: done
  wait:
    trigger: {{uri: "s3://data/landing/", minObjects: 2}}
    run: {{shell: "true"}}
    next: done
  done: {{run: {{shell: "true"}}, terminal: true}}
"""


class RecordingCallbacks:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, object]] = []

    def succeed(self, token, output):
        self.calls.append(("succeed", token, output))
        return True

    def fail(self, token, error, cause):
        self.calls.append(("fail", token, (error, cause)))
        return True

    def heartbeat(self, token):
        self.calls.append(("heartbeat", token, None))
        return True

    def outcomes(self, token):
        return [c for c in self.calls if c[1] == token and c[0] != "heartbeat"]


@pytest.fixture
def engine(tmp_path: Path, monkeypatch):
    dummy = {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x", "AWS_DEFAULT_REGION": "us-east-1"}
    for key, value in dummy.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    # DynamoDB applies a conditional write atomically per item; moto in-process checks the condition and writes
    # without a lock, so two threads (the race tests: decide and the watch) could both pass a "not ended yet"
    # check and the later write win. The twin serializes moto's writes as DynamoDB does (durable_aws, with no
    # state directory: the serialization alone), so the races test the engine, not moto's thread safety. It also
    # keeps reads apart from a write's change, as DynamoDB serves them (moto would iterate a dict being changed).
    with mock_aws(), durable_aws(None):
        s3 = boto3.client("s3")
        for bucket in ("engine", "data"):
            s3.create_bucket(Bucket=bucket)
        ledger = DynamoLedger("ledger")
        ledger.create_table()
        store = S3Store(s3)
        eng = Engine(ledger=ledger, runs=RunStore(store, "engine"), store=store,
                     executor=LocalJobExecutor(tmp_path / "jobs", cancel_grace_seconds=1.0),
                     callbacks=RecordingCallbacks(), cancel_confirm_seconds=10)
        yield eng


def start(engine: Engine, run_id: str = "r1", **options) -> None:
    engine.runs.freeze(run_id, SPEC, "", {}, RunOptions(**options))
    engine.ledger.put_run(RunRecord(run_id=run_id, workflow="t"))


def settle(engine: Engine, token: str, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        watch_pass(engine)
        done = engine.callbacks.outcomes(token)
        if done:
            return done
        time.sleep(0.1)
    raise AssertionError(f"token {token} never completed")


def test_a_wave_succeeds_only_with_its_declared_output(engine):
    start(engine)
    event = {"run_id": "r1", "state": "work", "loops": {"l1": 1}, "token": "t1"}
    first = launch(engine, event)
    assert first["attempt"] == 1 and first["job_id"]
    [(kind, _, (error, cause))] = settle(engine, "t1")
    assert (kind, error) == ("fail", "Wave.Failed")
    assert "completed without declared output(s): s3://data/out/1.txt" in cause
    # Step Functions retries: a new attempt, and this time the output exists.
    engine.store.put("s3://data/out/1.txt", b"ok")
    second = launch(engine, {**event, "token": "t2"})
    assert second["attempt"] == 2
    [(kind, _, _)] = settle(engine, "t2")
    assert kind == "succeed"
    attempts = engine.ledger.attempts("r1")
    assert [(a.attempt, a.status) for a in attempts] == [(1, WaveStatus.FAILED), (2, WaveStatus.SUCCEEDED)]


def test_a_second_launch_of_a_live_wave_adopts_its_job(engine):
    start(engine)
    engine.runs.freeze("r2", SPEC.replace('code: "pass"', 'code: "import time; time.sleep(30)"'), "", {},
                       RunOptions())
    engine.ledger.put_run(RunRecord(run_id="r2", workflow="t"))
    event = {"run_id": "r2", "state": "work", "loops": {"l1": 1}, "token": "t1"}
    first = launch(engine, event)
    again = launch(engine, {**event, "token": "t2"})
    assert again["adopted"] is True and again["job_id"] == first["job_id"]
    assert engine.ledger.latest_attempt("r2", "work|refine=1").task_token == "t2"
    assert len(engine.ledger.attempts("r2")) == 1
    cancelled = reap(engine, "r2", "test stopped the run")
    assert cancelled == [first["job_id"]]
    assert engine.ledger.latest_attempt("r2", "work|refine=1").status == WaveStatus.CANCELLED


def test_a_succeeded_wave_is_replayed_not_relaunched(engine):
    start(engine)
    engine.store.put("s3://data/out/1.txt", b"ok")
    event = {"run_id": "r1", "state": "work", "loops": {"l1": 1}, "token": "t1"}
    launch(engine, event)
    settle(engine, "t1")
    replay = launch(engine, {**event, "token": "t9"})
    assert replay["replayed"] is True
    assert engine.callbacks.outcomes("t9")[0][0] == "succeed"
    assert len(engine.ledger.attempts("r1")) == 1


def test_decide_reads_and_records_the_artifact(engine):
    start(engine)
    engine.store.put("s3://data/gate.json", json.dumps({"decision": "promote"}).encode())
    out = decide(engine, {"run_id": "r1", "state": "gate", "loops": {"l1": 1}, "purpose": "loop", "current": ""})
    assert out["decision"] == "promote_checkpoint"
    [record] = engine.ledger.decisions("r1")
    assert (record.uri, record.decision, record.source) == ("s3://data/gate.json", "promote_checkpoint", "artifact")


def test_a_missing_artifact_falls_back_only_to_a_given_assumption(engine):
    start(engine, "with", assume_decision="promote")
    out = decide(engine, {"run_id": "with", "state": "route", "loops": {}, "purpose": "transitions"})
    assert out == {"decision": "promote_checkpoint", "source": "assume_decision_fallback"}
    assert engine.ledger.decisions("with")[0].source == "assume_decision_fallback"
    start(engine, "without")
    with pytest.raises(DecisionMissing, match="s3://data/decision.json does not exist"):
        decide(engine, {"run_id": "without", "state": "route", "loops": {}, "purpose": "transitions"})


def test_a_malformed_artifact_fails_naming_the_uri(engine):
    start(engine, assume_decision="promote")
    engine.store.put("s3://data/decision.json", b"{not json")
    with pytest.raises(DecisionMalformed, match="s3://data/decision.json is not valid JSON"):
        decide(engine, {"run_id": "r1", "state": "route", "loops": {}, "purpose": "transitions"})
    assert engine.ledger.decisions("r1")[0].error


def test_runtime_mode_specs_never_use_the_assumption(engine):
    spec = SPEC.replace("metadata: {name: t}", "metadata: {name: t, executionMode: runtime}")
    engine.runs.freeze("rt", spec, "", {}, RunOptions(assume_decision="promote"))
    with pytest.raises(DecisionMissing, match="executionMode: runtime"):
        decide(engine, {"run_id": "rt", "state": "route", "loops": {}, "purpose": "transitions"})


def test_an_unreadable_decision_revokes_its_writers_success_so_a_resume_relaunches_it(engine):
    start(engine, "rd")
    # `work` fails once (no declared output) and its Retry succeeds: that failure is not this run's cause.
    work = {"run_id": "rd", "state": "work", "loops": {"l1": 1}, "token": "w1"}
    launch(engine, work)
    assert settle(engine, "w1")[0][0] == "fail"
    engine.store.put("s3://data/out/1.txt", b"ok")
    launch(engine, {**work, "token": "w2"})
    assert settle(engine, "w2")[0][0] == "succeed"
    engine.store.put("s3://data/gate.json", b"not json")  # what the gate job wrote: its declared output exists
    gate = {"run_id": "rd", "state": "gate", "loops": {"l1": 1}, "token": "g1"}
    read = {k: v for k, v in gate.items() if k != "token"}
    launch(engine, gate)
    assert settle(engine, "g1")[0][0] == "succeed"
    with pytest.raises(DecisionMalformed, match="s3://data/gate.json is not valid JSON") as raised:
        decide(engine, {**read, "purpose": "loop", "current": ""})
    attempt = engine.ledger.latest_attempt("rd", "gate|refine=1")
    assert (attempt.attempt, attempt.status, attempt.error) == (1, WaveStatus.FAILED, str(raised.value))
    assert attempt.error_category == "workload" and attempt.job_id
    # The run reports the decision error (the Lambda's error body is the Catch's cause), not work's retried failure.
    body = json.dumps({"errorType": "DecisionMalformed", "errorMessage": str(raised.value)})
    result = cleanup(engine, {**read, "error": {"Error": "DecisionMalformed", "Cause": body}})
    assert result == {"error": "DecisionMalformed", "cause": str(raised.value)}
    # Resumed (a new execution), the gate is launched again, not replayed; its new artifact is read.
    again = launch(engine, {**gate, "token": "g2"})
    assert again["attempt"] == 2 and "replayed" not in again
    engine.store.put("s3://data/gate.json", json.dumps({"decision": "promote"}).encode())  # the new job's write
    assert settle(engine, "g2")[0][0] == "succeed"
    assert decide(engine, {**read, "purpose": "loop", "current": ""})["decision"] == "promote_checkpoint"
    assert [a.status for a in engine.ledger.attempts("rd", "gate|refine=1")] == [WaveStatus.FAILED,
                                                                                 WaveStatus.SUCCEEDED]


class DecideInsideSucceed(RecordingCallbacks):
    """The execution moves on as soon as the watch completes the token: `decide` runs there, before the watch's
    own write of the attempt's end (the order the watch takes: token first, then the ledger)."""

    def __init__(self, engine: Engine, token: str, read: dict) -> None:
        super().__init__()
        self.engine, self.token, self.read = engine, token, read
        self.raised: list[Exception] = []

    def succeed(self, token, output):
        super().succeed(token, output)
        if token == self.token:
            self.raised.append(_decide_error(self.engine, self.read))
        return True


def _decide_error(engine: Engine, read: dict) -> Exception:
    try:
        decide(engine, {**read, "purpose": "loop", "current": ""})
    except DecisionMalformed as exc:
        return exc
    raise AssertionError("a malformed decision was read as a decision")


def _malformed_gate(engine: Engine, run_id: str) -> tuple[dict, dict]:
    start(engine, run_id)
    engine.store.put("s3://data/gate.json", b"not json")
    gate = {"run_id": run_id, "state": "gate", "loops": {"l1": 1}, "token": f"{run_id}-g"}
    return gate, {k: v for k, v in gate.items() if k != "token"}


@pytest.mark.parametrize("order", ["finish then decide", "decide then finish"])
def test_a_malformed_decision_leaves_its_attempt_failed_whichever_lands_first(engine, order):
    gate, read = _malformed_gate(engine, "race")
    if order == "decide then finish":
        engine.callbacks = DecideInsideSucceed(engine, gate["token"], read)
    launch(engine, gate)
    assert settle(engine, gate["token"])[0][0] == "succeed"
    raised = engine.callbacks.raised if order == "decide then finish" else [_decide_error(engine, read)]
    watch_pass(engine)  # a later tick changes nothing
    [attempt] = engine.ledger.attempts("race", "gate|refine=1")
    assert (attempt.status, attempt.error) == (WaveStatus.FAILED, str(raised[0]))
    assert attempt.error_category == "workload"
    # so a resume relaunches the gate instead of replaying the malformed success
    assert launch(engine, {**gate, "token": "again"})["attempt"] == 2


def _race(engine: Engine, run_id: str) -> WaveStatus:
    """Launch a gate with a malformed decision, then release the watch's finish and the execution's decide (which
    starts as soon as the token is completed) together on two threads; the attempt's status once both are done."""
    import threading

    gate, read = _malformed_gate(engine, run_id)
    launch(engine, gate)
    go = threading.Barrier(2)
    raised: list[BaseException] = []

    def finish() -> None:
        go.wait()
        settle(engine, gate["token"])

    def read_it() -> None:
        go.wait()
        while not engine.callbacks.outcomes(gate["token"]):
            time.sleep(0.001)
        try:
            _decide_error(engine, read)
        except BaseException as exc:  # noqa: BLE001 - reported below
            raised.append(exc)

    threads = [threading.Thread(target=finish), threading.Thread(target=read_it)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not raised and not any(t.is_alive() for t in threads)
    watch_pass(engine)
    return engine.ledger.latest_attempt(run_id, "gate|refine=1").status


def test_a_malformed_decision_racing_the_watch_leaves_its_attempt_failed_every_time(engine):
    """The two on threads, released together, again and again: every outcome is FAILED (was SUCCEEDED once in 28)."""
    assert [_race(engine, f"rep{n}") for n in range(6)] == [WaveStatus.FAILED] * 6


def test_a_malformed_decision_read_while_the_watchs_success_is_being_written_still_fails_the_attempt(
        engine, monkeypatch):
    """Decide reads the attempt not yet ended while the watch's SUCCEEDED write is on its way to the store (held
    until decide has read), and decide's own "not ended" write reaches the store only after the success landed.
    DynamoDB applies the two conditional writes one after the other, so decide's loses and decide must revoke
    the success that landed: without that fallback in `engine.decide._revoke_success` this ends SUCCEEDED, every
    time. (The holds are outside the store: a read there waits for a write's change, as in DynamoDB a read sees
    the item before or after a write, never during.)"""
    import threading

    gate, read = _malformed_gate(engine, "held")
    launch(engine, gate)
    decide_read, landed = threading.Event(), threading.Event()
    held: list[bool] = []
    latest_attempt, finish_attempt = engine.ledger.latest_attempt, engine.ledger.finish_attempt

    def noted_latest_attempt(run_id, wave_key):
        found = latest_attempt(run_id, wave_key)
        if threading.current_thread().name == "decide":
            assert found is not None and not found.terminal  # the success not applied yet
            decide_read.set()
        return found

    def ordered_finish_attempt(run_id, wave_key, attempt, status, *args, **kwargs):
        if threading.current_thread().name == "decide":
            assert landed.wait(30)  # decide's write comes after the watch's success landed
            return finish_attempt(run_id, wave_key, attempt, status, *args, **kwargs)
        if status == WaveStatus.SUCCEEDED:
            held.append(decide_read.wait(30))  # the watch's success waits until decide has read
        try:
            return finish_attempt(run_id, wave_key, attempt, status, *args, **kwargs)
        finally:
            if status == WaveStatus.SUCCEEDED:
                landed.set()

    monkeypatch.setattr(engine.ledger, "latest_attempt", noted_latest_attempt)
    monkeypatch.setattr(engine.ledger, "finish_attempt", ordered_finish_attempt)
    raised: list[BaseException] = []

    def read_it() -> None:
        while not engine.callbacks.outcomes(gate["token"]):  # the execution moves on once the token completes
            time.sleep(0.001)
        try:
            _decide_error(engine, read)
        except BaseException as exc:  # noqa: BLE001 - reported below
            raised.append(exc)

    deciding = threading.Thread(target=read_it, name="decide")
    deciding.start()
    settle(engine, gate["token"])
    deciding.join(30)
    assert not raised and not deciding.is_alive() and held == [True]
    [attempt] = engine.ledger.attempts("held", "gate|refine=1")
    assert attempt.status == WaveStatus.FAILED and attempt.timeline[-1].note.startswith("success revoked")


def test_a_missing_decision_revokes_its_states_success_unless_the_run_assumes_one(engine):
    route = {"state": "route", "loops": {}}
    for run_id, assumption in (("with", "promote"), ("without", "")):
        start(engine, run_id, assume_decision=assumption)
        launch(engine, {**route, "run_id": run_id, "token": f"{run_id}-1"})
        assert settle(engine, f"{run_id}-1")[0][0] == "succeed"
    # --assume-decision stands in for the missing file: the wave's success stands and a resume replays it.
    read = decide(engine, {**route, "run_id": "with", "purpose": "transitions"})
    assert read["source"] == "assume_decision_fallback"
    assert launch(engine, {**route, "run_id": "with", "token": "with-2"})["replayed"] is True
    with pytest.raises(DecisionMissing, match="does not exist"):
        decide(engine, {**route, "run_id": "without", "purpose": "transitions"})
    assert engine.ledger.latest_attempt("without", "route").status == WaveStatus.FAILED
    assert launch(engine, {**route, "run_id": "without", "token": "without-2"})["attempt"] == 2
    settle(engine, "without-2")


def test_trigger_waits_for_objects_then_completes_once(engine):
    start(engine)
    out = trigger(engine, {"run_id": "r1", "state": "wait", "loops": {}, "token": "tw"})
    assert out["satisfied"] is False and out["uri"] == "s3://data/landing/"
    engine.store.put("s3://data/landing/a", b"1")
    assert on_object_created(engine, "data", "landing/a") == 0
    engine.store.put("s3://data/landing/b", b"2")
    assert on_object_created(engine, "data", "landing/b") == 1
    watch_pass(engine)  # the polling half must not complete the token a second time
    assert [c[0] for c in engine.callbacks.outcomes("tw")] == ["succeed"]
    mark = engine.ledger.watermark("r1", "wait")
    assert mark.satisfied and mark.objects == 2
    again = trigger(engine, {"run_id": "r1", "state": "wait", "loops": {}, "token": "tw2"})
    assert again["replayed"] is True  # a satisfied watch is not waited for again


def test_cleanup_cancels_the_running_job_and_returns_the_root_cause(engine):
    spec = SPEC.replace('code: "pass"', 'code: "import time; time.sleep(30)"')
    engine.runs.freeze("r3", spec, "", {}, RunOptions())
    engine.ledger.put_run(RunRecord(run_id="r3", workflow="t"))
    started = launch(engine, {"run_id": "r3", "state": "work", "loops": {"l1": 1}, "token": "t1"})
    result = cleanup(engine, {"run_id": "r3", "state": "work", "loops": {"l1": 1}, "deadline": {"timeoutSeconds": 900},
                              "error": {"Error": "States.Timeout", "Cause": None}})
    # A Fail state may not re-raise a `States.*` name (AWS: States.Runtime "Custom Error Names MUST NOT begin
    # with the prefix 'States.'"): cleanup answers the project's own name, saying which deadline and how to raise it.
    assert result["error"] == "Wave.TimedOut"
    assert "state 'work' timed out: it ran past its deadline of 900 s" in result["cause"]
    assert "timeoutSeconds" in result["cause"] and "--max-wait-seconds" in result["cause"]
    assert started["job_id"] in result["cause"]
    info = engine.executor.local.statuses([started["job_id"]])[started["job_id"]]
    assert info.status == "CANCELLED"
    assert engine.ledger.get_run("r3").status == "FAILED"


def test_cleanup_of_a_timeout_with_no_cancel_on_timeout_leaves_the_job_running(engine):
    spec = SPEC.replace('code: "pass"', 'code: "import time; time.sleep(30)"')
    engine.runs.freeze("r4", spec, "", {}, RunOptions(cancel_on_timeout=False))
    engine.ledger.put_run(RunRecord(run_id="r4", workflow="t"))
    started = launch(engine, {"run_id": "r4", "state": "work", "loops": {"l1": 1}, "token": "t4"})
    try:
        result = cleanup(engine, {"run_id": "r4", "state": "work", "loops": {"l1": 1},
                                  "error": {"Error": "States.Timeout", "Cause": None}})
        job = started["job_id"]
        assert "timed out" in result["cause"] and "cancelled job(s)" not in result["cause"]
        assert f"still running (--no-cancel-on-timeout): {job}" in result["cause"]
        assert f"`npa-workflow jobs cancel {job}`" in result["cause"]
        info = engine.executor.local.statuses([started["job_id"]])[started["job_id"]]
        assert info.status == "RUNNING"
        assert [a.status for a in engine.ledger.attempts("r4")] == [WaveStatus.FAILED]  # reap will skip it
    finally:
        engine.executor.cancel([started["job_id"]])


def test_a_runs_options_are_read_without_its_spec(engine):
    options = RunOptions(cancel_on_timeout=False, max_wait_seconds=60)
    engine.runs.freeze("ro", "states: [this is not a spec", "", {}, options)
    fresh = RunStore(engine.store, engine.runs.bucket)  # nothing cached
    assert fresh.options("ro") == options
    with pytest.raises(SpecError):
        fresh.load("ro")
    with pytest.raises(RunNotFound, match="'nope' has no frozen spec"):
        fresh.options("nope")


def test_named_secrets_reach_the_job_from_the_environment_and_nowhere_else(engine, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf-very-secret")
    spec = SPEC.replace('code: "pass"', 'code: "import os,sys; sys.exit(0 if os.environ.get(\'HF_TOKEN\') else 3)"')
    engine.runs.freeze("rs", spec, "", {}, RunOptions(secret_names=("HF_TOKEN",)))
    engine.ledger.put_run(RunRecord(run_id="rs", workflow="t"))
    engine.store.put("s3://data/out/1.txt", b"ok")
    launch(engine, {"run_id": "rs", "state": "work", "loops": {"l1": 1}, "token": "ts"})
    [(kind, _, _)] = settle(engine, "ts")
    assert kind == "succeed"  # the job saw the secret
    stored = json.dumps([a.model_dump() for a in engine.ledger.attempts("rs")])
    frozen = (engine.store.get("s3://engine/runs/rs/run.json") or b"").decode()
    assert "hf-very-secret" not in stored and "hf-very-secret" not in frozen
    assert "HF_TOKEN" in frozen  # only the name travels


class LostResponseExecutor(LocalJobExecutor):
    """The job starts, but the answer to the submit is lost (a timeout after the request was sent)."""

    def submit(self, job):
        super().submit(job)
        raise SubmitError("launch outcome unknown: read timed out", "unknown")


def test_a_launch_with_an_unknown_outcome_is_reconciled_by_name_never_resubmitted(engine, tmp_path):
    engine.executor = LostResponseExecutor(tmp_path / "lost-jobs", cancel_grace_seconds=1.0)
    start(engine)
    engine.store.put("s3://data/out/1.txt", b"ok")
    event = {"run_id": "r1", "state": "work", "loops": {"l1": 1}, "token": "t1"}
    first = launch(engine, event)
    assert "unknown" in first
    assert engine.ledger.latest_attempt("r1", "work|refine=1").status == WaveStatus.UNKNOWN
    again = launch(engine, {**event, "token": "t2"})  # a retried Lambda call must not submit again
    assert again["adopted"] is True
    name = engine.ledger.latest_attempt("r1", "work|refine=1").job_name
    [(kind, _, _)] = settle(engine, "t2")  # the watch pass adopts the one job with that name
    assert kind == "succeed"
    assert len(engine.executor.find_by_name(name)) == 1


class RecordingExecutor(LocalJobExecutor):
    """Runs jobs locally and keeps every task document launch submitted."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.documents: list[str] = []

    def submit(self, job):
        self.documents.append(job.task_yaml)
        return super().submit(job)


def test_each_loop_round_is_launched_with_its_own_attempt_id_and_a_growing_fence(engine, tmp_path):
    import yaml

    engine.executor = RecordingExecutor(tmp_path / "rec-jobs", cancel_grace_seconds=1.0)
    start(engine)
    for round_ in (1, 2):
        engine.store.put(f"s3://data/out/{round_}.txt", b"ok")
        launch(engine, {"run_id": "r1", "state": "work", "loops": {"l1": round_}, "token": f"t{round_}"})
        settle(engine, f"t{round_}")
    envs = [list(yaml.safe_load_all(d))[1]["envs"] for d in engine.executor.documents]
    assert [e["NPA_WORKFLOW_FENCE_SEQUENCE"] for e in envs] == ["1", "2"]
    assert envs[0]["NPA_WORKFLOW_ATTEMPT_ID"] != envs[1]["NPA_WORKFLOW_ATTEMPT_ID"]
    # `npa-workflow render` previews exactly these documents (the engine's own environment aside).
    from npa_workflow.plan.steps import resolve_step
    from npa_workflow.render import launch_document

    run = engine.runs.load("r1")
    previews = [launch_document(resolve_step(run.loaded, "work", run.run_ctx, loops={"refine": i}, state_outputs={}),
                                workflow="t", run_id="r1", loops={"refine": i}, attempt=1, fence_sequence=i,
                                extra_env=dict(engine.job_env))[1] for i in (1, 2)]
    assert previews == engine.executor.documents


def test_a_run_the_inbox_started_runs_its_local_jobs_in_the_specs_workdir(engine, tmp_path, monkeypatch):
    # `serve` works in its specs folder and the inbox freezes no folder: the spec's own workdir is where the
    # job starts (as a SkyPilot task starts in the staged code), not the specs folder itself.
    (tmp_path / "steps").mkdir()
    monkeypatch.chdir(tmp_path)
    spec = ("apiVersion: npa.workflow/v0.0.1\nkind: Workflow\nmetadata: {name: t}\nworkdir: steps\nstates:\n"
            f"  only: {{run: {{argv: [{PY!r}, -c, \"import os; open('cwd.txt', 'w').write(os.getcwd())\"]}}, "
            "terminal: true}\n")
    engine.runs.freeze("r1", spec, "", {}, RunOptions())
    engine.ledger.put_run(RunRecord(run_id="r1", workflow="t"))
    launch(engine, {"run_id": "r1", "state": "only", "token": "t1"})
    [(kind, _, _)] = settle(engine, "t1")
    assert kind == "succeed"
    assert (tmp_path / "steps" / "cwd.txt").read_text() == str((tmp_path / "steps").resolve())


def test_other_states_outputs_are_resolved_once_per_loop_counters(engine, monkeypatch):
    from npa_workflow.engine import visits

    start(engine)
    run = engine.runs.load("r1")
    resolved: list[str] = []
    real = visits.resolve_step
    monkeypatch.setattr(visits, "resolve_step", lambda loaded, name, *a, **k: resolved.append(name)
                        or real(loaded, name, *a, **k))
    first_round = visits.visit_of(run, "gate", {"l1": 1})
    outputs = visits._outputs_now(run, first_round)
    assert outputs["work"] == ["s3://data/out/1.txt"] and "gate" not in outputs  # every other state's
    per_round = len(resolved)
    assert visits._outputs_now(run, visits.visit_of(run, "work", {"l1": 1})) == {
        **{k: v for k, v in outputs.items() if k != "work"}, "gate": ["s3://data/gate.json"]}
    assert len(resolved) == per_round  # the same counters: resolved once
    assert visits._outputs_now(run, visits.visit_of(run, "gate", {"l1": 2}))["work"] == ["s3://data/out/2.txt"]
    assert len(resolved) == 2 * per_round  # new counters: resolved anew
    outputs["work"].append("changed by a caller")
    assert visits._outputs_now(run, first_round)["work"] == ["s3://data/out/1.txt"]  # a copy each time


GENERIC_MAP_CAUSE = "The specified tolerated failure threshold was exceeded"


@pytest.mark.parametrize(("cause", "error", "said", "not_said"), [
    # the twin's cause names the child's own error: a member whose Lambda failed is that failure, not a timeout
    (f"{GENERIC_MAP_CAUSE} (item 7: States.TaskFailed: "
     '{"errorMessage": "payload too large", "errorType": "ValueError"})',
     "Wave.Failed", "a member of group 'work' failed: States.TaskFailed: payload too large", "timed out"),
    (f"{GENERIC_MAP_CAUSE} (item 0: States.Timeout: )", "Wave.TimedOut",
     "a member of group 'work' timed out: it ran past its deadline of 3600 s (States.Timeout)", "Map Run"),
    # AWS's own cause names no member: what is known, never "timed out after 3600 s"
    (GENERIC_MAP_CAUSE, "Wave.TimedOut", "without recording a wave failure", "timed out: it ran past"),
])
def test_a_distributed_map_failure_reports_the_members_real_error(engine, cause, error, said, not_said):
    engine.runs.freeze("rm", SPEC, "", {}, RunOptions())
    engine.ledger.put_run(RunRecord(run_id="rm", workflow="t"))
    result = cleanup(engine, {"run_id": "rm", "state": "work", "deadline": {"timeoutSeconds": 3600},
                              "error": {"Error": "States.ExceedToleratedFailureThreshold", "Cause": cause}})
    assert result["error"] == error
    assert said in result["cause"] and not_said not in result["cause"], result["cause"]
    assert engine.ledger.get_run("rm").error.message == result["cause"]
