"""Following a run on a stack (`status --watch`, `submit --wait`) at the cost of one GetItem per refresh while
nothing changed (`stack_client.RunFollower`), and the run item's change counter it polls (`DynamoLedger`).

AWS is moto in this process; every call a client makes is recorded through botocore's own `before-call` event.
A throttled read is AWS's answer as botocore receives it: a `before-call` handler answers the call with
DynamoDB's (or Step Functions') throttling error body and HTTP 400, so botocore raises the ClientError it raises
when AWS throttles and the SDK's retries are spent."""

from __future__ import annotations

import json
import time
from typing import Any

import boto3
import pytest
import test_engine_functions as base
from botocore.awsrequest import AWSResponse
from moto import mock_aws
from rich.console import Console

from npa_workflow.adapters.s3_store import S3Store
from npa_workflow.cli.progress import live_table, print_summary
from npa_workflow.engine.launch import launch
from npa_workflow.engine.runs import RunOptions, RunStore
from npa_workflow.engine.watch import watch_pass
from npa_workflow.ledger import DynamoLedger, RunRecord, RunStatus, WaveStatus
from npa_workflow.stack_client import StackClient

SPEC = """\
apiVersion: npa.workflow/v0.0.1
kind: Workflow
metadata: {name: follow}
initial: a
states:
  a: {run: {shell: a}, next: b}
  b: {run: {shell: b}, terminal: true}
"""


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def stack(monkeypatch):
    dummy = {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x", "AWS_DEFAULT_REGION": "us-east-1"}
    for key, value in dummy.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        boto3.client("s3").create_bucket(Bucket="engine")
        DynamoLedger("ledger").create_table()
        client = StackClient(boto3.session.Session(), bucket="engine", ledger_table="ledger")
        RunStore(S3Store(client.s3), "engine").freeze("r1", SPEC, "", {}, RunOptions())
        client.ledger.put_run(RunRecord(run_id="r1", workflow="follow"))
        client.ledger.begin_attempt("r1", "a", state="a")
        client.ledger.record_submission("r1", "a", 1, job_id="1")
        yield client


def recorder(client: StackClient) -> list[str]:
    calls: list[str] = []
    for sdk in (client.ledger.client, client.s3, client.executions.client):
        sdk.meta.events.register("before-call.*.*", lambda model, **_: calls.append(model.name))
    return calls


def refused(sdk: Any, operation: str, code: str) -> Any:
    """AWS refusing `operation` for rate, as botocore receives it (HTTP 400, the error's code); returns the undo."""
    event = f"before-call.{sdk.meta.service_model.service_id.hyphenize()}.{operation}"

    def answer(model, **_):
        return AWSResponse("https://aws", 400, {}, None), {"Error": {"Code": code, "Message": "Rate exceeded"},
                                                          "ResponseMetadata": {"HTTPStatusCode": 400}}

    sdk.meta.events.register(event, answer, unique_id=event)
    return lambda: sdk.meta.events.unregister(event, unique_id=event)


def test_an_unchanged_run_costs_one_getitem_per_refresh(stack):
    follower = stack.follow("r1")
    first = follower.refresh()
    assert [w["status"] for w in first["waves"]] == ["RUNNING"] and first["status"] == "RUNNING"
    calls = recorder(stack)
    for _ in range(3):
        assert follower.refresh() == first
    assert calls == ["GetItem"] * 3  # no Query of the partition, no S3 GET, no history


def test_a_watch_pass_write_moves_the_run_item_and_the_next_refresh_reads_the_waves(stack):
    follower = stack.follow("r1")
    follower.refresh()
    stack.ledger.mark_status("r1", "a", 1, WaveStatus.RUNNING)
    stack.ledger.finish_attempt("r1", "a", 1, WaveStatus.SUCCEEDED)
    stack.ledger.begin_attempt("r1", "b", state="b")
    calls = recorder(stack)
    assert stack.ledger.note_changes() == 1  # one write for the run, however many of its waves changed
    assert calls == ["UpdateItem"]
    assert stack.ledger.get_run("r1").changes == 1
    calls.clear()
    report = follower.refresh()
    assert calls == ["GetItem", "Query"]
    assert [(w["state"], w["status"]) for w in report["waves"]] == [("a", "SUCCEEDED"), ("b", "RUNNING")]
    assert stack.ledger.note_changes() == 0  # nothing written since: no write


def test_a_status_change_moves_the_counter_in_the_same_write(stack):
    follower = stack.follow("r1")
    follower.refresh()
    calls = recorder(stack)
    stack.ledger.update_run_status("r1", RunStatus.FAILED)
    assert calls == ["UpdateItem"] and stack.ledger.get_run("r1").changes == 1
    calls.clear()
    report = follower.refresh()
    assert report["status"] == "FAILED"
    assert calls[:2] == ["GetItem", "Query"]  # then the history of an ended run (none here: no execution)


def test_what_no_counter_covers_is_read_every_full_every_seconds(stack):
    clock = Clock()
    follower = stack.follow("r1", full_every=30)
    follower.clock = clock
    follower.refresh()
    stack.ledger.begin_attempt("r1", "b", state="b")  # a launch's write: it notes nothing anyone flushes
    stack.ledger._changed_runs.clear()
    calls = recorder(stack)
    clock.now = 29
    assert len(follower.refresh()["waves"]) == 1 and calls == ["GetItem"]
    clock.now = 30
    assert len(follower.refresh()["waves"]) == 2 and calls == ["GetItem", "GetItem", "Query"]


def test_a_throttled_ledger_read_keeps_the_last_view_and_says_so(stack):
    follower = stack.follow("r1")
    first = follower.refresh()
    stack.ledger.update_run_status("r1", RunStatus.RUNNING)  # moves the counter: the next refresh queries
    undo = refused(stack.ledger.client, "Query", "ProvisionedThroughputExceededException")
    report = follower.refresh()
    assert report["waves"] == first["waves"]
    assert "Query was throttled (ProvisionedThroughputExceededException)" in report["throttled"]
    console = Console(width=120, record=True)
    console.print(live_table("run r1", ["a", "b"], report["waves"], "RUNNING", 1.0, 120, report["throttled"]))
    assert "throttled (ProvisionedThroughputExceededException)" in console.export_text()
    undo()
    refused(stack.ledger.client, "GetItem", "ThrottlingException")
    assert "GetItem of the run was throttled (ThrottlingException)" in follower.refresh()["throttled"]


def test_a_throttled_history_read_is_reported_not_shown_as_zero_events(stack):
    sfn = stack.executions.client
    arn = sfn.create_state_machine(name="m", roleArn="arn:aws:iam::123456789012:role/sfn", definition=json.dumps(
        {"StartAt": "p", "States": {"p": {"Type": "Pass", "End": True}}}))["stateMachineArn"]
    execution = sfn.start_execution(stateMachineArn=arn, name="r1")["executionArn"]
    stack.ledger.update_run_status("r1", RunStatus.FAILED, execution_arn=execution)
    refused(sfn, "GetExecutionHistory", "ThrottlingException")
    report = stack.follow("r1").refresh()
    assert report["history_error"] == "GetExecutionHistory was throttled (ThrottlingException) after the SDK's retries"
    console = Console(width=200, record=True)
    print_summary(report, console)
    text = console.export_text()
    assert "history not read: GetExecutionHistory was throttled" in text and "0 history events" not in text


def test_submit_wait_polls_the_run_item_and_describes_the_execution_only_now_and_then(stack):
    sfn = stack.executions.client
    arn = sfn.create_state_machine(name="w", roleArn="arn:aws:iam::123456789012:role/sfn", definition=json.dumps(
        {"StartAt": "w", "States": {"w": {"Type": "Wait", "Seconds": 600, "End": True}}}))["stateMachineArn"]
    execution = sfn.start_execution(stateMachineArn=arn, name="r1")["executionArn"]
    stack.ledger.update_run_status("r1", RunStatus.RUNNING, execution_arn=execution)
    calls = recorder(stack)
    polls = iter(range(100))

    def the_reap_records_the_end(model, **_):  # the 5th read of the run: the stack's reap has recorded the end
        if model.name == "GetItem" and next(polls) == 4:
            stack.ledger.update_run_status("r1", RunStatus.SUCCEEDED)

    stack.ledger.client.meta.events.register("before-call.dynamodb.GetItem", the_reap_records_the_end)
    assert stack.wait("r1", poll=0.01, describe_every=60).status == RunStatus.SUCCEEDED
    reads = [c for c in calls if c != "UpdateItem"]
    assert reads == ["GetItem", "DescribeExecution"] + ["GetItem"] * 4


engine = base.engine  # moto S3 + DynamoDB in-process, real subprocess jobs (test_engine_functions)


def test_a_watch_pass_notes_each_run_whose_waves_it_wrote_once(engine):
    base.start(engine, "a")
    base.start(engine, "quiet")
    engine.store.put("s3://data/out/1.txt", b"ok")
    launch(engine, {"run_id": "a", "state": "work", "loops": {"l1": 1}, "token": "ta"})
    engine.ledger.note_changes()  # what the launch noted (the local runtime shares its ledger with the watch)
    writes: list[str] = []  # the UpdateItems of RUN items, by run

    def run_item_write(params, **_):
        if params["Key"]["sk"]["S"] == "RUN":
            writes.append(params["Key"]["pk"]["S"])

    engine.ledger.client.meta.events.register("before-parameter-build.dynamodb.UpdateItem", run_item_write)
    per_pass = []
    for _ in range(200):  # passes until the job's end completes the token
        before = len(writes)
        watch_pass(engine)
        per_pass.append(writes[before:])
        if engine.callbacks.outcomes("ta"):
            break
        time.sleep(0.1)
    assert engine.callbacks.outcomes("ta")[0][0] == "succeed"
    assert all(w in ([], ["RUN#a"]) for w in per_pass)  # at most one write a pass, and only for the run it changed
    assert per_pass[-1] == ["RUN#a"]  # the pass that ended the wave
    assert engine.ledger.get_run("a").changes == 1 + writes.count("RUN#a")
    assert engine.ledger.get_run("quiet").changes == 0
    watch_pass(engine)
    assert len(writes) == sum(map(len, per_pass))  # a pass that wrote nothing notes nothing
