"""Lambda handlers for the moto adapter contract test (tests/integration/test_moto_lambda_adapter.py).

They run in-process, in the moto server's request threads, through
:mod:`npa_workflow.embedded_aws.moto_lambda`; module state is shared with the test.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections import Counter
from typing import Any

tokens: queue.Queue[dict[str, Any]] = queue.Queue()
attempts: Counter[str] = Counter()

_active_lock = threading.Lock()
active = 0
peak = 0


class WaveFailed(Exception):
    """Workload failure; Step Functions sees the class name ``WaveFailed``, as on AWS."""


class CustomBoom(Exception):
    """An ``error_type`` attribute, which AWS's Python runtime ignores: Step Functions still sees the class name."""

    error_type = "Custom.Boom"


def reset_concurrency() -> None:
    global active, peak
    with _active_lock:
        active = 0
        peak = 0


def echo(event: Any, context: Any) -> dict[str, Any]:
    return {
        "echo": event,
        "function_name": context.function_name,
        "memory_limit_in_mb": context.memory_limit_in_mb,
        "invoked_function_arn": context.invoked_function_arn,
        "aws_request_id": context.aws_request_id,
        "remaining_ms_positive": context.get_remaining_time_in_millis() > 0,
        "env_var": os.environ.get("NPA_ADAPTER_TEST_VAR"),
    }


def store_token(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """The launch Lambda's shape: record the task token, return at once."""
    tokens.put(event)
    return {"stored": True}


def flaky_wave(event: dict[str, Any], context: Any) -> dict[str, Any]:
    key = event["key"]
    attempts[key] += 1
    if attempts[key] < event.get("succeed_on_attempt", 2):
        raise WaveFailed(f"wave {key} failed on attempt {attempts[key]}")
    return {"key": key, "attempt": attempts[key]}


def custom_boom(event: Any, context: Any) -> None:
    raise CustomBoom("boom from handler")


def concurrent_item(event: dict[str, Any], context: Any) -> dict[str, Any]:
    global active, peak
    with _active_lock:
        active += 1
        peak = max(peak, active)
    try:
        time.sleep(event.get("sleep", 0.3))
    finally:
        with _active_lock:
            active -= 1
    return {"item": event["item"]}


def not_serialisable(event: Any, context: Any) -> object:
    return {"when": object()}


def succeed_own_token(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """A launch whose job is already done (a replayed wave): its token succeeds before the Lambda returns."""
    import boto3

    sfn = boto3.client("stepfunctions", endpoint_url=event["endpoint"], region_name="us-east-1",
                       aws_access_key_id="testing", aws_secret_access_key="testing")
    sfn.send_task_success(taskToken=event["token"], output='{"done": "before the launch returned"}')
    return {"stored": True}
