"""Contract test of the in-process Lambda adapter on a real moto server with real boto3 clients.

Proves the Step Functions features the compiled machines rely on (docs/architecture.md, "The flow of one run"):
lambda:invoke, waitForTaskToken with SendTaskSuccess/Failure/Heartbeat, named errors for
Retry/Catch, TimeoutSeconds, bounded inline Map, Choice; and each correction of moto (`embedded_aws.moto_fixes`)
against what AWS documents, with a canary per fix that runs the same probe on plain moto and fails, naming the fix
to remove, once moto answers as AWS does itself.
"""

from __future__ import annotations

import io
import json
import os
import sys
import threading
import time
import uuid
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from npa_workflow.embedded_aws import moto_lambda
from npa_workflow.embedded_aws.moto_lambda import MotoAdapterError, in_process_lambdas
from npa_workflow.embedded_aws.moto_server import MotoServer, start_moto_server

sys.path.insert(0, str(Path(__file__).resolve().parent))
import moto_handlers as handlers  # noqa: E402
from deadlines import deadline as scaled  # noqa: E402

REGION = "us-east-1"
CREDS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing", "region_name": REGION}
TIMINGS: dict[str, float] = {}
LATENCIES: list[float] = []  # start_execution → ended, per execution
RACES: list[str] = []  # SUCCEEDED read before its output was set


class Aws:
    def __init__(self, server: MotoServer) -> None:
        self.server = server
        kw = {"endpoint_url": server.endpoint_url, **CREDS}
        self.sfn = boto3.client("stepfunctions", **kw)
        self.lam = boto3.client("lambda", **kw)
        self.iam = boto3.client("iam", **kw)
        self.role_arn = ""
        self.fn_arns: dict[str, str] = {}

    def new_sfn_client(self) -> Any:
        return boto3.client("stepfunctions", endpoint_url=self.server.endpoint_url, **CREDS)

    def start(self, definition: dict[str, Any], payload: Any) -> str:
        """Create a machine and start a named execution of it; its ARN."""
        started = time.monotonic()
        arn = self.sfn.create_state_machine(
            name=f"m-{uuid.uuid4().hex[:12]}", definition=json.dumps(definition), roleArn=self.role_arn
        )["stateMachineArn"]
        TIMINGS.setdefault("first create_state_machine", time.monotonic() - started)
        return self.sfn.start_execution(
            stateMachineArn=arn, name=f"x-{uuid.uuid4().hex[:12]}", input=json.dumps(payload)
        )["executionArn"]

    def run(self, definition: dict[str, Any], payload: Any, timeout: float = 20.0) -> dict[str, Any]:
        """Create a machine, start a named execution, wait until it has ended (with its output)."""
        t0 = time.monotonic()
        exec_arn = self.start(definition, payload)
        desc = wait_execution(self.sfn, exec_arn, timeout)
        LATENCIES.append(time.monotonic() - t0)
        return desc

    def history(self, exec_arn: str) -> list[dict[str, Any]]:
        return self.sfn.get_execution_history(executionArn=exec_arn)["events"]


def wait_execution(sfn: Any, exec_arn: str, timeout: float) -> dict[str, Any]:
    """Poll describe_execution until the execution has ended.

    moto can report SUCCEEDED before ``output`` is set (reference: 'racy'), so a SUCCEEDED
    description without output is read again; likewise, briefly, a FAILED one without ``error``.
    """
    timeout = scaled(timeout)
    deadline = time.monotonic() + timeout
    failed_since: float | None = None
    while True:
        desc = sfn.describe_execution(executionArn=exec_arn)
        status = desc["status"]
        if status == "SUCCEEDED" and "output" in desc:
            return desc
        if status == "FAILED":
            failed_since = failed_since or time.monotonic()
            if "error" in desc or time.monotonic() - failed_since > 1.0:
                return desc
        elif status not in ("RUNNING", "SUCCEEDED"):
            return desc
        if status == "SUCCEEDED":
            RACES.append(exec_arn)
        if time.monotonic() > deadline:
            raise AssertionError(f"execution {exec_arn} still {status} after {timeout}s")
        time.sleep(0.03)


def output(desc: dict[str, Any]) -> Any:
    assert desc["status"] == "SUCCEEDED", desc
    return json.loads(desc["output"])


def dummy_zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("unused.py", "# the adapter imports the Handler from this process\n")
    return buf.getvalue()


FUNCTIONS = {
    "echo": {"Environment": {"Variables": {"NPA_ADAPTER_TEST_VAR": "from-function-config"}}},
    "store_token": {},
    "flaky_wave": {},
    "custom_boom": {},
    "concurrent_item": {},
    "not_serialisable": {},
    "succeed_own_token": {},
}


