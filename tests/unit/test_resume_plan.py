"""`resume` on a stack: a FAILED run gets a new execution (a redrive re-enters the `run.failed` Fail state
and fails again at once); redrive only where it continues real work (ABORTED / TIMED_OUT inside a Task).

The DescribeExecution / GetExecutionHistory answers under data/sfn/ are in the shape of the AWS API reference
(moto has no RedriveExecution and no redriveStatus); the StackClient paths run on moto with every API call it
makes recorded through botocore's own event hooks."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import boto3
import pytest
from moto import mock_aws
from test_compile_asl import EXAMPLES

from npa_workflow.adapters.sfn_executions import execution_from_description
from npa_workflow.compile.asl import compile_spec
from npa_workflow.engine.ports import Execution
from npa_workflow.engine.resume_plan import NEW_EXECUTION, REDRIVE, plan_resume
from npa_workflow.ledger import DynamoLedger, ErrorCategory, RunRecord, RunStatus, WaveStatus
from npa_workflow.spec.load import load_spec
from npa_workflow.stack_client import StackClient, StackError

DATA = Path(__file__).resolve().parent / "data" / "sfn"


def recorded(name: str) -> dict:
    return json.loads((DATA / f"{name}.json").read_text())


def described(name: str) -> Execution:
    """A recorded DescribeExecution answer as the `Executions` adapter hands it to the engine."""
    return execution_from_description(recorded(name))


def test_a_failed_run_gets_a_new_execution_even_when_aws_calls_it_redrivable():
    plan = plan_resume(described("describe_failed"))
    assert plan.mode == NEW_EXECUTION and "run.failed" in plan.reason


def test_what_a_redrive_of_a_failed_run_does_on_aws():
    """The recorded history: the redriven execution re-entered `run.failed` and failed within milliseconds."""
    events = recorded("history_redriven_failed")["events"]
    redriven = next(i for i, e in enumerate(events) if e["type"] == "ExecutionRedriven")
    after = events[:redriven]  # reverseOrder: newer events first
    assert [e["type"] for e in reversed(after)] == ["FailStateEntered", "ExecutionFailed"]
    assert after[-1]["stateEnteredEventDetails"]["name"] == "run.failed"


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_caught_failure_of_a_compiled_machine_ends_in_the_run_failed_fail_state(path: Path):
    """Why a redrive cannot help a FAILED run: its unsuccessful step is always the Fail state."""
    states = compile_spec(load_spec(path)).definition["States"]
    for name, state in states.items():
        for catch in state.get("Catch", []):
            target = catch["Next"]
            while states[target]["Type"] != "Fail":
                target = states[target]["Next"]
            assert target == "run.failed", (path.name, name)


def test_an_aborted_run_is_redriven_from_its_interrupted_task():
    assert plan_resume(described("describe_aborted")).mode == REDRIVE


@pytest.mark.parametrize("name", ["describe_history_limit", "describe_timed_out_old"])
def test_what_aws_will_not_redrive_gets_a_new_execution(name: str):
    plan = plan_resume(described(name))
    assert plan.mode == NEW_EXECUTION
    assert "NOT_REDRIVABLE" in plan.reason or "cannot be redriven" in plan.reason


MACHINE = {"StartAt": "run.failed", "States": {"run.failed": {"Type": "Fail", "Error": "Wave.Failed", "Cause": "x"}}}
WAITING = {"StartAt": "wave", "States": {"wave": {"Type": "Wait", "Seconds": 300, "End": True}}}


@pytest.fixture
def stack(monkeypatch):
    dummy = {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x", "AWS_DEFAULT_REGION": "us-east-1"}
    for key, value in dummy.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        boto3.client("s3").create_bucket(Bucket="engine")
        DynamoLedger("ledger").create_table()
        client = StackClient(boto3.session.Session(), bucket="engine", ledger_table="ledger")
        calls: list[str] = []
        client.executions.client.meta.events.register("before-call.sfn.*", lambda model, **_: calls.append(model.name))
        yield client, calls


def started(client: StackClient, definition: dict, run_id: str) -> str:
    sfn = client.executions.client
    arn = sfn.create_state_machine(name=f"m-{run_id}", definition=json.dumps(definition),
                                   roleArn="arn:aws:iam::123456789012:role/sfn")["stateMachineArn"]
    execution = sfn.start_execution(stateMachineArn=arn, name=run_id, input='{"run": {"run_id": "r"}}')
    client.ledger.put_run(RunRecord(run_id=run_id, workflow="t", execution_arn=execution["executionArn"]))
    return execution["executionArn"]


def settled(client: StackClient, arn: str) -> str:
    for _ in range(100):
        status = client.executions.client.describe_execution(executionArn=arn)["status"]
        if status != "RUNNING":
            return status
        time.sleep(0.05)
    raise AssertionError("the execution never ended")


def test_resume_of_a_failed_run_never_redrives_and_starts_a_replaying_execution(stack):
    client, calls = stack
    arn = started(client, MACHINE, "r1")
    assert settled(client, arn) == "FAILED"
    client.ledger.update_run_status("r1", RunStatus.FAILED)
    result = client.resume("r1")
    assert "RedriveExecution" not in calls
    assert result["redriven"] is False and result["execution_name"] == "r1-r2"
    new = client.executions.client.describe_execution(executionArn=result["execution_arn"])
    assert new["input"] == client.executions.client.describe_execution(executionArn=arn)["input"]  # the same run
    assert client.ledger.get_run("r1").execution_arn == result["execution_arn"]


def test_resume_of_an_aborted_run_tries_the_redrive_first(stack):
    client, calls = stack
    arn = started(client, WAITING, "r2")
    client.executions.client.stop_execution(executionArn=arn)
    assert settled(client, arn) == "ABORTED"
    client.ledger.update_run_status("r2", RunStatus.ABORTED)
    result = client.resume("r2")
    assert "RedriveExecution" in calls  # on AWS this continues the stopped Task; moto has none: a new execution
    assert result["redriven"] is False and result["execution_name"] == "r2-r2"



def test_awss_reason_for_refusing_a_redrive_reaches_the_plan_through_the_adapter():
    plan = plan_resume(described("describe_history_limit"))
    assert "exceeded the maximum number of history events" in plan.reason


def test_resume_of_a_run_whose_execution_is_gone_says_so(stack):
    client, _ = stack
    gone = "arn:aws:states:us-east-1:123456789012:execution:m-r3:r3"
    client.ledger.put_run(RunRecord(run_id="r3", workflow="t", execution_arn=gone))
    client.ledger.update_run_status("r3", RunStatus.FAILED)
    with pytest.raises(StackError, match="no longer exists"):
        client.resume("r3")
    assert client.execution_status(client.run("r3")) == "FAILED"  # the ledger's word when the service has none


def reap_when_cancelled(client: StackClient, run_id: str, late_job: str = "") -> threading.Thread:
    """What the stack's reap does once the cancel is recorded (the ledger's side of `engine.cleanup.reap`): ends
    the run's open attempts CANCELLED and the run ABORTED. `late_job`: a launch that raced the request (it read
    no cancel yet) opens an attempt after it, whose job the reap ends as well."""

    def reap() -> None:
        for _ in range(200):
            if client.ledger.cancel_requested(run_id):
                break
            time.sleep(0.02)
        if late_job:
            client.ledger.begin_attempt(run_id, "late", state="late")
            client.ledger.record_submission(run_id, "late", 1, job_id=late_job)
        for w in client.ledger.open_attempts(run_id):
            client.ledger.finish_attempt(run_id, w.wave_key, w.attempt, WaveStatus.CANCELLED, "cancelled",
                                         ErrorCategory.CANCELLED)
        client.ledger.update_run_status(run_id, RunStatus.ABORTED)

    thread = threading.Thread(target=reap, daemon=True)
    thread.start()
    return thread


def test_a_cancel_of_a_resumed_run_reports_only_the_jobs_it_ended(stack):
    client, _ = stack
    started(client, WAITING, "rc")
    client.ledger.begin_attempt("rc", "a", state="a")
    client.ledger.record_submission("rc", "a", 1, job_id="first-job")
    first = reap_when_cancelled(client, "rc")
    assert client.cancel("rc", timeout=10)["cancelled_jobs"] == ["first-job"]
    first.join(5)
    resumed = client.resume("rc")  # a new execution: its launch relaunches `a` and starts `b`
    assert resumed["execution_name"] == "rc-r2"
    for wave in ("a", "b"):
        attempt = client.ledger.begin_attempt("rc", wave, state=wave)
        client.ledger.record_submission("rc", wave, attempt.attempt, job_id=f"{wave}-again")
    second = reap_when_cancelled(client, "rc", late_job="raced-job")
    result = client.cancel("rc", timeout=10)
    second.join(5)
    assert result["cancelled"] is True
    assert sorted(result["cancelled_jobs"]) == ["a-again", "b-again", "raced-job"]  # not the first execution's


def test_a_resume_with_restaged_code_never_redrives_and_repoints_the_frozen_run(stack):
    """`resume --restage` on a deployed stack: an aborted run would be redriven (its execution, whose warm Lambdas
    hold the old options); with new code it is a new execution, the frozen run names the new code, the RUN item
    records the change, and a Lambda's RunStore that cached the run reads the new options for the new execution."""
    from npa_workflow.adapters.s3_store import S3Store
    from npa_workflow.engine.runs import RunOptions, RunStore

    client, calls = stack
    arn = started(client, WAITING, "rs")
    old, new = "a" * 64, "b" * 64
    lambdas = RunStore(S3Store(client.s3), "engine")  # a warm Lambda's store, in another process
    spec = "apiVersion: npa.workflow/v0.0.1\nkind: Workflow\nmetadata: {name: t}\nstates:\n  only: {terminal: true}\n"
    lambdas.freeze("rs", spec, "", {}, RunOptions(code_uri=f"s3://engine/code/{old}/", code_digest=old))
    assert lambdas.load("rs", arn).options.code_digest == old
    client.executions.client.stop_execution(executionArn=arn)
    assert settled(client, arn) == "ABORTED"
    client.ledger.update_run_status("rs", RunStatus.ABORTED)
    unchanged = client.resume("rs", code=(f"s3://engine/code/{old}/", old))  # the same code: a resume as any
    assert "RedriveExecution" in calls and "code" not in unchanged and client.ledger.get_run("rs").code_changes == []
    client.executions.client.stop_execution(executionArn=unchanged["execution_arn"])
    assert settled(client, unchanged["execution_arn"]) == "ABORTED"
    client.ledger.update_run_status("rs", RunStatus.ABORTED)
    calls.clear()
    result = client.resume("rs", code=(f"s3://engine/code/{new}/", new))
    assert "RedriveExecution" not in calls and result["execution_name"] == "rs-r3"
    assert result["code"] == {"from": old, "to": new, "uri": f"s3://engine/code/{new}/"}
    [change] = client.ledger.get_run("rs").code_changes
    assert (change["from"], change["to"]) == (old, new) and change["at"]
    assert lambdas.load("rs", arn).options.code_digest == old  # the old execution's Tasks: what they started with
    assert lambdas.load("rs", result["execution_arn"]).options.code_digest == new  # the new one's: the fix
    assert lambdas.load("rs", result["execution_arn"]).loaded.spec.name == "t"  # the spec stays as frozen
