"""`SfnExecutions`: the engine's `Executions` port over boto3 Step Functions (AWS, or moto for the local twin).

Step Functions' answers the engine branches on become the port's exceptions (`engine.ports`), so no botocore
error reaches the engine. AWS facts this relies on:

- StartExecution with the name of a running execution and the same input returns that execution (idempotent);
  a different input, or a name of an ended execution, is `ExecutionAlreadyExists` (names are unique per machine
  for 90 days after the execution ends);
- GetExecutionHistory returns at most 1,000 events a call, with `nextToken` for the next page, and
  `reverseOrder=true` gives the newest first (what a failure lookup wants); moto ignores both and returns every
  event oldest first, so `history` reverses a page itself when the service did not;
- RedriveExecution answers `ExecutionNotRedrivable` for an execution it cannot redrive; moto has no
  RedriveExecution (in-process it raises NotImplementedError, a server answers 500): each is `NotRedrivable`;
- CreateStateMachine is idempotent for the same name and definition; another definition under a taken name is
  `StateMachineAlreadyExists` (moto returns the existing machine either way).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from npa_workflow.engine.ports import (
    Execution,
    ExecutionAlreadyExists,
    ExecutionNotFound,
    MachineAlreadyExists,
    NotRedrivable,
)

HISTORY_PAGE = 1000  # GetExecutionHistory's maxResults ceiling
_NOT_FOUND = frozenset({"ExecutionDoesNotExist", "StateMachineDoesNotExist", "ResourceNotFound"})
_NOT_REDRIVABLE = frozenset({"ExecutionNotRedrivable", "ExecutionLimitExceeded", "NotImplemented",
                             "InvalidAction", "UnknownOperationException", "UnsupportedOperation",
                             "500", "InternalFailure"})


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _message(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Message", "") or exc)


def execution_from_description(desc: Mapping[str, Any]) -> Execution:
    """The port's `Execution` for a DescribeExecution answer (boto3's shape: dates are datetimes)."""
    return Execution(
        arn=str(desc["executionArn"]), name=str(desc.get("name", "")),
        machine_arn=str(desc.get("stateMachineArn", "")), status=str(desc.get("status", "")),
        input=str(desc.get("input") or ""), output=desc.get("output"), error=desc.get("error"),
        cause=desc.get("cause"), redrive_status=desc.get("redriveStatus"),
        redrive_status_reason=desc.get("redriveStatusReason"), redrive_count=int(desc.get("redriveCount") or 0),
        start_date=_date(desc.get("startDate")), stop_date=_date(desc.get("stopDate")),
    )


def _date(value: Any) -> datetime | None:
    return value if isinstance(value, datetime) else None


class SfnExecutions:
    """`Executions` on Step Functions. `client`: a boto3 stepfunctions client (created on first use otherwise)."""

    def __init__(self, client: Any = None) -> None:
        self._client = client

    def __repr__(self) -> str:
        return "SfnExecutions()"

    @property
    def client(self) -> Any:
        if self._client is None:
            import boto3

            self._client = boto3.client("stepfunctions", endpoint_url=os.environ.get("AWS_ENDPOINT_URL") or None)
        return self._client

    # -- executions ---------------------------------------------------------------------------------------------
    def start(self, machine_arn: str, name: str, input_json: str) -> str:
        try:
            return str(self.client.start_execution(stateMachineArn=machine_arn, name=name,
                                                   input=input_json)["executionArn"])
        except ClientError as exc:
            if _code(exc) == "ExecutionAlreadyExists":
                raise ExecutionAlreadyExists(f"execution {name!r} of {machine_arn}: {_message(exc)}") from None
            if _code(exc) in _NOT_FOUND:
                raise ExecutionNotFound(f"state machine {machine_arn}: {_message(exc)}") from None
            raise

    def describe(self, execution_arn: str) -> Execution:
        try:
            desc = self.client.describe_execution(executionArn=execution_arn)
        except ClientError as exc:
            if _code(exc) in _NOT_FOUND:
                raise ExecutionNotFound(f"execution {execution_arn}: {_message(exc)}") from None
            raise
        return execution_from_description(desc)

    def stop(self, execution_arn: str, error: str, cause: str) -> bool:
        try:
            self.client.stop_execution(executionArn=execution_arn, error=error, cause=cause)
        except ClientError as exc:
            if _code(exc) in _NOT_FOUND:
                return False
            raise
        return True

    def redrive(self, execution_arn: str) -> None:
        try:
            self.client.redrive_execution(executionArn=execution_arn)
        except NotImplementedError:  # moto in-process: the action is not implemented
            raise NotRedrivable(f"execution {execution_arn}: this Step Functions has no RedriveExecution") from None
        except ClientError as exc:
            if _code(exc) in _NOT_FOUND:
                raise ExecutionNotFound(f"execution {execution_arn}: {_message(exc)}") from None
            if _code(exc) in _NOT_REDRIVABLE:
                raise NotRedrivable(f"execution {execution_arn}: {_message(exc)}") from None
            raise

    def history(self, execution_arn: str, *, reverse: bool = False, limit: int | None = None) -> Iterator[dict]:
        kwargs: dict[str, Any] = {"executionArn": execution_arn, "maxResults": HISTORY_PAGE, "reverseOrder": reverse}
        seen = 0
        while True:
            try:
                page = self.client.get_execution_history(**kwargs)
            except ClientError as exc:
                if _code(exc) in _NOT_FOUND:
                    raise ExecutionNotFound(f"execution {execution_arn}: {_message(exc)}") from None
                raise
            events = list(page.get("events", []))
            if len(events) > 1 and reverse and events[0].get("id", 0) < events[-1].get("id", 0):
                events.reverse()  # a service that ignored reverseOrder (moto) returned the oldest first
            for event in events:
                if limit is not None and seen >= limit:
                    return
                seen += 1
                yield event
            token = page.get("nextToken")
            if not token:
                return
            kwargs["nextToken"] = token

    # -- state machines -------------------------------------------------------------------------------------------
    def definition(self, machine_arn: str) -> dict[str, Any] | None:
        try:
            return json.loads(self.client.describe_state_machine(stateMachineArn=machine_arn)["definition"])
        except ClientError as exc:
            if _code(exc) in _NOT_FOUND:
                return None
            raise

    def create_machine(self, name: str, definition: str, *, role_arn: str, log_group_arn: str = "") -> str:
        from npa_workflow.protocol.deployment import MACHINE_LOGGING, MACHINE_TRACING, MACHINE_TYPE

        # As the stack configures its machines (the deployment model): logged, traced, Standard.
        kwargs: dict[str, Any] = {"name": name, "definition": definition, "roleArn": role_arn, "type": MACHINE_TYPE,
                                  "tracingConfiguration": {"enabled": MACHINE_TRACING}}
        if log_group_arn:
            kwargs["loggingConfiguration"] = {
                **MACHINE_LOGGING, "destinations": [{"cloudWatchLogsLogGroup": {"logGroupArn": log_group_arn}}],
            }
        try:
            return str(self.client.create_state_machine(**kwargs)["stateMachineArn"])
        except ClientError as exc:
            if _code(exc) == "StateMachineAlreadyExists":
                raise MachineAlreadyExists(f"state machine {name!r}: {_message(exc)}") from None
            raise

    def machine_arn(self, name: str, role_arn: str) -> str:
        parts = role_arn.split(":")
        partition, account = (parts[1], parts[4]) if len(parts) > 4 else ("aws", "")
        return f"arn:{partition}:states:{self.client.meta.region_name}:{account}:stateMachine:{name}"