@pytest.fixture(scope="module")
def aws() -> Iterator[Aws]:
    os.environ.pop("NPA_ADAPTER_TEST_VAR", None)
    t0 = time.monotonic()
    with start_moto_server() as server, in_process_lambdas():
        TIMINGS["server start"] = time.monotonic() - t0
        a = Aws(server)
        a.role_arn = a.iam.create_role(
            RoleName="npa-local-role",
            AssumeRolePolicyDocument=json.dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [
                        {
                            "Effect": "Allow",
                            "Principal": {"Service": ["lambda.amazonaws.com", "states.amazonaws.com"]},
                            "Action": "sts:AssumeRole",
                        }
                    ],
                }
            ),
        )["Role"]["Arn"]
        code = dummy_zip()
        for name, extra in FUNCTIONS.items():
            a.fn_arns[name] = a.lam.create_function(
                FunctionName=f"npa-{name.replace('_', '-')}",
                Runtime="python3.11",
                Role=a.role_arn,
                Handler=f"{handlers.__name__}.{name}",
                Code={"ZipFile": code},
                Timeout=30,
                **extra,
            )["FunctionArn"]
        yield a
    os.environ.pop("NPA_ADAPTER_TEST_VAR", None)
    print("\nmoto adapter timings (s):", {k: round(v, 3) for k, v in TIMINGS.items()})
    print("execution latencies (s):", sorted(round(v, 3) for v in LATENCIES))
    print("SUCCEEDED-without-output re-reads:", len(RACES))


@pytest.fixture(autouse=True)
def _drain_tokens() -> None:
    """Each test sees only the task tokens its own executions store."""
    while not handlers.tokens.empty():
        handlers.tokens.get_nowait()


def responder(aws: Aws, action: Callable[[Any, str], None]) -> threading.Thread:
    """Background 'watch Lambda': take the next stored token and act on it."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            event = handlers.tokens.get(timeout=15)
            action(aws.new_sfn_client(), event["token"])
        except BaseException as exc:  # surfaced by the test through .errors
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.errors = errors  # type: ignore[attr-defined]
    thread.start()
    return thread


def token_task(fn_arn: str, **extra: Any) -> dict[str, Any]:
    return {
        "Type": "Task",
        "Resource": "arn:aws:states:::lambda:invoke.waitForTaskToken",
        "Parameters": {
            "FunctionName": fn_arn,
            "Payload": {"token.$": "$$.Task.Token", "input.$": "$"},
        },
        **extra,
    }


# --------------------------------------------------------------------------- adapter basics
def test_install_is_idempotent_and_pinned(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> None:
    assert moto_lambda.installed()
    assert moto_lambda.install() is False
    with in_process_lambdas():
        pass
    assert moto_lambda.installed(), "a nested context manager must not uninstall"
    import moto

    monkeypatch.setattr(moto, "__version__", "5.2.4")
    with pytest.raises(MotoAdapterError, match="5.2.5"):
        moto_lambda.install()


def test_the_adapter_counts_a_handler_running_until_it_returns_even_past_its_timeout() -> None:
    """What leaving the adapter waits for (`in_process_lambdas`' drain, before a run's embedded AWS is reset under
    the handlers still calling it): a handler's own thread, which runs on after its invocation timed out."""
    release = threading.Event()

    def slow(event: Any, context: Any) -> str:
        release.wait(30)
        return "done"

    before = moto_lambda.running()  # another test's late handler may still run in this worker
    with pytest.raises(moto_lambda._TimedOut):
        moto_lambda._call_within(0.05, slow, {}, None)
    assert moto_lambda.running() == before + 1, "the late handler still runs"
    assert not moto_lambda.drained(0.2)
    release.set()
    deadline = time.monotonic() + 10
    while moto_lambda.running() > before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert moto_lambda.running() <= before, "a handler that returned is still counted"


def test_direct_invoke_runs_handler_in_process(aws: Aws) -> None:
    resp = aws.lam.invoke(FunctionName="npa-echo", Payload=json.dumps({"a": 1}))
    assert "FunctionError" not in resp
    body = json.loads(resp["Payload"].read())
    assert body["echo"] == {"a": 1}
    assert body["function_name"] == "npa-echo"
    assert body["memory_limit_in_mb"] == 128
    assert body["invoked_function_arn"] == aws.fn_arns["echo"]
    assert body["remaining_ms_positive"] is True
    assert body["env_var"] == "from-function-config"

    resp = aws.lam.invoke(FunctionName="npa-custom-boom", Payload=b"{}")
    assert resp["FunctionError"] == "Handled"
    err = json.loads(resp["Payload"].read())
    assert err["errorType"] == "CustomBoom"
    assert err["errorMessage"] == "boom from handler"
    assert err["stackTrace"] and isinstance(err["stackTrace"], list)

    resp = aws.lam.invoke(FunctionName="npa-not-serialisable", Payload=b"{}")
    assert json.loads(resp["Payload"].read())["errorType"] == "Runtime.MarshalError"


