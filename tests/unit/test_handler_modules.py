"""The Lambda handler modules: what importing one loads (a fresh interpreter each), and the EventBridge
event models they parse with (npa_workflow.protocol) on the shapes AWS documents."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from pydantic import ValidationError

from npa_workflow.protocol.events import ExecutionStatusChange, S3ObjectCreated
from npa_workflow.protocol.payloads import CleanupTask, DecideTask, WaveTask

HANDLERS = ("inbox", "launch", "decide", "trigger", "watch", "cleanup", "reap")
# Never at import: the SkyPilot SDK (the executor speaks REST), Powertools' parser models (all event models
# built at once), the AWS SDK (loaded with the clients, on the first AWS call) and the spec stack (launch,
# decide and trigger's Task path load it on their first call; watch, cleanup and reap never do).
SDKS = ("sky", "boto3", "botocore.client", "aws_lambda_powertools.utilities.parser")
NOT_AT_IMPORT = (*SDKS, "yaml", "npa_workflow.spec.validate")


def modules_after(code: str) -> set[str]:
    probe = f"{code}; import sys, json; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    return set(json.loads(out))


@pytest.mark.parametrize("name", [h for h in HANDLERS if h != "inbox"])
def test_a_handler_module_with_the_executor_loads_nothing_heavy(name: str) -> None:
    loaded = modules_after(f"import functions.{name}.handler, npa_workflow.adapters.skypilot_executor")
    assert f"functions.{name}.handler" in loaded
    assert sorted(loaded.intersection(NOT_AT_IMPORT)) == []


def test_the_inbox_loads_the_spec_stack_it_validates_with_but_not_the_sdk() -> None:
    loaded = modules_after("import functions.inbox.handler")
    assert "npa_workflow.spec.validate" in loaded
    assert sorted(loaded.intersection(SDKS)) == []


def test_the_watch_pass_and_cleanup_engine_modules_do_not_need_the_spec_stack() -> None:
    loaded = modules_after("import npa_workflow.engine.watch, npa_workflow.engine.cleanup, npa_workflow.wiring")
    assert sorted(loaded.intersection({"yaml", "npa_workflow.spec.validate", "npa_workflow.spec.model"})) == []


OBJECT_CREATED = {  # the shape of S3's EventBridge "Object Created" event, as AWS documents it
    "version": "0", "id": "17793124-05d4-b198-2fde-7ededc63b103", "detail-type": "Object Created",
    "source": "aws.s3", "account": "123456789012", "time": "2021-11-12T00:00:00Z", "region": "us-east-1",
    "resources": ["arn:aws:s3:::example-bucket"],
    "detail": {
        "version": "0", "bucket": {"name": "example-bucket"},
        "object": {"key": "inbox/team a/spec.yaml", "size": 5, "etag": "b1946ac92492d2347c6235b4d2611184",
                   "version-id": "IYV3p45BT0ac8hjHg1houSdS1a.Mro8e", "sequencer": "00617F08299329D189"},
        "request-id": "N4N7GDK58NMKJ12R", "requester": "123456789012", "source-ip-address": "1.2.3.4",
        "reason": "PutObject",
    },
}


def test_an_object_created_event_gives_bucket_key_version_and_etag() -> None:
    event = S3ObjectCreated.model_validate(OBJECT_CREATED)
    assert event.id == "17793124-05d4-b198-2fde-7ededc63b103"
    assert event.detail.bucket.name == "example-bucket"
    assert event.detail.object.key == "inbox/team a/spec.yaml"
    assert event.detail.object.version_id == "IYV3p45BT0ac8hjHg1houSdS1a.Mro8e"
    assert event.detail.object.etag == "b1946ac92492d2347c6235b4d2611184"


def test_an_object_created_event_without_versioning_has_no_version_id() -> None:
    detail = {**OBJECT_CREATED["detail"], "object": {"key": "landing/a", "size": 1}}
    event = S3ObjectCreated.model_validate({**OBJECT_CREATED, "detail": detail})
    assert (event.detail.object.version_id, event.detail.object.etag) == (None, None)


def test_an_object_created_event_without_a_key_is_rejected_naming_the_field() -> None:
    detail = {**OBJECT_CREATED["detail"], "object": {"size": 1}}
    with pytest.raises(ValidationError, match=r"detail\.object\.key"):
        S3ObjectCreated.model_validate({**OBJECT_CREATED, "detail": detail})


def test_an_execution_status_change_event_gives_the_execution_and_its_input() -> None:
    event = ExecutionStatusChange.model_validate({
        "version": "0", "id": "315c1398-40ff-a850-213b-158f73e60175",
        "detail-type": "Step Functions Execution Status Change", "source": "aws.states",
        "account": "123456789012", "time": "2019-02-26T19:42:21Z", "region": "us-east-1",
        "resources": ["arn:aws:states:us-east-1:123456789012:execution:sm:run-1"],
        "detail": {
            "executionArn": "arn:aws:states:us-east-1:123456789012:execution:sm:run-1",
            "stateMachineArn": "arn:aws:states:us-east-1:123456789012:stateMachine:sm",
            "name": "run-1", "status": "ABORTED", "startDate": 1551225271984, "stopDate": 1551225272984,
            "input": json.dumps({"run": {"run_id": "run-1"}}), "output": None,
        },
    })
    assert (event.detail.name, event.detail.status) == ("run-1", "ABORTED")
    assert json.loads(event.detail.input)["run"]["run_id"] == "run-1"


def test_task_payloads_keep_the_token_out_of_their_repr_and_name_a_missing_field() -> None:
    wave = WaveTask.model_validate({"run_id": "r1", "state": "train", "token": "secret-ish-token", "loops": {"l1": 2}})
    assert (wave.loops, wave.group) == ({"l1": 2}, "")
    assert "secret-ish-token" not in repr(wave)
    assert wave.model_dump()["token"] == "secret-ish-token"  # the engine still gets it
    assert DecideTask.model_validate({"run_id": "r1", "state": "gate", "purpose": "loop"}).purpose == "loop"
    caught = CleanupTask.model_validate({"run_id": "r1", "state": "s", "error": {"Error": "States.Timeout"}})
    assert caught.error == {"Error": "States.Timeout"}
    with pytest.raises(ValidationError, match="token"):
        WaveTask.model_validate({"run_id": "r1", "state": "train"})


def test_the_ledger_package_loads_no_botocore_until_the_store_is_asked_for() -> None:
    import subprocess
    import sys

    code = ("import sys, npa_workflow.ledger, npa_workflow.engine.ports; print('botocore' in sys.modules); "
            "from npa_workflow.ledger import DynamoLedger; print('botocore' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "True"]
