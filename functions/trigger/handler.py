"""trigger: two events, one engine module.

- the `<state>.trigger` Task (waitForTaskToken): register the watch on the state's prefix;
- an EventBridge S3 "Object Created" event: complete the watches whose prefix holds the new object.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from npa_workflow.engine.watermarks import on_object_created
from npa_workflow.protocol.events import S3ObjectCreated, is_object_created
from npa_workflow.protocol.payloads import WaveTask
from npa_workflow.wiring import engine_from_environment

logger = Logger(service="npa-workflow-trigger")


@logger.inject_lambda_context(correlation_id_path="id || run_id")
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    if is_object_created(event):
        created = S3ObjectCreated.model_validate(event)
        bucket, key = created.detail.bucket.name, created.detail.object.key
        completed = on_object_created(engine_from_environment(), bucket, key)
        logger.info("object created", extra={"bucket": bucket, "key": key, "completed": completed})
        return {"bucket": bucket, "key": key, "completed": completed}
    request = WaveTask.model_validate(event)
    # Only this path reads the run's spec; the S3 path above never loads the spec stack.
    from npa_workflow.engine.trigger import trigger

    result = trigger(engine_from_environment(), request)
    logger.info("trigger registered", extra=result)
    return result