# --------------------------------------------------------------------------- Step Functions
def test_lambda_invoke_and_plain_function_arn(aws: Aws) -> None:
    definition = {
        "StartAt": "Invoke",
        "States": {
            "Invoke": {
                "Type": "Task",
                "Resource": "arn:aws:states:::lambda:invoke",
                "Parameters": {"FunctionName": aws.fn_arns["echo"], "Payload.$": "$"},
                "ResultSelector": {"status.$": "$.StatusCode", "body.$": "$.Payload"},
                "ResultPath": "$.invoked",
                "Next": "Plain",
            },
            "Plain": {
                "Type": "Task",
                "Resource": aws.fn_arns["echo"],
                "InputPath": "$.step",
                "ResultPath": "$.plain",
                "End": True,
            },
        },
    }
    out = output(aws.run(definition, {"step": "train"}))
    assert out["invoked"]["status"] == 200
    assert out["invoked"]["body"]["echo"] == {"step": "train"}
    assert out["invoked"]["body"]["function_name"] == "npa-echo"
    assert out["plain"]["echo"] == "train"


def test_wait_for_task_token_success_with_heartbeats(aws: Aws) -> None:
    # Heartbeats keep a task alive for longer than its HeartbeatSeconds (1 s on an idle machine, scaled: a beat
    # late by a loaded machine's scheduling is not what this test is about).
    heartbeat = max(1, round(scaled(1)))

    def act(sfn: Any, token: str) -> None:
        for _ in range(4):
            time.sleep(0.4 * heartbeat)
            sfn.send_task_heartbeat(taskToken=token)
        sfn.send_task_success(taskToken=token, output=json.dumps({"job_id": "local-1", "ok": True}))

    thread = responder(aws, act)
    definition = {
        "StartAt": "Wave",
        "States": {
            "Wave": token_task(aws.fn_arns["store_token"], HeartbeatSeconds=heartbeat, TimeoutSeconds=30 * heartbeat,
                                ResultPath="$.wave")
            | {"End": True}
        },
    }
    desc = aws.run(definition, {"run": "r1"}, timeout=20.0 * heartbeat)
    thread.join(scaled(5))
    assert not thread.errors  # type: ignore[attr-defined]
    out = output(desc)
    assert out == {"run": "r1", "wave": {"job_id": "local-1", "ok": True}}


def test_wait_for_task_token_failure_error_name_arrives(aws: Aws) -> None:
    def act(sfn: Any, token: str) -> None:
        sfn.send_task_failure(taskToken=token, error="Wave.InfrastructureFailed", cause="preempted")

    thread = responder(aws, act)
    definition = {
        "StartAt": "Wave",
        "States": {
            "Wave": token_task(aws.fn_arns["store_token"], TimeoutSeconds=30)
            | {
                "Catch": [
                    {
                        "ErrorEquals": ["Wave.InfrastructureFailed"],
                        "ResultPath": "$.error",
                        "Next": "Cleanup",
                    }
                ],
                "End": True,
            },
            "Cleanup": {"Type": "Pass", "End": True},
        },
    }
    desc = aws.run(definition, {"run": "r2"})
    thread.join(5)
    assert not thread.errors  # type: ignore[attr-defined]
    out = output(desc)
    print("SendTaskFailure arrives as:", out["error"])
    assert out["error"]["Error"] == "Wave.InfrastructureFailed"
    # moto 5.2.5 drops SendTaskFailure's cause (AWS keeps it): do not depend on it locally.
    assert out["error"].get("Cause") in (None, "", "preempted")


def test_heartbeat_timeout_without_heartbeats(aws: Aws) -> None:
    # moto 5.2.5 reports a missed heartbeat as States.Timeout (TaskTimedOut), and a Catch on
    # States.HeartbeatTimeout alone does not match it; AWS documents that States.Timeout covers
    # heartbeat expiry too, so compiled machines catch States.Timeout.
    definition = {
        "StartAt": "Wave",
        "States": {
            "Wave": token_task(aws.fn_arns["store_token"], HeartbeatSeconds=1, TimeoutSeconds=30)
            | {
                "Catch": [
                    {
                        "ErrorEquals": ["States.HeartbeatTimeout", "States.Timeout"],
                        "ResultPath": "$.error",
                        "Next": "Lost",
                    }
                ],
                "End": True,
            },
            "Lost": {"Type": "Pass", "End": True},
        },
    }
    t0 = time.monotonic()
    desc = aws.run(definition, {})
    assert time.monotonic() - t0 < 10, "the heartbeat, not TimeoutSeconds=30, ended the task"
    assert output(desc)["error"]["Error"] in ("States.HeartbeatTimeout", "States.Timeout")
    assert any(e["type"] == "TaskTimedOut" for e in aws.history(desc["executionArn"]))
    handlers.tokens.get(timeout=1)  # consume the token stored by this run


