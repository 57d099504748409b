"""launch: submit the wave's job once and record (job id, task token) in the ledger.

Invoked by a `lambda:invoke.waitForTaskToken` Task; the watch pass completes the token when the job ends.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from npa_workflow.engine import budget
from npa_workflow.protocol.functions import LAUNCH_MARGIN_SECONDS
from npa_workflow.protocol.payloads import WaveTask
from npa_workflow.wiring import engine_from_environment

logger = Logger(service="npa-workflow-launch")


@logger.inject_lambda_context(correlation_id_path="run_id")
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    request = WaveTask.model_validate(event)
    # Imported on the first invocation, not with the module: it brings the spec stack (YAML, the spec's models,
    # validation, rendering), which keeps the module's import within its budget (bench/handler_import.py).
    from npa_workflow.engine.launch import launch

    # Every SkyPilot call stops retrying before the function's timeout, leaving room for the one exchange in
    # flight (connect + read timeouts) and the ledger write that records the outcome (protocol.functions sizes the
    # timeout as the calls' budget + this margin).
    with budget.within(context.get_remaining_time_in_millis() / 1000 - LAUNCH_MARGIN_SECONDS):
        result = launch(engine_from_environment(), request)
    logger.info("wave launched", extra={"state": request.state, "group": request.group, **result})
    return result
