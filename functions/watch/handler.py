"""watch: one pass over every active wave (one executor call) and every waiting trigger.

Scheduled every minute by EventBridge; the event itself carries nothing the pass needs.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.utilities.typing import LambdaContext

from npa_workflow.adapters.lambda_metrics import count
from npa_workflow.engine.watch import watch_pass
from npa_workflow.wiring import engine_from_environment

logger = Logger(service="npa-workflow-watch")
metrics = Metrics(namespace="npa-workflow", service="watch")


@metrics.log_metrics
@logger.inject_lambda_context(correlation_id_path="id")
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    # The pass stops taking new work before the function's own timeout (what is left goes to the next tick).
    report = watch_pass(engine_from_environment(), budget_seconds=context.get_remaining_time_in_millis() / 1000)
    result = dataclasses.asdict(report) if dataclasses.is_dataclass(report) else dict(report)
    count(metrics, "ActiveWaves", result.get("active", 0))
    logger.info("watch pass", extra=result)
    return result