def test_the_twin_names_a_missed_heartbeat_as_aws_does(aws: Aws) -> None:
    # AWS: a Task whose heartbeat did not come within HeartbeatSeconds fails with States.HeartbeatTimeout (its
    # TaskTimedOut event says so); moto says States.Timeout (above). The twin's fix (embedded_aws.moto_fixes, fix 5)
    # restores AWS's name: a Catch on States.HeartbeatTimeout alone matches it.
    from npa_workflow.embedded_aws.moto_fixes import heartbeat_timeout_name

    definition = {
        "StartAt": "Wave",
        "States": {
            "Wave": token_task(aws.fn_arns["store_token"], HeartbeatSeconds=1, TimeoutSeconds=30)
            | {"Catch": [{"ErrorEquals": ["States.HeartbeatTimeout"], "ResultPath": "$.error", "Next": "Lost"}],
               "End": True},
            "Lost": {"Type": "Pass", "End": True},
        },
    }
    with heartbeat_timeout_name():
        desc = aws.run(definition, {})
    assert desc["status"] == "SUCCEEDED", desc  # caught by the Catch on the heartbeat's own name
    assert output(desc)["error"]["Error"] == "States.HeartbeatTimeout"
    [timed_out] = [e for e in aws.history(desc["executionArn"]) if e["type"] == "TaskTimedOut"]
    assert timed_out["taskTimedOutEventDetails"]["error"] == "States.HeartbeatTimeout"
    handlers.tokens.get(timeout=1)  # consume the token stored by this run


def test_timeout_seconds_is_states_timeout(aws: Aws) -> None:
    definition = {
        "StartAt": "Wave",
        "States": {
            "Wave": token_task(aws.fn_arns["store_token"], TimeoutSeconds=1)
            | {
                "Catch": [{"ErrorEquals": ["States.Timeout"], "ResultPath": "$.error", "Next": "TimedOut"}],
                "End": True,
            },
            "TimedOut": {"Type": "Pass", "End": True},
        },
    }
    t0 = time.monotonic()
    out = output(aws.run(definition, {}))
    assert out["error"]["Error"] == "States.Timeout"
    assert 0.9 < time.monotonic() - t0 < 10
    handlers.tokens.get(timeout=1)


def test_retry_on_named_error_then_success(aws: Aws) -> None:
    key = uuid.uuid4().hex
    definition = {
        "StartAt": "Wave",
        "States": {
            "Wave": {
                "Type": "Task",
                "Resource": "arn:aws:states:::lambda:invoke",
                "Parameters": {"FunctionName": aws.fn_arns["flaky_wave"], "Payload.$": "$"},
                "OutputPath": "$.Payload",
                "Retry": [
                    {"ErrorEquals": ["InfrastructureFailed"], "MaxAttempts": 5},
                    {"ErrorEquals": ["WaveFailed"], "IntervalSeconds": 1, "MaxAttempts": 2, "BackoffRate": 1},
                ],
                "End": True,
            }
        },
    }
    desc = aws.run(definition, {"key": key, "succeed_on_attempt": 2})
    assert output(desc) == {"key": key, "attempt": 2}
    assert handlers.attempts[key] == 2
    failed = [e for e in aws.history(desc["executionArn"]) if e["type"] == "TaskFailed"]
    assert [e["taskFailedEventDetails"]["error"] for e in failed] == ["WaveFailed"]


def test_retry_exhausted_then_catch_on_class_name(aws: Aws) -> None:
    definition = {
        "StartAt": "Boom",
        "States": {
            "Boom": {
                "Type": "Task",
                "Resource": "arn:aws:states:::lambda:invoke",
                "Parameters": {"FunctionName": aws.fn_arns["custom_boom"], "Payload.$": "$"},
                "Retry": [{"ErrorEquals": ["WaveFailed", "Custom.Boom"], "MaxAttempts": 3}],
                "Catch": [{"ErrorEquals": ["CustomBoom"], "ResultPath": "$.error", "Next": "Caught"}],
                "End": True,
            },
            "Caught": {"Type": "Pass", "End": True},
        },
    }
    out = output(aws.run(definition, {"x": 1}))
    assert out["error"]["Error"] == "CustomBoom"
    cause = json.loads(out["error"]["Cause"])
    assert cause["errorType"] == "CustomBoom" and cause["errorMessage"] == "boom from handler"


def test_uncaught_error_fails_execution_with_its_name(aws: Aws) -> None:
    definition = {
        "StartAt": "Wave",
        "States": {
            "Wave": {
                "Type": "Task",
                "Resource": "arn:aws:states:::lambda:invoke",
                "Parameters": {"FunctionName": aws.fn_arns["flaky_wave"], "Payload.$": "$"},
                "End": True,
            }
        },
    }
    desc = aws.run(definition, {"key": uuid.uuid4().hex, "succeed_on_attempt": 99})
    assert desc["status"] == "FAILED"
    assert desc.get("error") == "WaveFailed"


