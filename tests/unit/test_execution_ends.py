"""`embedded_aws.execution_ends`: moto's interpreter tells the runtime when an execution ends, with its status set."""

from __future__ import annotations

import json
import threading

import pytest

from npa_workflow.embedded_aws.execution_ends import execution_ends

PASS_MACHINE = json.dumps({"StartAt": "p", "States": {"p": {"Type": "Pass", "End": True}}})
FAIL_MACHINE = json.dumps({"StartAt": "f", "States": {"f": {"Type": "Fail", "Error": "Boom", "Cause": "c"}}})


def test_every_end_is_told_after_its_status_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    import boto3
    from moto import mock_aws
    from moto.stepfunctions.parser.backend.execution import BaseExecutionWorkerCommunication

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")
    seam = BaseExecutionWorkerCommunication.__dict__["terminated"]
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        sfn = boto3.client("stepfunctions", region_name="us-east-1")
        role = "arn:aws:iam::123456789012:role/r"
        told: dict[str, str] = {}
        done = threading.Event()

        def ended(arn: str) -> None:  # on the interpreter's thread: the status is already the final one
            told[arn] = sfn.describe_execution(executionArn=arn)["status"]
            if len(told) == 2:
                done.set()

        with execution_ends(ended):
            arns = [sfn.start_execution(stateMachineArn=sfn.create_state_machine(
                name=name, definition=definition, roleArn=role)["stateMachineArn"])["executionArn"]
                for name, definition in (("ok", PASS_MACHINE), ("ko", FAIL_MACHINE))]
            assert done.wait(10.0), f"told of {told}, not of both {arns}"
        assert told == {arns[0]: "SUCCEEDED", arns[1]: "FAILED"}
        assert BaseExecutionWorkerCommunication.__dict__["terminated"] is seam  # undone with the last listener
