"""The twin's event pump and Lambda semantics (embedded_aws.event_pump, embedded_aws.moto_lambda), each test naming the
AWS behaviour: S3 "Object Created" through EventBridge in AWS's shape, asynchronous invocations retried twice then
sent to the on-failure destination, at-least-once delivery, the configured timeout enforced."""

from __future__ import annotations

import io
import json
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pump_handlers  # noqa: E402
from e2e_support import aws_client  # noqa: E402

from npa_workflow.embedded_aws.event_pump import EventPump, encode_event_key, object_created_event  # noqa: E402
from npa_workflow.embedded_aws.moto_lambda import in_process_lambdas  # noqa: E402
from npa_workflow.embedded_aws.moto_server import start_moto_server  # noqa: E402

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]


def _zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("README.txt", "in-process\n")
    return buf.getvalue()


@pytest.fixture(scope="module")
def functions() -> Iterator[dict[str, Any]]:
    with start_moto_server() as server, in_process_lambdas():
        client = aws_client("lambda", server.endpoint_url)
        role = aws_client("iam", server.endpoint_url).create_role(
            RoleName="pump", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        names = {}
        for handler, timeout in (("record", 30), ("always_fails", 30), ("fails_once", 30), ("sleeps", 1)):
            names[handler] = client.create_function(
                FunctionName=f"pump-{handler}", Runtime="python3.11", Role=role, Code={"ZipFile": _zip()},
                Handler=f"pump_handlers.{handler}", Timeout=timeout)["FunctionName"]
        yield {"client": client, "names": names}


@pytest.fixture(autouse=True)
def _reset() -> None:
    pump_handlers.calls.clear()
    pump_handlers.events.clear()


def test_an_object_created_event_has_the_fields_and_key_encoding_aws_sends() -> None:
    """AWS (S3 → EventBridge): `etag` (not moto's `eTag`) without quotes, `sequencer`, `version-id` only for a
    versioned bucket, and the key URL-encoded with space as `+`."""
    event = object_created_event("b", "inbox/my spec+v1 ü.yaml", etag='"abc"', size=5, sequencer="0001")
    assert event["source"] == "aws.s3" and event["detail-type"] == "Object Created"
    obj = event["detail"]["object"]
    assert obj == {"key": "inbox/my+spec%2Bv1+%C3%BC.yaml", "size": 5, "etag": "abc", "sequencer": "0001"}
    assert event["detail"]["bucket"] == {"name": "b"} and event["resources"] == ["arn:aws:s3:::b"]
    from urllib.parse import unquote_plus
    assert unquote_plus(obj["key"]) == "inbox/my spec+v1 ü.yaml"
    assert encode_event_key("inbox/plain-name_1.yaml") == "inbox/plain-name_1.yaml"
    versioned = object_created_event("b", "k", etag="e", size=1, sequencer="2", version_id="v1")
    assert versioned["detail"]["object"]["version-id"] == "v1"


def test_sequencers_of_one_pump_increase(functions: dict[str, Any], tmp_path: Path) -> None:
    pump = EventPump(functions["client"], functions["names"], tmp_path / "failures.jsonl")
    first, second = pump.next_sequencer(), pump.next_sequencer()
    assert len(first) == len(second) and second > first


def test_a_failing_async_invocation_is_retried_twice_then_goes_to_the_on_failure_destination(
        functions: dict[str, Any], tmp_path: Path) -> None:
    """AWS Lambda, asynchronous invocation: 2 retries by default, then the on-failure destination."""
    failures = tmp_path / "failures.jsonl"
    pump = EventPump(functions["client"], {"f": functions["names"]["always_fails"]}, failures, retry_delays=(0, 0))
    assert pump.deliver("f", {"n": 1}) is None
    assert pump_handlers.calls["always_fails"] == 3 and pump.invoked["f"] == 3
    [record] = [json.loads(line) for line in failures.read_text().splitlines()]
    assert record["requestContext"]["condition"] == "RetriesExhausted"
    assert record["requestContext"]["approximateInvokeCount"] == 3
    assert record["requestPayload"] == {"n": 1}
    assert record["responsePayload"]["errorMessage"] == "broken on purpose"


def test_a_retry_that_succeeds_records_nothing(functions: dict[str, Any], tmp_path: Path) -> None:
    failures = tmp_path / "failures.jsonl"
    pump = EventPump(functions["client"], {"f": functions["names"]["fails_once"]}, failures, retry_delays=(0,))
    assert pump.deliver("f", {}) == {"delivery": 2}
    assert not failures.exists()


def test_duplicate_mode_delivers_every_event_twice(functions: dict[str, Any], tmp_path: Path) -> None:
    """S3 and EventBridge deliver at least once: the twin can deliver everything twice."""
    pump = EventPump(functions["client"], {"f": functions["names"]["record"]}, tmp_path / "f.jsonl", duplicate=True)
    pump.deliver("f", {"id": "one"})
    assert [e["id"] for e in pump_handlers.events] == ["one", "one"]


def test_a_handler_over_its_configured_timeout_fails_as_sandbox_timedout(functions: dict[str, Any]) -> None:
    """AWS Lambda stops an invocation at the function's Timeout: `Sandbox.Timedout`."""
    response = functions["client"].invoke(FunctionName=functions["names"]["sleeps"],
                                          Payload=json.dumps({"seconds": 3}).encode())
    body = json.loads(response["Payload"].read())
    assert response.get("FunctionError")
    assert body["errorType"] == "Sandbox.Timedout" and "timed out after 1.00 seconds" in body["errorMessage"]
    quick = functions["client"].invoke(FunctionName=functions["names"]["sleeps"],
                                       Payload=json.dumps({"seconds": 0}).encode())
    assert not quick.get("FunctionError") and json.loads(quick["Payload"].read()) == {"slept": True}


def test_the_engine_reads_back_the_key_the_pump_encodes() -> None:
    """What the pump sends (AWS's encoding) is what the inbox and trigger read back first (`event_key_forms`)."""
    from npa_workflow.protocol.events import S3ObjectCreated, event_key_forms

    event = object_created_event("b", "inbox/my spec+v1 ü.yaml", etag="e", size=1, sequencer="1")
    key = S3ObjectCreated.model_validate(event).detail.object.key
    assert event_key_forms(key)[0] == "inbox/my spec+v1 ü.yaml"