def test_inline_map_max_concurrency_is_respected(aws: Aws) -> None:
    handlers.reset_concurrency()
    definition = {
        "StartAt": "Group",
        "States": {
            "Group": {
                "Type": "Map",
                "ItemsPath": "$.members",
                "MaxConcurrency": 2,
                "ItemSelector": {"item.$": "$$.Map.Item.Value", "sleep": 0.3},
                "ItemProcessor": {
                    "ProcessorConfig": {"Mode": "INLINE"},
                    "StartAt": "Member",
                    "States": {
                        "Member": {
                            "Type": "Task",
                            "Resource": "arn:aws:states:::lambda:invoke",
                            "Parameters": {"FunctionName": aws.fn_arns["concurrent_item"], "Payload.$": "$"},
                            "OutputPath": "$.Payload",
                            "End": True,
                        }
                    },
                },
                "End": True,
            }
        },
    }
    t0 = time.monotonic()
    out = output(aws.run(definition, {"members": ["a", "b", "c", "d"]}))
    elapsed = time.monotonic() - t0
    assert out == [{"item": "a"}, {"item": "b"}, {"item": "c"}, {"item": "d"}]
    assert handlers.peak == 2, f"peak concurrency {handlers.peak}"
    assert elapsed >= 0.55  # two rounds of 0.3 s: the cap really serialised the work


def test_choice_on_a_field(aws: Aws) -> None:
    definition = {
        "StartAt": "Route",
        "States": {
            "Route": {
                "Type": "Choice",
                "Choices": [
                    {"Variable": "$.decision.value", "StringEquals": "retrain", "Next": "Retrain"},
                    {"Variable": "$.decision.score", "NumericGreaterThanEquals": 0.9, "Next": "Ship"},
                ],
                "Default": "Stop",
            },
            "Retrain": {"Type": "Pass", "Result": "retrain", "ResultPath": "$.next", "End": True},
            "Ship": {"Type": "Pass", "Result": "ship", "ResultPath": "$.next", "End": True},
            "Stop": {"Type": "Pass", "Result": "stop", "ResultPath": "$.next", "End": True},
        },
    }
    cases = [
        ({"value": "retrain", "score": 0.1}, "retrain"),
        ({"value": "other", "score": 0.95}, "ship"),
        ({"value": "other", "score": 0.5}, "stop"),
    ]
    for decision, expected in cases:
        assert output(aws.run(definition, {"decision": decision}))["next"] == expected


# --------------------------------------------------------------------------- the twin's corrections of moto
# embedded_aws.moto_fixes, each against what AWS documents, for any ASL (generic machines, not the compiled ones).
# Step Functions error handling: "States.Timeout: A Task state either ran longer than the TimeoutSeconds value,
# or failed to send a heartbeat for a period longer than the HeartbeatSeconds value." "States.HeartbeatTimeout:
# A Task state failed to send a heartbeat for a period longer than the HeartbeatSeconds value."


def _heartbeat_task(aws: Aws, **extra: Any) -> dict[str, Any]:
    return token_task(aws.fn_arns["store_token"], HeartbeatSeconds=1, TimeoutSeconds=30) | extra


def test_a_catch_on_states_timeout_catches_a_missed_heartbeat(aws: Aws) -> None:
    from npa_workflow.embedded_aws.moto_fixes import moto_fixes

    definition = {"StartAt": "Wave", "States": {
        "Wave": _heartbeat_task(aws, Catch=[{"ErrorEquals": ["States.Timeout"], "ResultPath": "$.error",
                                             "Next": "Lost"}], End=True),
        "Lost": {"Type": "Pass", "End": True}}}
    with moto_fixes():
        desc = aws.run(definition, {})
    assert desc["status"] == "SUCCEEDED", desc
    assert output(desc)["error"]["Error"] == "States.HeartbeatTimeout"
    handlers.tokens.get(timeout=1)


def test_a_retry_on_states_timeout_retries_a_missed_heartbeat(aws: Aws) -> None:
    from npa_workflow.embedded_aws.moto_fixes import moto_fixes

    definition = {"StartAt": "Wave", "States": {
        "Wave": _heartbeat_task(aws, Retry=[{"ErrorEquals": ["States.Timeout"], "MaxAttempts": 1,
                                             "IntervalSeconds": 1}],
                                Catch=[{"ErrorEquals": ["States.HeartbeatTimeout"], "ResultPath": "$.error",
                                        "Next": "Lost"}], End=True),
        "Lost": {"Type": "Pass", "End": True}}}
    with moto_fixes():
        desc = aws.run(definition, {}, timeout=30)
    assert desc["status"] == "SUCCEEDED", desc
    timed_out = [e for e in aws.history(desc["executionArn"]) if e["type"] == "TaskTimedOut"]
    assert len(timed_out) == 2  # the first expiry retried (matched by States.Timeout), the second caught


