"""The run ledger on DynamoDB (moto in-process): item shapes, conditional writes, sparse indexes, pagination."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from moto import mock_aws
from moto.dynamodb.models import DynamoDBBackend

from npa_workflow.ledger import (
    AttemptExists,
    DecisionRecord,
    DynamoLedger,
    ErrorCategory,
    LedgerConflict,
    LedgerNotFound,
    RunError,
    RunRecord,
    RunStatus,
    Watermark,
    WaveAttempt,
    WaveStatus,
)
from npa_workflow.ledger.items import RAW_BODY_MAX, deserialize


@pytest.fixture(scope="module")
def aws() -> Iterator[None]:
    """One in-process moto for the module (its first start is the slow part); each test gets its own table.

    DynamoDB applies a conditional write atomically per item; moto in-process checks and writes without a
    lock, so two threads can both pass the check. Its writes are serialized here, as DynamoDB serializes
    them, so the race tests exercise the ledger's logic rather than moto's thread safety.
    """
    env = {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
    }
    lock = threading.Lock()
    with pytest.MonkeyPatch.context() as mp:
        for name, value in env.items():
            mp.setenv(name, value)
        for name in ("AWS_ENDPOINT_URL", "AWS_PROFILE"):
            mp.delenv(name, raising=False)
        for name in ("put_item", "update_item"):
            original = getattr(DynamoDBBackend, name)

            def atomic(self: DynamoDBBackend, *args: object, _original=original, **kwargs: object) -> object:
                with lock:
                    return _original(self, *args, **kwargs)

            mp.setattr(DynamoDBBackend, name, atomic)
        with mock_aws():
            yield


@pytest.fixture
def ledger(aws: None, request: pytest.FixtureRequest) -> DynamoLedger:
    led = DynamoLedger(f"ledger-{request.node.name[:200]}", retention_days=30)
    assert led.create_table() is True
    return led


def run(run_id: str = "r1", **kw: object) -> RunRecord:
    return RunRecord(run_id=run_id, workflow="wf", spec_uri=f"s3://b/runs/{run_id}/spec.yaml", **kw)


def raw_item(led: DynamoLedger, pk: str, sk: str) -> dict:
    return deserialize(led.client.get_item(TableName=led.table_name, Key={"pk": {"S": pk}, "sk": {"S": sk}})["Item"])


# ------------------------------------------------------------------------------------------ table


def test_create_table_is_idempotent_and_has_indexes_and_ttl(ledger: DynamoLedger) -> None:
    assert ledger.create_table() is False
    desc = ledger.client.describe_table(TableName=ledger.table_name)["Table"]
    assert {k["AttributeName"]: k["KeyType"] for k in desc["KeySchema"]} == {"pk": "HASH", "sk": "RANGE"}
    assert {g["IndexName"] for g in desc["GlobalSecondaryIndexes"]} == {"active", "runs"}
    assert desc["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
    ttl = ledger.client.describe_time_to_live(TableName=ledger.table_name)["TimeToLiveDescription"]
    assert ttl["AttributeName"] == "expires_at"


def test_client_is_lazy_and_honours_endpoint_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:5999")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    led = DynamoLedger("t")
    assert led._client is None
    assert led.client.meta.endpoint_url == "http://127.0.0.1:5999"
    assert "token" not in repr(led).lower()


# ------------------------------------------------------------------------------------------ runs


def test_run_put_get_is_create_only(ledger: DynamoLedger) -> None:
    record = run(options={"max_parallel": 4, "ratio": 0.5, "tags": ["a"]}, execution_arn="arn:1")
    assert ledger.put_run(record) is True
    assert ledger.put_run(run(execution_arn="arn:other")) is False
    got = ledger.get_run("r1")
    assert got is not None
    assert got.model_dump(exclude={"expires_at"}) == record.model_dump(exclude={"expires_at"})
    assert got.options == {"max_parallel": 4, "ratio": 0.5, "tags": ["a"]}
    assert got.execution_arn == "arn:1"
    assert got.expires_at is None  # a RUNNING run never expires: its TTL is set when it ends
    assert ledger.update_run_status("r1", "FAILED").expires_at > time.time() + 29 * 86400
    assert ledger.update_run_status("r1", "RUNNING").expires_at is None  # resumed: running again
    assert ledger.get_run("nope") is None
    item = raw_item(ledger, "RUN#r1", "RUN")
    assert item["runs_pk"] == "RUNS" and item["kind"] == "RUN"
    assert got.started_at.endswith("Z")


def test_update_run_status_terminal_then_resumed(ledger: DynamoLedger) -> None:
    ledger.put_run(run())
    failed = ledger.update_run_status("r1", RunStatus.FAILED, RunError(state="train", message="boom"))
    assert failed.status is RunStatus.FAILED
    assert failed.ended_at and failed.ended_at.endswith("Z")
    assert failed.error == RunError(state="train", message="boom")
    resumed = ledger.update_run_status("r1", "RUNNING", execution_arn="arn:2")
    assert resumed.status is RunStatus.RUNNING and resumed.ended_at is None and resumed.error is None
    assert resumed.execution_arn == "arn:2"
    assert ledger.get_run("r1") == resumed
    with pytest.raises(LedgerNotFound):
        ledger.update_run_status("ghost", RunStatus.ABORTED)
    with pytest.raises(ValueError):
        ledger.update_run_status("r1", "DONE")


def test_list_runs_newest_first_paginated(ledger: DynamoLedger) -> None:
    ledger.page_size = 2
    for i in range(5):
        ledger.put_run(run(f"r{i}", started_at=f"2025-01-0{i + 1}T00:00:00Z"))
    ledger.begin_attempt("r0", "w", state="s")  # not a run: never listed
    assert [r.run_id for r in ledger.list_runs()] == ["r4", "r3", "r2", "r1", "r0"]
    assert [r.run_id for r in ledger.list_runs(limit=3)] == ["r4", "r3", "r2"]


# ------------------------------------------------------------------------------------------ waves


def test_begin_attempt_numbers_attempts_and_locks(ledger: DynamoLedger) -> None:
    first = ledger.begin_attempt("r1", "train|l1=2", state="train", group="g", iteration=2, job_name="j")
    assert first.attempt == 1 and first.status is WaveStatus.PENDING
    assert first.timeline[0].status == "PENDING"
    second = ledger.begin_attempt("r1", "train|l1=2", state="train")
    assert second.attempt == 2
    with pytest.raises(AttemptExists) as info:
        ledger.begin_attempt("r1", "train|l1=2", state="train", attempt=1)
    assert isinstance(info.value, LedgerConflict)
    assert info.value.existing.model_dump() == ledger.get_attempt("r1", "train|l1=2", 1).model_dump()
    assert info.value.existing.job_name == "j"
    assert ledger.latest_attempt("r1", "train|l1=2").attempt == 2
    assert ledger.latest_attempt("r1", "other") is None
    assert ledger.get_attempt("r1", "train|l1=2", 9) is None
    item = raw_item(ledger, "RUN#r1", "WAVE#train|l1=2#A001")
    assert item["active_pk"] == "ACTIVE" and item["active_sk"] == "r1#train|l1=2#A001"
    assert item["iteration"] == 2 and item["group"] == "g"
    with pytest.raises(ValueError):
        ledger.begin_attempt("r1", "x", state="x", attempt=1000)


def test_begin_attempt_race_exactly_one_wins(ledger: DynamoLedger) -> None:
    def race(wave_key: str) -> tuple[list[WaveAttempt], list[AttemptExists]]:
        barrier = threading.Barrier(2)
        wins: list[WaveAttempt] = []
        losses: list[AttemptExists] = []

        def launch(name: str) -> None:
            barrier.wait()
            try:
                wins.append(ledger.begin_attempt("r1", wave_key, state="s", attempt=1, job_name=name))
            except AttemptExists as exc:
                losses.append(exc)

        threads = [threading.Thread(target=launch, args=(n,)) for n in ("a", "b")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return wins, losses

    for round_ in range(10):
        wins, losses = race(f"race{round_}")
        assert len(wins) == 1 and len(losses) == 1
        assert losses[0].existing.job_name == wins[0].job_name
        assert len(ledger.attempts("r1", f"race{round_}")) == 1


def test_prefix_wave_keys_and_hash_in_names_do_not_collide(ledger: DynamoLedger) -> None:
    ledger.begin_attempt("r1", "train", state="train")
    ledger.begin_attempt("r1", "train2", state="train2")
    ledger.begin_attempt("r1", "a#A001", state="a#")
    ledger.begin_attempt("r1", "a", state="a")
    assert [a.wave_key for a in ledger.attempts("r1", "train")] == ["train"]
    assert [a.wave_key for a in ledger.attempts("r1", "a")] == ["a"]
    assert ledger.latest_attempt("r1", "a#A001").state == "a#"
    assert ledger.latest_attempt("r1", "a").attempt == 1


def test_submission_token_timeline_and_status(ledger: DynamoLedger) -> None:
    ledger.begin_attempt("r1", "w", state="s", task_token="tok-1")
    sub = ledger.record_submission("r1", "w", 1, request_id="req-1")
    assert sub.status is WaveStatus.LAUNCHING and sub.request_id == "req-1" and sub.submitted_at
    sub = ledger.record_submission("r1", "w", 1, job_id="42", job_name="r1-01-s")
    assert (sub.job_id, sub.request_id, sub.job_name) == ("42", "req-1", "r1-01-s")
    with pytest.raises(LedgerConflict) as info:  # a second job for the same attempt is refused
        ledger.record_submission("r1", "w", 1, job_id="43")
    assert info.value.current.job_id == "42"
    assert ledger.get_attempt("r1", "w", 1).job_id == "42"

    assert ledger.mark_status("r1", "w", 1, WaveStatus.RUNNING, note="sky RUNNING") is True
    assert ledger.mark_status("r1", "w", 1, WaveStatus.RUNNING) is False  # no change, no timeline spam
    running = ledger.get_attempt("r1", "w", 1)
    assert running.started_at and running.status is WaveStatus.RUNNING

    updated = ledger.set_token("r1", "w", 1, "tok-2")
    assert updated.task_token == "tok-2"
    assert "tok-2" not in repr(updated) and "tok-2" not in str(updated)

    ledger.append_timeline("r1", "w", 1, "task:trainer", note="RUNNING", at="2025-01-01T00:00:00Z")
    timeline = ledger.get_attempt("r1", "w", 1).timeline
    assert [e.status for e in timeline] == ["PENDING", "LAUNCHING", "LAUNCHING", "RUNNING", "task:trainer"]
    assert timeline[-1].at == "2025-01-01T00:00:00Z" and timeline[-1].note == "RUNNING"

    for call in (
        lambda: ledger.record_submission("r1", "ghost", 1, job_id="1"),
        lambda: ledger.set_token("r1", "ghost", 1, "t"),
        lambda: ledger.mark_status("r1", "ghost", 1, "RUNNING"),
        lambda: ledger.finish_attempt("r1", "ghost", 1, "FAILED"),
        lambda: ledger.append_timeline("r1", "ghost", 1, "x"),
    ):
        with pytest.raises(LedgerNotFound):
            call()
    with pytest.raises(ValueError):
        ledger.mark_status("r1", "w", 1, WaveStatus.SUCCEEDED)
    with pytest.raises(ValueError):
        ledger.finish_attempt("r1", "w", 1, WaveStatus.RUNNING)


def test_finish_is_idempotent_first_finish_wins(ledger: DynamoLedger) -> None:
    ledger.begin_attempt("r1", "w", state="s")
    ledger.record_submission("r1", "w", 1, job_id="7")
    assert (
        ledger.finish_attempt("r1", "w", 1, WaveStatus.FAILED, error="exit 3", error_category=ErrorCategory.WORKLOAD)
        is True
    )
    assert (
        ledger.finish_attempt("r1", "w", 1, WaveStatus.CANCELLED, error="reaped", error_category="cancelled") is False
    )
    assert ledger.finish_attempt("r1", "w", 1, WaveStatus.SUCCEEDED) is False
    assert ledger.mark_status("r1", "w", 1, WaveStatus.RUNNING) is False
    done = ledger.get_attempt("r1", "w", 1)
    assert done.status is WaveStatus.FAILED and done.error == "exit 3"
    assert done.error_category is ErrorCategory.WORKLOAD and done.ended_at
    assert [e.status for e in done.timeline] == ["PENDING", "LAUNCHING", "FAILED"]
    item = raw_item(ledger, "RUN#r1", "WAVE#w#A001")
    assert "active_pk" not in item and "active_sk" not in item


def test_only_a_success_is_revoked_once_keeping_the_jobs_times(ledger: DynamoLedger) -> None:
    ledger.begin_attempt("r1", "w", state="s")
    ledger.record_submission("r1", "w", 1, job_id="7")
    ledger.finish_attempt("r1", "w", 1, WaveStatus.SUCCEEDED, ended_at="2026-01-01T00:00:00.000Z")
    assert ledger.revoke_success("r1", "w", 1, "decision unreadable", ErrorCategory.WORKLOAD) is True
    assert ledger.revoke_success("r1", "w", 1, "again", ErrorCategory.CONFIGURATION) is False
    revoked = ledger.get_attempt("r1", "w", 1)
    assert (revoked.status, revoked.error, revoked.error_category) == (
        WaveStatus.FAILED, "decision unreadable", ErrorCategory.WORKLOAD)
    assert revoked.ended_at == "2026-01-01T00:00:00.000Z" and revoked.job_id == "7"
    assert revoked.timeline[-1].status == "FAILED" and "decision unreadable" in revoked.timeline[-1].note
    assert ledger.active_waves() == []
    ledger.begin_attempt("r1", "live", state="s")  # running or failed: not a success, nothing to revoke
    assert ledger.revoke_success("r1", "live", 1, "x", ErrorCategory.WORKLOAD) is False
    assert ledger.get_attempt("r1", "live", 1).status is WaveStatus.PENDING
    with pytest.raises(LedgerNotFound):
        ledger.revoke_success("r1", "nope", 1, "x", ErrorCategory.WORKLOAD)


def test_submission_after_finish_keeps_job_id_and_raises(ledger: DynamoLedger) -> None:
    ledger.begin_attempt("r1", "w", state="s")
    ledger.finish_attempt("r1", "w", 1, "CANCELLED", error_category="cancelled")
    with pytest.raises(LedgerConflict) as info:
        ledger.record_submission("r1", "w", 1, job_id="99")
    assert info.value.current.job_id == "99" and info.value.current.status is WaveStatus.CANCELLED


def test_finish_with_outputs_and_replayed_attempt(ledger: DynamoLedger) -> None:
    ledger.begin_attempt("r1", "w", state="s")
    assert ledger.finish_attempt("r1", "w", 1, "SUCCEEDED", outputs=["s3://b/o/model.pt"])
    assert ledger.get_attempt("r1", "w", 1).outputs == ["s3://b/o/model.pt"]
    replay = ledger.begin_attempt("r1", "w", state="s", replayed=True, status=WaveStatus.SUCCEEDED)
    assert replay.attempt == 2 and replay.replayed and replay.ended_at
    assert ledger.active_waves() == []


def test_active_waves_across_runs_and_shrinks(ledger: DynamoLedger) -> None:
    ledger.page_size = 1
    for run_id in ("r1", "r2"):
        ledger.put_run(run(run_id))
        ledger.begin_attempt(run_id, "a", state="a", task_token=f"tok-{run_id}")
        ledger.begin_attempt(run_id, "b", state="b")
    ledger.begin_attempt("r2", "c", state="c", replayed=True, status="SUCCEEDED")
    active = ledger.active_waves()
    assert sorted((w.run_id, w.wave_key) for w in active) == [("r1", "a"), ("r1", "b"), ("r2", "a"), ("r2", "b")]
    assert all(isinstance(w, WaveAttempt) for w in active)
    assert {w.task_token for w in active if w.wave_key == "a"} == {"tok-r1", "tok-r2"}
    assert len(ledger.active_waves(limit=3)) == 3

    ledger.finish_attempt("r1", "a", 1, "SUCCEEDED")
    assert ledger.mark_status("r2", "b", 1, WaveStatus.UNKNOWN)  # unknown stays active: never relaunched
    active = ledger.active_waves()
    assert sorted((w.run_id, w.wave_key) for w in active) == [("r1", "b"), ("r2", "a"), ("r2", "b")]
    assert ledger.active_watches() == []  # triggers live under another partition of the index


def test_the_watch_reads_active_waves_without_their_timelines(ledger: DynamoLedger) -> None:
    """The watch pass's Query projects WATCH_FIELDS: everything tending a wave needs, nothing that grows (the
    timeline gets an entry per scheduler event)."""
    from npa_workflow.engine.watch import WATCH_FIELDS

    ledger.begin_attempt("r1", "w", state="s", job_name="j", task_token="tok", outputs=["s3://b/o.txt"])
    ledger.record_submission("r1", "w", 1, job_id="7", request_id="req")
    for i in range(5):
        ledger.append_timeline("r1", "w", 1, "RUNNING", note=f"event {i}")
    [full] = ledger.active_waves()
    [watched] = ledger.active_waves(fields=WATCH_FIELDS)
    assert len(full.timeline) >= 5 and watched.timeline == []
    assert watched.model_dump(include=set(WATCH_FIELDS)) == full.model_dump(include=set(WATCH_FIELDS))
    assert (watched.job_id, watched.request_id, watched.outputs) == ("7", "req", ["s3://b/o.txt"])


def test_attempts_paginated_over_many_items(ledger: DynamoLedger) -> None:
    ledger.page_size = 7
    for i in range(30):
        ledger.begin_attempt("r1", f"w{i:02d}", state="s")
    ledger.begin_attempt("r1", "w00", state="s")
    ledger.record_decision("r1", "s", uri="s3://b/d.json", decision="x")
    ledger.begin_attempt("r2", "w00", state="s")
    waves = ledger.attempts("r1")
    assert len(waves) == 31
    assert [(w.wave_key, w.attempt) for w in waves[:3]] == [("w00", 1), ("w00", 2), ("w01", 1)]
    assert len(ledger.active_waves()) == 32


def test_state_attempts_are_the_keys_and_statuses_of_that_states_attempts_only(ledger: DynamoLedger) -> None:
    # What a launch decides on in one read: its wave's latest attempt, and the fence sequence (all of the state).
    for round_ in (1, 2):
        ledger.begin_attempt("r1", f"train|l1={round_}", state="train", job_name=f"j{round_}", task_token="tok")
    ledger.finish_attempt("r1", "train|l1=1", 1, "SUCCEEDED")
    ledger.begin_attempt("r1", "train|l1=2", state="train", attempt=2, job_name="j2b")
    ledger.begin_attempt("r1", "train2", state="train2")
    ledger.begin_attempt("r1", "train|x", state="train|x")
    ledger.begin_attempt("r2", "train", state="train")
    attempts = ledger.state_attempts("r1", "train")
    assert sorted((a.wave_key, a.attempt, a.status.value) for a in attempts) == [
        ("train|l1=1", 1, "SUCCEEDED"), ("train|l1=2", 1, "PENDING"), ("train|l1=2", 2, "PENDING")]
    assert len(attempts) == ledger.state_attempt_count("r1", "train")
    assert all(a.job_name is None and a.task_token is None for a in attempts)  # keys and statuses only
    assert [a.wave_key for a in ledger.state_attempts("r1", "train2")] == ["train2"]
    assert [a.wave_key for a in ledger.state_attempts("r1", "train|x")] == ["train|x"]
    assert ledger.state_attempts("r1", "absent") == []


def test_state_attempt_count_reads_only_that_states_attempts(ledger: DynamoLedger) -> None:
    # The fence sequence of a launch: every attempt of its state (loop rounds, retries), none of another state,
    # even one whose name begins with it (`train2`) or holds the key separator (`train|x`).
    for round_ in (1, 2):
        ledger.begin_attempt("r1", f"train|l1={round_}", state="train")
    ledger.begin_attempt("r1", "train|l1=2", state="train", attempt=2)
    ledger.begin_attempt("r1", "train2", state="train2")
    ledger.begin_attempt("r1", "train|x", state="train|x")
    ledger.begin_attempt("r2", "train", state="train")
    seen: list[dict] = []
    original = ledger.client.query

    def recording(**kw: object) -> dict:
        seen.append(kw)
        return original(**kw)

    ledger.client.query = recording  # type: ignore[method-assign]
    try:
        assert ledger.state_attempt_count("r1", "train") == 3
        assert ledger.state_attempt_count("r1", "train2") == 1
        assert ledger.state_attempt_count("r1", "train|x") == 1
        assert ledger.state_attempt_count("r1", "absent") == 0
    finally:
        ledger.client.query = original  # type: ignore[method-assign]
    assert all(kw["Select"] == "COUNT" for kw in seen)  # counted by the service: no item comes back


def test_pagination_over_one_megabyte(ledger: DynamoLedger) -> None:
    """DynamoDB pages at 1 MB even without a Limit: 15 items of ~100 KB need more than one page."""
    calls = 0
    original = ledger.client.query

    def counting(**kw: object) -> dict:
        nonlocal calls
        calls += 1
        return original(**kw)

    big = ["s3://b/" + "x" * 1000] * 100
    for i in range(15):
        ledger.begin_attempt("r1", f"w{i:02d}", state="s", outputs=big)
    ledger.client.query = counting
    try:
        waves = ledger.attempts("r1")
    finally:
        ledger.client.query = original
    assert len(waves) == 15 and calls >= 2


# ------------------------------------------------------------------------------------------ decisions


def test_decisions_round_trip_with_seq_and_truncation(ledger: DynamoLedger) -> None:
    body = '{"decision": "promote"}' + " " * 5000
    first = ledger.record_decision(
        "r1", "refine", "l1=1", uri="s3://b/r1/decision.json", raw=body, decision="promote_checkpoint"
    )
    assert first.seq == 1 and len(first.raw) == RAW_BODY_MAX
    again = ledger.record_decision("r1", "refine", "l1=1", uri="s3://b/r1/decision.json", raw="{}", error="no field")
    assert again.seq == 2
    ledger.record_decision(
        "r1",
        "refine",
        "l1=2",
        uri="s3://b/r1/d2.json",
        decision="loop_back_to_inner_loop",
        source="assume_decision_fallback",
    )
    ledger.record_decision("r1", "gate", uri="s3://b/g.json", decision="promote_checkpoint")
    ledger.record_decision("r1", "refine2", uri="s3://b/x.json", decision="x")
    got = ledger.decisions("r1", "refine")
    assert [(d.loops_key, d.seq) for d in got] == [("l1=1", 1), ("l1=1", 2), ("l1=2", 1)]
    assert got[0].model_dump(exclude={"expires_at"}) == first.model_dump(exclude={"expires_at"})
    assert got[1].error == "no field" and got[2].source == "assume_decision_fallback"
    assert got[0].read_at.endswith("Z")
    assert len(ledger.decisions("r1")) == 5
    assert all(isinstance(d, DecisionRecord) for d in ledger.decisions("r1"))
    assert ledger.decisions("other") == []
    assert raw_item(ledger, "RUN#r1", "DECISION#refine#l1=1#0001")["kind"] == "DECISION"


def test_concurrent_decision_reads_get_distinct_seqs(ledger: DynamoLedger) -> None:
    threads = [
        threading.Thread(target=ledger.record_decision, args=("r1", "d"), kwargs={"uri": f"s3://b/{i}"})
        for i in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(d.seq for d in ledger.decisions("r1", "d")) == [1, 2, 3, 4]


# ------------------------------------------------------------------------------------------ watermarks


def test_watermark_round_trip_waiting_then_satisfied_once(ledger: DynamoLedger) -> None:
    keys = [f"in/{i}.json" for i in range(8)]
    waiting = Watermark(
        run_id="r1",
        state="wait_data",
        loops_key="l1=1",
        uri="s3://b/in/",
        objects=1,
        min_objects=3,
        polls=1,
        sample=keys,
        task_token="tok-w",
    )
    assert len(waiting.sample) == 5 and "tok-w" not in repr(waiting)
    assert ledger.put_watermark(waiting) is True
    got = ledger.watermark("r1", "wait_data", "l1=1")
    assert got.model_dump(exclude={"expires_at"}) == waiting.model_dump(exclude={"expires_at"})
    assert ledger.watermark("r1", "wait_data") is None
    watches = ledger.active_watches()
    assert [(w.run_id, w.state, w.task_token) for w in watches] == [("r1", "wait_data", "tok-w")]
    assert ledger.active_waves() == []  # waves and triggers never mix

    seen = waiting.model_copy(update={"objects": 3, "polls": 2, "satisfied": True})
    assert ledger.put_watermark(seen) is True  # the first to see it satisfied completes the token
    assert ledger.put_watermark(seen) is False  # the racing S3 event / watch tick does not
    assert ledger.put_watermark(waiting) is False  # and nothing un-satisfies it
    final = ledger.watermark("r1", "wait_data", "l1=1")
    assert final.satisfied and final.objects == 3 and final.polls == 2
    assert ledger.active_watches() == []
    item = raw_item(ledger, "RUN#r1", "WATERMARK#wait_data#l1=1")
    assert "active_pk" not in item


def test_watermark_without_token_is_not_watched(ledger: DynamoLedger) -> None:
    ledger.put_watermark(Watermark(run_id="r1", state="t", uri="s3://b/p/", polls=3))
    ledger.put_watermark(Watermark(run_id="r2", state="t", uri="s3://b/p/", task_token="x"))
    assert [w.run_id for w in ledger.active_watches()] == ["r2"]


def test_what_something_still_waits_on_never_expires(ledger: DynamoLedger) -> None:
    """DynamoDB TTL deletes silently, and a wave may wait up to a year (its deadline) while the ledger keeps 30
    days: an active attempt or a waiting watermark carries no TTL; it gets one when it ends."""
    ledger.put_run(run())
    ledger.begin_attempt("r1", "train", state="train", attempt=1, task_token="t")
    assert ledger.get_attempt("r1", "train", 1).expires_at is None
    ledger.finish_attempt("r1", "train", 1, "SUCCEEDED")
    assert ledger.get_attempt("r1", "train", 1).expires_at > time.time() + 29 * 86400
    waiting = Watermark(run_id="r1", state="w", uri="s3://b/p/", task_token="tok")
    ledger.put_watermark(waiting)
    assert ledger.watermark("r1", "w").expires_at is None
    ledger.put_watermark(waiting.model_copy(update={"satisfied": True, "objects": 1}))
    assert ledger.watermark("r1", "w").expires_at > time.time() + 29 * 86400


def test_the_ledger_port_has_every_method_the_engine_calls_as_the_store_defines_it() -> None:
    """engine/ports.py's `Ledger` is the engine's whole view of the ledger: every `ledger.X(` the engine and the
    CLI call is in it, and `DynamoLedger` implements each with the same parameters (and optional ones of its own)."""
    import inspect
    import re
    from pathlib import Path

    from npa_workflow.engine.ports import Ledger
    from npa_workflow.ledger import DynamoLedger

    package = Path(inspect.getfile(Ledger)).parents[1]
    called = {m for folder in ("engine", "cli") for path in (package / folder).glob("*.py")
              for m in re.findall(r"ledger\.([a-z_]+)\(", path.read_text())}
    port = {name for name, _ in inspect.getmembers(Ledger, inspect.isfunction) if not name.startswith("_")}
    assert called and called <= port, sorted(called - port)
    for name in port:
        wanted = list(inspect.signature(getattr(Ledger, name)).parameters)
        given = inspect.signature(getattr(DynamoLedger, name)).parameters
        # the store's own extras (options of other callers) come after, each with a default
        assert list(given)[:len(wanted)] == wanted, name
        assert all(p.default is not p.empty for p in list(given.values())[len(wanted):]), name

