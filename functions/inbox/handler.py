"""inbox: S3 "Object Created" under `inbox/` (through EventBridge) → validate, freeze, start the run named by a
deterministic run id (a duplicate event starts nothing new), or write `inbox-rejected/<key>.json` listing every
error. The logic is `npa_workflow.engine.inbox.handle_object`."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.utilities.typing import LambdaContext

from npa_workflow.adapters.lambda_metrics import count
from npa_workflow.engine.inbox import INBOX_PREFIX, InboxSettings, handle_object
from npa_workflow.protocol.events import S3ObjectCreated
from npa_workflow.wiring import engine_from_environment

logger = Logger(service="npa-workflow-inbox")
metrics = Metrics(namespace="npa-workflow", service="inbox")
METRIC_BY_STATUS = {"started": "RunsStarted", "already_started": "DuplicateDeliveries", "rejected": "InboxRejected"}


@metrics.log_metrics
@logger.inject_lambda_context(correlation_id_path="id")
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    detail = S3ObjectCreated.model_validate(event).detail
    bucket, obj = detail.bucket.name, detail.object
    if not obj.key.startswith(INBOX_PREFIX):
        logger.info("ignored: not under the inbox prefix", extra={"bucket": bucket, "key": obj.key})
        return {"status": "ignored", "key": obj.key, "reason": f"not an object under {INBOX_PREFIX}"}
    engine = engine_from_environment()
    # AWS URL-encodes the key (space → `+`); the run id and the read need the object's real key.
    obj = obj.model_copy(update={"key": engine.store.event_key(bucket, obj.key)})
    result = handle_object(
        engine,
        engine.executions,  # the engine's Step Functions control plane (one client per process)
        bucket=bucket,
        key=obj.key,
        version_id=obj.version_id,
        etag=obj.etag,
        settings=InboxSettings.from_environment(),
    )
    if result.status in METRIC_BY_STATUS:
        count(metrics, METRIC_BY_STATUS[result.status], 1)
    logger.info("inbox object handled", extra=result.to_json())
    return result.to_json()