def test_a_catch_on_states_heartbeat_timeout_does_not_catch_a_task_past_its_timeout(aws: Aws) -> None:
    # The specific name covers only the heartbeat: a Task past TimeoutSeconds is States.Timeout alone.
    from npa_workflow.embedded_aws.moto_fixes import moto_fixes

    definition = {"StartAt": "Wave", "States": {
        "Wave": token_task(aws.fn_arns["store_token"], TimeoutSeconds=1,
                           Catch=[{"ErrorEquals": ["States.HeartbeatTimeout"], "Next": "Lost"}], End=True),
        "Lost": {"Type": "Pass", "End": True}}}
    with moto_fixes():
        desc = aws.run(definition, {})
    assert (desc["status"], desc.get("error")) == ("FAILED", "States.Timeout"), desc
    handlers.tokens.get(timeout=1)


# Distributed Map: "ToleratedFailureCount / ToleratedFailurePercentage ... The Map Run fails if the number
# (percentage) of failed items exceeds it"; with neither set the threshold is 0. One item of four fails (25 %).
def _tolerance_machine(**tolerance: Any) -> dict[str, Any]:
    return {"StartAt": "Fan", "States": {"Fan": {
        "Type": "Map", "ItemsPath": "$.items", "End": True, **tolerance,
        "ItemProcessor": {
            "ProcessorConfig": {"Mode": "DISTRIBUTED", "ExecutionType": "STANDARD"},
            "StartAt": "Check",
            "States": {
                "Check": {"Type": "Choice", "Choices": [{"Variable": "$.fail", "BooleanEquals": True,
                                                         "Next": "Boom"}], "Default": "Fine"},
                "Boom": {"Type": "Fail", "Error": "Item.Failed", "Cause": "asked to"},
                "Fine": {"Type": "Pass", "End": True}}}}}}


@pytest.mark.parametrize(("tolerance", "status"), [
    ({}, "FAILED"),  # neither set: nothing is tolerated
    ({"ToleratedFailurePercentage": 50.5}, "SUCCEEDED"),
    ({"ToleratedFailurePercentage": 10.5}, "FAILED"),
    ({"ToleratedFailureCount": 1}, "SUCCEEDED"),
    ({"ToleratedFailureCount": 0}, "FAILED"),
    ({"ToleratedFailureCount": 0, "ToleratedFailurePercentage": 50.5}, "FAILED"),  # the count is exceeded
    ({"ToleratedFailureCount": 1, "ToleratedFailurePercentage": 10.5}, "FAILED"),  # the percentage is exceeded
    ({"ToleratedFailureCount": 1, "ToleratedFailurePercentage": 50.5}, "SUCCEEDED"),
], ids=lambda v: json.dumps(v) if isinstance(v, dict) else v)
def test_a_distributed_map_fails_when_either_tolerance_is_exceeded(aws: Aws, tolerance: dict[str, Any],
                                                                    status: str) -> None:
    from npa_workflow.embedded_aws.moto_fixes import moto_fixes
    from npa_workflow.protocol.errors import STATES_EXCEED_TOLERATED_FAILURE

    items = [{"fail": True}, {"fail": False}, {"fail": False}, {"fail": False}]
    with moto_fixes():
        desc = aws.run(_tolerance_machine(**tolerance), {"items": items}, timeout=30)
    assert desc["status"] == status, desc
    if status == "FAILED":
        assert desc.get("error") == STATES_EXCEED_TOLERATED_FAILURE


def test_a_stopped_execution_is_aborted_with_no_task_timeouts_while_a_group_runs(aws: Aws) -> None:
    # StopExecution: "Stops an execution ... the execution's status is ABORTED". Members waiting on their task
    # tokens end with it; none of them times out.
    from npa_workflow.embedded_aws.moto_fixes import moto_fixes

    definition = {"StartAt": "Group", "States": {"Group": {
        "Type": "Map", "ItemsPath": "$.items", "MaxConcurrency": 2, "End": True,
        "ItemProcessor": {"StartAt": "Member", "States": {
            "Member": token_task(aws.fn_arns["store_token"], HeartbeatSeconds=2, TimeoutSeconds=4) | {"End": True}}},
        "Catch": [{"ErrorEquals": ["States.ALL"], "Next": "Caught"}]},
        "Caught": {"Type": "Pass", "End": True}}}
    with moto_fixes():
        arn = aws.sfn.create_state_machine(name=f"m-{uuid.uuid4().hex[:12]}", definition=json.dumps(definition),
                                           roleArn=aws.role_arn)["stateMachineArn"]
        execution = aws.sfn.start_execution(stateMachineArn=arn, name=f"x-{uuid.uuid4().hex[:12]}",
                                            input=json.dumps({"items": [1, 2]}))["executionArn"]
        for _ in range(2):
            handlers.tokens.get(timeout=15)  # both members are waiting on their tokens
        aws.sfn.stop_execution(executionArn=execution, error="Run.Cancelled", cause="asked to")
        desc = wait_execution(aws.sfn, execution, 15)
        time.sleep(5)  # past the members' timeouts: nothing may time out after the stop either
        history = aws.history(execution)
    types = [e["type"] for e in history]
    assert desc["status"] == "ABORTED", (desc["status"], desc.get("error"), types)
    assert not [e for e in history if e["type"] in ("TaskTimedOut", "MapIterationFailed", "ExecutionFailed")], \
        [e["type"] for e in history]
    assert types.count("ExecutionAborted") == 1


