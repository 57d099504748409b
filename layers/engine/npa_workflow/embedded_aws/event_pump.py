"""The twin's event sources: the events AWS would send, in AWS's shapes, delivered to the deployed functions.

In the cloud, EventBridge invokes four functions asynchronously (`infra/events.py`): the inbox and the trigger on
S3 "Object Created" (the bucket has EventBridge notifications on), reap on "Step Functions Execution Status
Change", watch on a schedule. :class:`EventPump` builds those events and hands each to the target of every rule
whose EventPattern matches it (the stack's own rules, `protocol.deployment`, matched as EventBridge does:
`embedded_aws.event_patterns`; an event no rule matches goes nowhere, as in the cloud). It invokes the functions
deployed on moto through the Lambda API (so the real handler runs, with its deployed configuration and timeout:
`embedded_aws.moto_lambda`), with the semantics of an asynchronous invocation:

- a function error is retried twice (AWS: 2 retries by default, about 1 and 2 minutes apart; here
  `retry_delays`), then the event goes to the on-failure destination, here a JSON-lines file whose records
  have the shape of AWS's destination records (`requestContext.condition: RetriesExhausted`,
  `requestPayload`, `responsePayload`);
- delivery is at least once: with `duplicate=True` (or `NPA_WORKFLOW_DUPLICATE_EVENTS=1`) every event is
  delivered twice, as S3 and EventBridge sometimes do; the handlers must absorb it.

S3 event fields as AWS sends them (not as moto's own notifications do): `etag` (moto sends `eTag`) without
quotes, `version-id` only for a versioned bucket, `sequencer`, and the key URL-encoded as S3 encodes event keys
(space → `+`, other reserved and non-ASCII characters %-escaped, `/` kept): handlers decode it with
`unquote_plus`, as Powertools' S3 EventBridge model does.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import urllib.parse
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

from npa_workflow.embedded_aws.event_patterns import matches
from npa_workflow.engine.ports import Execution
from npa_workflow.protocol.errors import LAMBDA_SERVICE_EXCEPTION
from npa_workflow.storage_errors import is_storage_fault

__all__ = ["DUPLICATE_ENV", "EventPump", "EventTarget", "encode_event_key", "execution_status_event",
           "object_created_event", "scheduled_event"]

LOG = logging.getLogger(__name__)
ACCOUNT = "123456789012"
REGION = "us-east-1"
DUPLICATE_ENV = "NPA_WORKFLOW_DUPLICATE_EVENTS"
ASYNC_RETRIES = 2  # AWS Lambda's default MaximumRetryAttempts for asynchronous invocations


class EventTarget(NamedTuple):
    """A rule: its name, its EventPattern, the function it invokes (by slot name)."""

    rule: str
    pattern: Mapping[str, Any]
    function: str


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def encode_event_key(key: str) -> str:
    """A key as S3 writes it into an event: URL-encoded with space as `+` (`urllib.parse.quote_plus`), `/` kept."""
    return urllib.parse.quote_plus(key, safe="/")


def _envelope(source: str, detail_type: str, detail: dict[str, Any], resources: list[str]) -> dict[str, Any]:
    return {"version": "0", "id": str(uuid.uuid4()), "detail-type": detail_type, "source": source,
            "account": ACCOUNT, "time": _now(), "region": REGION, "resources": resources, "detail": detail}


def object_created_event(bucket: str, key: str, *, etag: str, size: int, sequencer: str,
                         version_id: str | None = None, reason: str = "PutObject") -> dict[str, Any]:
    """S3 "Object Created" through EventBridge (detail version 0), as AWS sends it."""
    obj: dict[str, Any] = {"key": encode_event_key(key), "size": size, "etag": etag.strip('"'),
                           "sequencer": sequencer}
    if version_id and version_id != "null":
        obj["version-id"] = version_id
    detail = {"version": "0", "bucket": {"name": bucket}, "object": obj, "request-id": uuid.uuid4().hex[:16].upper(),
              "requester": ACCOUNT, "source-ip-address": "127.0.0.1", "reason": reason}
    return _envelope("aws.s3", "Object Created", detail, [f"arn:aws:s3:::{bucket}"])


def _epoch_ms(value: Any) -> int | None:
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)
    return None


def execution_status_event(execution: Execution) -> dict[str, Any]:
    """"Step Functions Execution Status Change" for an execution (`Executions.describe`; dates in epoch ms)."""
    detail = {"executionArn": execution.arn, "stateMachineArn": execution.machine_arn or None,
              "name": execution.name or None, "status": execution.status,
              "startDate": _epoch_ms(execution.start_date), "stopDate": _epoch_ms(execution.stop_date),
              "input": execution.input or None, "output": execution.output, "error": execution.error,
              "cause": execution.cause}
    return _envelope("aws.states", "Step Functions Execution Status Change", detail, [execution.arn])


def scheduled_event(rule: str = "npa-workflow-watch") -> dict[str, Any]:
    return _envelope("aws.events", "Scheduled Event", {},
                     [f"arn:aws:events:{REGION}:{ACCOUNT}:rule/{rule}"])


class EventPump:
    """Invoke deployed functions with events (see the module doc). `functions`: {slot name: function name}."""

    def __init__(self, lambda_client: Any, functions: Mapping[str, str], failures_path: Path, *,
                 rules: Sequence[EventTarget] = (), duplicate: bool | None = None,
                 retry_delays: tuple[float, ...] = (0.2, 0.5),
                 storage_fault: Callable[[], BaseException | None] | None = None) -> None:
        self.client = lambda_client
        # The write the disk refused, if any (`DurableAws.storage_fault`): a function that fails once the stack's
        # state can no longer be written fails because of it, mostly as a bare 500 of the embedded AWS that does
        # not say why; the command says the disk's one line (local.runtime), the pump adds nothing to it.
        self.storage_fault = storage_fault or (lambda: None)
        self.rules = tuple(rules)
        self.unmatched: Counter[str] = Counter()  # events no rule matched, by detail-type
        self.functions = dict(functions)
        self.failures_path = Path(failures_path)
        self.duplicate = (os.environ.get(DUPLICATE_ENV, "").strip().lower() in ("1", "true", "yes")
                          if duplicate is None else duplicate)
        self.retry_delays = retry_delays
        self.invoked: Counter[str] = Counter()  # invocations per function (every attempt)
        self._sequence = 0
        self._lock = threading.Lock()

    def next_sequencer(self) -> str:
        """S3's `sequencer`: a hex string that orders the events of one key (fixed width, so it sorts as text)."""
        with self._lock:
            self._sequence += 1
            return f"{time.time_ns():016X}{self._sequence:08X}"

    # ---------------------------------------------------------------------------------------- delivery
    def deliver(self, function: str, event: dict[str, Any]) -> Any:
        """An asynchronous invocation of `function` with `event` (twice in duplicate mode). Returns the handler's
        last result, or None when it failed every attempt (recorded at the on-failure destination)."""
        result = self._deliver_once(function, event)
        if self.duplicate:
            result = self._deliver_once(function, event)
        return result

    def _deliver_once(self, function: str, event: dict[str, Any]) -> Any:
        payload = json.dumps(event)
        error: Any = None
        for attempt in range(ASYNC_RETRIES + 1):
            if attempt:
                time.sleep(self.retry_delays[min(attempt - 1, len(self.retry_delays) - 1)])
            self.invoked[function] += 1
            try:
                response = self.client.invoke(FunctionName=self.functions[function], InvocationType="RequestResponse",
                                              Payload=payload.encode())
                body = response["Payload"].read()
                result = json.loads(body) if body else None
            except Exception as exc:  # noqa: BLE001 - the service failed: an async invocation is retried too
                error = {"errorType": LAMBDA_SERVICE_EXCEPTION, "errorMessage": str(exc)}
                continue
            if not response.get("FunctionError"):
                return result
            error = result
            message = (result or {}).get("errorMessage") if isinstance(result, dict) else result
            # A full or read-only disk is said once, by the command, with its fix: not at every retry.
            LOG.log(logging.DEBUG if self._disk_failed(message) else logging.WARNING,
                    "%s failed (attempt %d of %d): %s", function, attempt + 1, ASYNC_RETRIES + 1, message)
        self._on_failure(function, event, error)
        return None

    def _disk_failed(self, message: Any) -> bool:
        """Whether a failure is the disk's: its message says so, or the stack's state could no longer be written
        (the durable layer records that before moto answers the request it failed)."""
        return is_storage_fault(message) or self.storage_fault() is not None

    def _on_failure(self, function: str, event: dict[str, Any], error: Any) -> None:
        record = {
            "version": "1.0", "timestamp": _now(),
            "requestContext": {"requestId": str(uuid.uuid4()), "functionArn": self.functions[function],
                               "condition": "RetriesExhausted", "approximateInvokeCount": ASYNC_RETRIES + 1},
            "requestPayload": event,
            "responseContext": {"statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled"},
            "responsePayload": error,
        }
        self.failures_path.parent.mkdir(parents=True, exist_ok=True)
        with self._lock, open(self.failures_path, "a", encoding="utf-8") as out:
            out.write(json.dumps(record) + "\n")
        message = error.get("errorMessage") if isinstance(error, dict) else error
        LOG.log(logging.DEBUG if self._disk_failed(message) else logging.ERROR,
                "%s: event sent to the on-failure destination %s after %d attempts", function, self.failures_path,
                ASYNC_RETRIES + 1)

    # ---------------------------------------------------------------------------------------- the sources
    def publish(self, event: dict[str, Any]) -> dict[str, Any]:
        """Put one event on the bus: each rule whose pattern matches it delivers it to its function. Returns
        {function: result} (a function two matching rules target gets it once per rule, its last result kept)."""
        results: dict[str, Any] = {}
        for rule in self.rules:
            if matches(rule.pattern, event):
                results[rule.function] = self.deliver(rule.function, event)
        if not results:
            self.unmatched[str(event.get("detail-type"))] += 1
        return results

    def object_created(self, bucket: str, key: str, *, etag: str, size: int,
                       version_id: str | None = None) -> dict[str, Any]:
        """One S3 "Object Created" to the rules that match it (the inbox for `inbox/` of the engine bucket, the
        trigger for the engine bucket and the trigger-event buckets). Returns {function: result}."""
        return self.publish(object_created_event(bucket, key, etag=etag, size=size, sequencer=self.next_sequencer(),
                                                 version_id=version_id))

    def execution_status_changed(self, execution: Execution) -> Any:
        """"Execution Status Change" to the rules that match it (reap, for this stack's machines): the reap
        function's result, None when it failed every attempt or no rule matched."""
        return self.publish(execution_status_event(execution)).get("reap")

    def scheduled_watch(self) -> Any:
        return self.deliver("watch", scheduled_event())
