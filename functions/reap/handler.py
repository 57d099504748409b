"""reap: an execution ended (EventBridge "Step Functions Execution Status Change").

FAILED, TIMED_OUT or ABORTED: cancel every job of its run by exact id; SUCCEEDED: record the run's end
in the ledger. The run id is the execution's input `run.run_id` (the execution name for the first
execution of a run; a resumed run's executions are `<run-id>-r<n>`)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.utilities.typing import LambdaContext

from npa_workflow.adapters.lambda_metrics import count
from npa_workflow.engine.cleanup import reap, record_success
from npa_workflow.ledger import RunStatus
from npa_workflow.protocol.events import ExecutionStatusChange, ExecutionStatusDetail
from npa_workflow.wiring import engine_from_environment

logger = Logger(service="npa-workflow-reap")
metrics = Metrics(namespace="npa-workflow", service="reap")
ENDED = frozenset({"FAILED", "TIMED_OUT", "ABORTED"})


def run_id_of(detail: ExecutionStatusDetail) -> str:
    from npa_workflow.protocol.execution import run_id_of_input  # only reap parses an execution's input

    return run_id_of_input(detail.input) or detail.name


@metrics.log_metrics
@logger.inject_lambda_context(correlation_id_path="id")
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    change = ExecutionStatusChange.model_validate(event).detail
    if change.status == "SUCCEEDED":
        run_id = run_id_of(change)
        record_success(engine_from_environment(), run_id)
        return {"execution": change.executionArn, "run_id": run_id, "status": change.status, "cancelled": []}
    if change.status not in ENDED:
        return {"execution": change.executionArn, "status": change.status, "cancelled": []}
    run_id = run_id_of(change)
    reason = f"execution {change.name} ended {change.status}"
    cancelled = reap(engine_from_environment(), run_id, reason, status=RunStatus(change.status))
    count(metrics, "JobsReaped", len(cancelled))
    logger.info("execution reaped", extra={"run_id": run_id, "status": change.status, "cancelled": cancelled})
    return {"execution": change.executionArn, "run_id": run_id, "status": change.status, "cancelled": cancelled}