# Task tokens: "Step Functions ... passes a task token" to each Task it starts, and a Retry "re-runs the state": each
# attempt gets its own token. And the callback may come at any time while the Task waits (SendTaskSuccess "reports
# that the task identified by the taskToken completed successfully"), even before the Lambda that was given the
# token has returned.
def _retried_attempt(aws: Aws) -> tuple[str, str | None, bool]:
    """Fail the first attempt's token, succeed the second's: (status, error, the two tokens differ)."""
    definition = {"StartAt": "Wave", "States": {"Wave": token_task(
        aws.fn_arns["store_token"], TimeoutSeconds=20,
        Retry=[{"ErrorEquals": ["Attempt.Failed"], "MaxAttempts": 1, "IntervalSeconds": 1}]) | {"End": True}}}
    execution = aws.start(definition, {})
    first = handlers.tokens.get(timeout=15)["token"]
    aws.sfn.send_task_failure(taskToken=first, error="Attempt.Failed", cause="the first attempt")
    second = handlers.tokens.get(timeout=15)["token"]
    if second != first:
        aws.sfn.send_task_success(taskToken=second, output=json.dumps({"attempt": 2}))
    desc = wait_execution(aws.sfn, execution, 15)
    return desc["status"], desc.get("error"), second != first


def test_each_attempt_of_a_retried_task_gets_its_own_token(aws: Aws) -> None:
    from npa_workflow.embedded_aws.moto_fixes import moto_fixes

    with moto_fixes():
        assert _retried_attempt(aws) == ("SUCCEEDED", None, True)


def _token_completed_before_the_lambda_returned(aws: Aws) -> tuple[str, str | None, float]:
    """A heartbeat Task whose Lambda succeeds its own token before returning: (status, error, seconds taken)."""
    definition = {"StartAt": "Wave", "States": {"Wave": {
        "Type": "Task", "Resource": "arn:aws:states:::lambda:invoke.waitForTaskToken", "HeartbeatSeconds": 1,
        "TimeoutSeconds": 20, "End": True,
        "Parameters": {"FunctionName": aws.fn_arns["succeed_own_token"],
                       "Payload": {"token.$": "$$.Task.Token", "endpoint": aws.server.endpoint_url}}}}}
    t0 = time.monotonic()
    desc = wait_execution(aws.sfn, aws.start(definition, {}), 20)
    return desc["status"], desc.get("error"), time.monotonic() - t0


def test_a_token_completed_while_its_lambda_still_runs_completes_the_task(aws: Aws) -> None:
    from npa_workflow.embedded_aws.moto_fixes import moto_fixes

    with moto_fixes():
        status, error, _ = _token_completed_before_the_lambda_returned(aws)
    assert (status, error) == ("SUCCEEDED", None)


def _inline_member_past_its_timeout(aws: Aws) -> dict[str, Any]:
    """An inline Map whose one member (a token Task nobody answers) runs past TimeoutSeconds; a Catch on
    States.Timeout on the Map."""
    definition = {"StartAt": "Group", "States": {
        "Group": {"Type": "Map", "ItemsPath": "$.items", "End": True,
                  "ItemProcessor": {"StartAt": "Member", "States": {
                      "Member": token_task(aws.fn_arns["store_token"], TimeoutSeconds=1) | {"End": True}}},
                  "Catch": [{"ErrorEquals": ["States.Timeout"], "ResultPath": "$.error", "Next": "TimedOut"}]},
        "TimedOut": {"Type": "Pass", "End": True}}}
    return aws.run(definition, {"items": [1]})


def test_an_inline_map_fails_with_its_members_states_timeout(aws: Aws) -> None:
    # AWS (Map state): the Map fails with the error its failed iteration failed with; here States.Timeout, which
    # the Map's Catch on States.Timeout catches.
    from npa_workflow.embedded_aws.moto_fixes import moto_fixes

    with moto_fixes():
        desc = _inline_member_past_its_timeout(aws)
    assert output(desc)["error"]["Error"] == "States.Timeout"


