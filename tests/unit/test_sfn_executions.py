"""`adapters.sfn_executions.SfnExecutions`: the `Executions` port on Step Functions (moto), with Step Functions'
answers turned into the port's exceptions."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from npa_workflow.adapters.sfn_executions import HISTORY_PAGE, SfnExecutions
from npa_workflow.engine.ports import (
    ExecutionAlreadyExists,
    ExecutionNotFound,
    MachineAlreadyExists,
    NotRedrivable,
)

REGION = "us-east-1"
ROLE = "arn:aws:iam::123456789012:role/sfn"
PASS = json.dumps({"StartAt": "Wait", "States": {"Wait": {"Type": "Wait", "Seconds": 60, "End": True}}})


@pytest.fixture
def sfn() -> Iterator[Any]:
    with mock_aws():
        yield boto3.client("stepfunctions", region_name=REGION)


@pytest.fixture
def machine(sfn: Any) -> str:
    return SfnExecutions(sfn).create_machine("m", PASS, role_arn=ROLE)


def test_a_start_with_the_same_name_and_input_is_the_same_execution_another_input_is_refused(sfn: Any,
                                                                                           machine: str) -> None:
    port = SfnExecutions(sfn)
    arn = port.start(machine, "run-1", '{"a": 1}')
    assert port.start(machine, "run-1", '{"a": 1}') == arn  # AWS: idempotent while it runs
    with pytest.raises(ExecutionAlreadyExists, match="run-1"):
        port.start(machine, "run-1", '{"a": 2}')
    described = port.describe(arn)
    assert (described.name, described.machine_arn, described.status) == ("run-1", machine, "RUNNING")
    assert json.loads(described.input) == {"a": 1}


def test_an_unknown_execution_or_machine_is_the_ports_not_found(sfn: Any, machine: str) -> None:
    port = SfnExecutions(sfn)
    missing = machine.replace(":stateMachine:", ":execution:") + ":nope"
    with pytest.raises(ExecutionNotFound):
        port.describe(missing)
    assert port.stop(missing, "Run.Cancelled", "test") is False
    assert port.definition(machine + "-gone") is None
    assert json.loads(PASS) == port.definition(machine)


def test_stop_then_history_newest_first(sfn: Any, machine: str) -> None:
    port = SfnExecutions(sfn)
    arn = port.start(machine, "run-2", "{}")
    assert port.stop(arn, "Run.Cancelled", "by test") is True
    stopped = port.describe(arn)
    assert stopped.status == "ABORTED"
    # the dates the reap event carries (boto3 parses them; the port keeps them as datetimes)
    assert stopped.start_date is not None and stopped.stop_date is not None
    assert stopped.start_date <= stopped.stop_date
    oldest = [e["id"] for e in port.history(arn)]
    newest = [e["id"] for e in port.history(arn, reverse=True)]
    assert oldest == sorted(oldest) and newest == oldest[::-1]
    assert [e["id"] for e in port.history(arn, reverse=True, limit=1)] == newest[:1]


def test_an_execution_that_cannot_be_redriven_is_not_redrivable(sfn: Any, machine: str) -> None:
    port = SfnExecutions(sfn)
    arn = port.start(machine, "run-3", "{}")  # running: AWS refuses to redrive it (moto has no redrive)
    with pytest.raises(NotRedrivable):
        port.redrive(arn)


def test_a_machine_created_again_is_the_same_machine_and_its_arn_is_derivable(sfn: Any, machine: str) -> None:
    port = SfnExecutions(sfn)
    assert port.create_machine("m", PASS, role_arn=ROLE) == machine  # AWS: idempotent for the same definition
    assert port.machine_arn("m", ROLE) == machine


def test_a_taken_machine_name_is_the_ports_already_exists() -> None:
    """AWS answers StateMachineAlreadyExists for another definition under a taken name (moto does not check)."""
    client = boto3.client("stepfunctions", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(client) as stub:
        stub.add_client_error("create_state_machine", "StateMachineAlreadyExists", "exists with another definition")
        with pytest.raises(MachineAlreadyExists, match="'m'"):
            SfnExecutions(client).create_machine("m", PASS, role_arn=ROLE)


def _event(i: int) -> dict[str, Any]:
    return {"timestamp": datetime(2026, 1, 1, tzinfo=UTC), "type": "PassStateEntered", "id": i}


def test_history_follows_next_token_page_by_page() -> None:
    """AWS returns at most 1,000 events a call and a `nextToken` for the rest (moto returns everything in one
    page, so the pages here are botocore's Stubber answering in the service's own shapes)."""
    client = boto3.client("stepfunctions", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")
    arn = "arn:aws:states:us-east-1:123456789012:execution:m:run"
    with Stubber(client) as stub:
        stub.add_response("get_execution_history", {"events": [_event(3), _event(2)], "nextToken": "t1"},
                          {"executionArn": arn, "maxResults": HISTORY_PAGE, "reverseOrder": True})
        stub.add_response("get_execution_history", {"events": [_event(1)]},
                          {"executionArn": arn, "maxResults": HISTORY_PAGE, "reverseOrder": True, "nextToken": "t1"})
        assert [e["id"] for e in SfnExecutions(client).history(arn, reverse=True)] == [3, 2, 1]
        stub.assert_no_pending_responses()
