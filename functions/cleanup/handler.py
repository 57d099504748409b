"""cleanup: the Catch target of every state. Cancels the run's active jobs by exact id and returns the
root cause (`{"error", "cause"}`) that the `run.failed` state fails the execution with."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from npa_workflow.engine.cleanup import cleanup
from npa_workflow.protocol.payloads import CleanupResult, CleanupTask
from npa_workflow.wiring import engine_from_environment

logger = Logger(service="npa-workflow-cleanup")


@logger.inject_lambda_context(correlation_id_path="run_id")
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, str]:
    request = CleanupTask.model_validate(event)
    result = cleanup(engine_from_environment(), request)
    logger.warning("run failed; jobs cleaned up", extra={"state": request.state, **result})
    CleanupResult.model_validate(result)  # what the machine's ResultSelector reads is there
    return result