# --------------------------------------------------------------------------- canaries: moto still needs each fix
# Each runs the probe of a fix's test above on plain moto 5.2.5 (no fix applied) and asserts that moto still answers
# the way that made the fix necessary. When an upgraded moto answers as AWS does, its canary fails, saying which fix
# to remove (the fix's own test above keeps passing either way).


def _remove(observed: Any, moto_answer: Any, now: str, fix: str) -> None:
    assert observed == moto_answer, (
        f"moto now {now} itself: remove fix {fix} (embedded_aws.moto_fixes); the probe saw {observed!r}")


def test_canary_moto_reuses_the_first_attempts_token_on_a_retry(aws: Aws) -> None:
    # moto: the retried attempt gets the first attempt's token, whose callback already holds the failure
    _remove(_retried_attempt(aws), ("FAILED", "Attempt.Failed", False),
            "gives each attempt of a retried Task its own task token",
            "1 (task_token_fixes: a fresh token per attempt)")


def test_canary_moto_ignores_a_token_completed_before_its_lambda_returned(aws: Aws) -> None:
    # moto: the heartbeat wait starts after the Lambda returned and ignores the outcome already there
    status, error, _ = _token_completed_before_the_lambda_returned(aws)
    _remove((status, error), ("FAILED", "States.Timeout"),
            "completes a heartbeat Task whose token succeeded before its Lambda returned",
            "2 (task_token_fixes: CallbackEndpoint.setup_heartbeat_endpoint)")


@pytest.mark.parametrize("tolerance", [
    {}, {"ToleratedFailurePercentage": 10.5}, {"ToleratedFailureCount": 0},
    {"ToleratedFailureCount": 0, "ToleratedFailurePercentage": 50.5},
    {"ToleratedFailureCount": 1, "ToleratedFailurePercentage": 10.5},
], ids=json.dumps)
def test_canary_moto_lets_a_distributed_map_past_its_tolerance_succeed(aws: Aws, tolerance: dict[str, Any]) -> None:
    # the cases where AWS fails the Map (test_a_distributed_map_fails_when_either_tolerance_is_exceeded)
    items = [{"fail": True}, {"fail": False}, {"fail": False}, {"fail": False}]
    desc = aws.run(_tolerance_machine(**tolerance), {"items": items}, timeout=30)
    _remove(desc["status"], "SUCCEEDED", f"fails a Distributed Map whose failures exceed {tolerance or 'no tolerance'}",
            "3 (distributed_map_failures)")


def test_canary_moto_turns_a_map_members_states_timeout_into_states_runtime(aws: Aws) -> None:
    desc = _inline_member_past_its_timeout(aws)
    _remove((desc["status"], desc.get("error"), "Custom Error Names" in (desc.get("cause") or "")),
            ("FAILED", "States.Runtime", True), "fails an inline Map with its member's States.* error",
            "4 (map_iteration_errors)")


def test_canary_moto_names_a_missed_heartbeat_states_timeout(aws: Aws) -> None:
    # (fix 5 also makes a States.Timeout retrier or catcher match States.HeartbeatTimeout: if moto now names the
    # heartbeat itself, keep that part unless test_a_retry_on_states_timeout_retries_a_missed_heartbeat passes
    # without it)
    definition = {"StartAt": "Wave", "States": {
        "Wave": _heartbeat_task(aws, Catch=[{"ErrorEquals": ["States.HeartbeatTimeout"], "Next": "Lost"}], End=True),
        "Lost": {"Type": "Pass", "End": True}}}
    desc = aws.run(definition, {})
    _remove((desc["status"], desc.get("error")), ("FAILED", "States.Timeout"),
            "names a missed heartbeat States.HeartbeatTimeout", "5 (heartbeat_timeout_name)")


def test_canary_moto_fails_a_stopped_execution_when_its_members_time_out(aws: Aws) -> None:
    timeout = 2
    definition = {"StartAt": "Group", "States": {"Group": {
        "Type": "Map", "ItemsPath": "$.items", "End": True,
        "ItemProcessor": {"StartAt": "Member", "States": {
            "Member": token_task(aws.fn_arns["store_token"], TimeoutSeconds=timeout) | {"End": True}}}}}}
    execution = aws.start(definition, {"items": [1, 2]})
    for _ in range(2):
        handlers.tokens.get(timeout=15)  # both members are waiting on their tokens
    aws.sfn.stop_execution(executionArn=execution, error="Run.Cancelled", cause="asked to")
    deadline = time.monotonic() + timeout + 10  # past the members' timeouts, with room for a loaded machine
    while (status := aws.sfn.describe_execution(executionArn=execution)["status"]) != "FAILED":
        if time.monotonic() > deadline:
            break
        time.sleep(0.1)
    timed_out = [e for e in aws.history(execution) if e["type"] == "TaskTimedOut"]
    _remove((status, bool(timed_out)), ("FAILED", True),
            "keeps a stopped execution ABORTED, its waiting members ended with it", "6 (stopped_executions_abort)")
