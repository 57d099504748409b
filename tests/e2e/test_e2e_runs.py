"""End-to-end local runs through the runtime's Python API: a real moto server, the compiled state machine on
moto's interpreter, the Lambda handlers in-process, every step a real subprocess. Proofs use the timestamps
of the run report."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from e2e_support import (  # noqa: E402
    SPECS,
    job_gone,
    max_overlap,
    only,
    run,
    ts,
    waves_of,
    workspace,
    write_spec,
)

pytestmark = pytest.mark.e2e

BODY = ["prepare", "train", "gate"]


def assert_sequential(waves: list[dict]) -> None:
    for before, after in zip(waves, waves[1:], strict=False):
        assert ts(after["started_at"]) >= ts(before["ended_at"]), (before, after)


@pytest.mark.timeout(90)
def test_gate_loop_exits_on_iteration_1_when_the_gate_promotes(tmp_path: Path) -> None:
    report = run(SPECS / "gate-loop.yaml", tmp_path / "home", variables={"gate_decision": "promote"})
    assert report["status"] == "SUCCEEDED", report["error"]
    assert report["error"] is None
    assert [(w["state"], w["iteration"]) for w in report["waves"]] == [
        ("prepare", 1), ("train", 1), ("gate", 1), ("route", None), ("publish", None)]
    assert all(w["status"] == "SUCCEEDED" and w["attempt"] == 1 and not w["replayed"] for w in report["waves"])
    assert_sequential(report["waves"])
    gate, route = report["decisions"]
    assert (gate["state"], gate["decision"], gate["source"]) == ("gate", "promote_checkpoint", "artifact")
    assert gate["uri"].endswith("/refine/round-1/decision.json")
    assert (route["state"], route["decision"]) == ("route", "promote_checkpoint")
    assert report["execution_arn"].endswith(f":{report['run_id']}")
    assert report["state_transitions"] > len(report["waves"])
    assert report["history_events"] > report["state_transitions"]


@pytest.mark.timeout(120)
def test_gate_loop_runs_the_full_budget_then_escalates_when_the_gate_loops_back(tmp_path: Path) -> None:
    report = run(SPECS / "gate-loop.yaml", tmp_path / "home", variables={"gate_decision": "loop_back"})
    assert report["status"] == "SUCCEEDED", report["error"]
    expected = [(s, i) for i in (1, 2, 3) for s in BODY] + [("route", None), ("escalate", None)]
    assert [(w["state"], w["iteration"]) for w in report["waves"]] == expected
    assert not waves_of(report, "publish")
    # One round after the other: round i+1 starts after round i's gate ended, the router after round 3.
    assert_sequential(report["waves"])
    gates = [d for d in report["decisions"] if d["state"] == "gate"]
    assert [d["decision"] for d in gates] == ["loop_back_to_inner_loop"] * 3
    assert [d["uri"].rsplit("/", 2)[1] for d in gates] == ["round-1", "round-2", "round-3"]
    assert only(report, "escalate")["status"] == "SUCCEEDED"


@pytest.mark.timeout(90)
def test_a_group_never_runs_more_members_than_its_concurrency_and_its_barrier_waits(tmp_path: Path) -> None:
    report = run(SPECS / "fanout.yaml", tmp_path / "home", variables={"shard_sleep": "2"})
    assert report["status"] == "SUCCEEDED", report["error"]
    shards = [w for w in report["waves"] if w["group"] == "shards"]
    assert sorted(w["state"] for w in shards) == ["shard-0", "shard-1", "shard-2"]
    intervals = [(ts(w["started_at"]), ts(w["ended_at"])) for w in shards]
    assert max_overlap(intervals) == 2, intervals  # maxConcurrency: 2, and it is used
    prepare, join = only(report, "prepare"), only(report, "join")
    assert min(s for s, _ in intervals) >= ts(prepare["ended_at"])
    assert ts(join["started_at"]) >= max(e for _, e in intervals)  # the barrier
    assert ts(only(report, "done")["started_at"]) >= ts(join["ended_at"])


@pytest.mark.timeout(90)
def test_a_failing_member_stops_its_group_within_seconds(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    spec = write_spec(ws, "failing", """\
        config:
          bucket: npa-workflow-examples
          prefix: "failing/{{run.id}}"
        initial: group
        states:
          group:
            parallel: [slow, bad]
            maxConcurrency: 2
            next: after
          slow:
            toolRef: examples.util.step
            params: {step_sleep: "120", step_out_uri: "s3://{{config.bucket}}/{{config.prefix}}/slow.json"}
          bad:
            toolRef: examples.util.step
            params:
              step_sleep: "1"
              step_fail: "boom from bad"
              step_out_uri: "s3://{{config.bucket}}/{{config.prefix}}/bad.json"
          after:
            toolRef: examples.util.step
            terminal: true
            params: {step_out_uri: "s3://{{config.bucket}}/{{config.prefix}}/after.json"}
        """)
    home = tmp_path / "home"
    report = run(spec, home)
    finished = time.time()
    assert report["status"] == "FAILED"
    assert report["error"]["state"] == "bad"
    assert "boom from bad" in report["error"]["message"]
    bad, slow = only(report, "bad"), only(report, "slow")
    assert bad["status"] == "FAILED" and slow["status"] == "CANCELLED"
    assert job_gone(home, slow["job_id"]), "the sibling's process outlived the run"
    assert finished - ts(bad["ended_at"]) < 10, "the group was not stopped within seconds"
    assert ts(slow["ended_at"]) - ts(bad["ended_at"]) < 5
    assert not waves_of(report, "after")


@pytest.mark.timeout(90)
def test_a_failed_attempt_is_retried_and_both_attempts_are_recorded(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    spec = write_spec(ws, "flaky", """\
        config:
          bucket: npa-workflow-examples
          prefix: "flaky/{{run.id}}"
        initial: work
        states:
          work:
            toolRef: examples.util.step
            terminal: true
            params:
              step_fail_below_attempt: "2"
              step_out_uri: "s3://{{config.bucket}}/{{config.prefix}}/work.json"
            outputs:
              - uri: "{{config.step_out_uri}}"
        """)
    report = run(spec, tmp_path / "home", retries=1)
    assert report["status"] == "SUCCEEDED", report["error"]
    first, second = waves_of(report, "work")
    assert (first["attempt"], first["status"]) == (1, "FAILED")
    assert (second["attempt"], second["status"]) == (2, "SUCCEEDED")
    assert first["job_id"] != second["job_id"]
    assert ts(second["started_at"]) >= ts(first["ended_at"]) + 0.9  # the 1 s retry interval


@pytest.mark.timeout(90)
def test_max_wait_seconds_cancels_a_hanging_job_and_fails_the_run(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    spec = write_spec(ws, "hang", """\
        config:
          bucket: npa-workflow-examples
          prefix: "hang/{{run.id}}"
        initial: work
        states:
          work:
            toolRef: examples.util.step
            terminal: true
            params: {step_sleep: "300", step_out_uri: "s3://{{config.bucket}}/{{config.prefix}}/work.json"}
        """)
    home = tmp_path / "home"
    report = run(spec, home, max_wait_seconds=3)
    assert report["status"] == "FAILED"
    work = only(report, "work")
    assert work["status"] == "CANCELLED"
    assert job_gone(home, work["job_id"])
    assert ts(work["ended_at"]) - ts(work["started_at"]) < 10
    assert report["error"]["state"] == "work"
    # AWS: a Fail state's error cannot be a `States.*` name (moto then reports "Custom Error Names MUST NOT begin
    # with the prefix 'States.'"): the run's error is the project's, saying which state, which deadline, and how
    # to raise it.
    message = report["error"]["message"]
    assert "timed out" in message and "deadline of 3 s" in message
    assert "timeoutSeconds" in message and "--max-wait-seconds" in message
    assert "Custom Error Names" not in message and "States.Runtime" not in message


@pytest.mark.timeout(90)
def test_a_malformed_decision_fails_the_run_naming_its_uri(tmp_path: Path) -> None:
    report = run(SPECS / "gate-loop.yaml", tmp_path / "home", variables={"gate_malformed": "not-json"})
    assert report["status"] == "FAILED"
    uri = f"s3://npa-workflow-local/gate-loop/{report['run_id']}/refine/round-1/decision.json"
    assert uri in report["error"]["message"]
    assert report["error"]["state"] == "gate"
    assert [(d["state"], d["uri"], d["decision"]) for d in report["decisions"]] == [("gate", uri, None)]
    assert [w["state"] for w in report["waves"]] == BODY  # nothing ran after the broken decision


@pytest.mark.timeout(60)
def test_waves_move_on_at_each_jobs_end_not_at_the_watch_tick(tmp_path: Path) -> None:
    """A no-op job ends before its launch has recorded it (its wrapper was started ahead): the record of its job
    wakes the watch. With a 30 s tick, three waves that each waited for the tick would take 90 s."""
    ws = workspace(tmp_path)
    spec = write_spec(ws, "quick", """\
        initial: a
        states:
          a: {run: {argv: ["true"]}, next: b}
          b: {run: {argv: ["true"]}, next: c}
          c: {run: {argv: ["true"]}, terminal: true}
        """)
    started = time.monotonic()
    report = run(spec, tmp_path / "home", tick_seconds=30.0)
    assert report["status"] == "SUCCEEDED", report.get("error")
    assert [w["state"] for w in report["waves"]] == ["a", "b", "c"]
    assert time.monotonic() - started < 25.0  # no wave waited for a tick


@pytest.mark.timeout(60)
def test_a_wave_is_finished_once_its_job_is_recorded_not_when_its_launch_returns(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The launch records the job's id, then re-checks for a cancel and returns. A job that ended already is
    finished from the record on: here the re-check is made slow (2 s) and the watch completes the wave (its
    token, its ledger attempt) while the launch is still in it. With a 30 s tick, nothing waits for a tick."""
    import threading

    from npa_workflow.ledger import DynamoLedger

    recorded_here = threading.local()
    seen: dict[str, float] = {}
    record, cancel_requested, finish = (DynamoLedger.record_submission, DynamoLedger.cancel_requested,
                                        DynamoLedger.finish_attempt)

    def record_submission(self, *args, **kwargs):
        out = record(self, *args, **kwargs)
        recorded_here.on = True
        return out

    def slow_recheck(self, run_id):
        if getattr(recorded_here, "on", False):  # the launch's re-check after its record
            recorded_here.on = False
            time.sleep(2.0)
            seen.setdefault("launch re-checked", time.monotonic())
        return cancel_requested(self, run_id)

    def finish_attempt(self, *args, **kwargs):
        seen.setdefault("wave finished", time.monotonic())
        return finish(self, *args, **kwargs)

    monkeypatch.setattr(DynamoLedger, "record_submission", record_submission)
    monkeypatch.setattr(DynamoLedger, "cancel_requested", slow_recheck)
    monkeypatch.setattr(DynamoLedger, "finish_attempt", finish_attempt)
    ws = workspace(tmp_path)
    spec = write_spec(ws, "recorded", """\
        initial: a
        states:
          a: {run: {argv: ["true"]}, terminal: true}
        """)
    report = run(spec, tmp_path / "home", tick_seconds=30.0)
    assert report["status"] == "SUCCEEDED", report.get("error")
    assert seen["wave finished"] < seen["launch re-checked"]
