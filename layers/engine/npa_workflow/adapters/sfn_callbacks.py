"""`SfnCallbacks`: the engine's `TaskCallbacks` port over boto3 Step Functions.

Completing a token is a race the engine expects to lose sometimes: the Task timed out, the execution
was stopped, another caller (S3 event vs watch pass, cleanup vs reap) completed it first. Those answers
(`TaskTimedOut`, `InvalidToken`, `TaskDoesNotExist`) return False; anything else is a real error.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from botocore.exceptions import ClientError

GONE = frozenset({"TaskTimedOut", "InvalidToken", "TaskDoesNotExist"})
ERROR_MAX = 256  # SendTaskFailure limits
CAUSE_MAX = 32768


def _gone(exc: ClientError) -> bool:
    return str(exc.response.get("Error", {}).get("Code", "")) in GONE


class SfnCallbacks:
    """`TaskCallbacks` on Step Functions. `client`: a boto3 stepfunctions client (created on first use)."""

    def __init__(self, client: Any = None) -> None:
        self._client = client

    def __repr__(self) -> str:
        return "SfnCallbacks()"

    @property
    def client(self) -> Any:
        if self._client is None:
            import boto3

            self._client = boto3.client("stepfunctions", endpoint_url=os.environ.get("AWS_ENDPOINT_URL") or None)
        return self._client

    def succeed(self, token: str, output: Mapping[str, object]) -> bool:
        try:
            self.client.send_task_success(taskToken=token, output=json.dumps(dict(output), default=str))
        except ClientError as exc:
            if _gone(exc):
                return False
            raise
        return True

    def fail(self, token: str, error: str, cause: str) -> bool:
        try:
            self.client.send_task_failure(taskToken=token, error=error[:ERROR_MAX], cause=cause[:CAUSE_MAX])
        except ClientError as exc:
            if _gone(exc):
                return False
            raise
        return True

    def heartbeat(self, token: str) -> bool:
        try:
            self.client.send_task_heartbeat(taskToken=token)
        except ClientError as exc:
            if _gone(exc):
                return False
            raise
        return True
