"""decide: read, record and normalize the decision a loop exit or a branch follows."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from npa_workflow.protocol.payloads import DecideResult, DecideTask
from npa_workflow.wiring import engine_from_environment

logger = Logger(service="npa-workflow-decide")


@logger.inject_lambda_context(correlation_id_path="run_id")
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    request = DecideTask.model_validate(event)
    # Imported on the first invocation, not with the module: it brings the spec stack (YAML, the spec's models,
    # validation), which keeps the module's import within its budget (bench/handler_import.py).
    from npa_workflow.engine.decide import decide

    result = decide(engine_from_environment(), request)
    logger.info("decision read", extra={"state": request.state, "purpose": request.purpose, **result})
    DecideResult.model_validate(result)  # what the machine's ResultSelector reads is there
    return result
