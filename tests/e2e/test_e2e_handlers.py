"""The Lambda entry points only the cloud invokes (EventBridge events), end to end in this process: the real
handler modules, the engine from `engine_from_environment()`, moto for S3/DynamoDB/Step Functions, and a real
local job. The reap handler cancels a run's job by exact id; the trigger handler takes an S3 Object Created
event; the watch handler returns its report."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from moto import mock_aws

sys.path.insert(0, str(Path(__file__).resolve().parent))
from deadlines import deadline as scaled  # noqa: E402
from e2e_support import group_alive  # noqa: E402

from npa_workflow import wiring  # noqa: E402
from npa_workflow.embedded_aws.moto_lambda import LambdaContext  # noqa: E402
from npa_workflow.engine.ports import JobRequest  # noqa: E402
from npa_workflow.ledger import RunRecord, RunStatus, Watermark, WaveStatus  # noqa: E402
from npa_workflow.plan.model import PlanStep  # noqa: E402
from npa_workflow.protocol import environment  # noqa: E402

pytestmark = pytest.mark.e2e
BUCKET = "engine-bucket"


def context(name: str) -> LambdaContext:
    return LambdaContext(function_name=name, function_version="$LATEST",
                         invoked_function_arn=f"arn:aws:lambda:us-east-1:123456789012:function:{name}",
                         memory_limit_in_mb=256, timeout_seconds=60, log_group_name=f"/aws/lambda/{name}")


@pytest.fixture
def engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
           environment.LEDGER_TABLE: "ledger", environment.BUCKET: BUCKET, environment.EXECUTOR: "local",
           environment.LOCAL_STATE_DIR: str(tmp_path / "state"), "POWERTOOLS_METRICS_DISABLED": "true"}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    wiring.clear_cache()
    with mock_aws():
        eng = wiring.engine_from_environment()
        assert wiring.engine_from_environment() is eng  # cached per process
        eng.ledger.create_table()
        eng.store.client.create_bucket(Bucket=BUCKET)
        eng.cancel_confirm_seconds = 10
        yield eng
    wiring.clear_cache()


def step(state: str, argv: list[str]) -> PlanStep:
    return PlanStep(state=state, iteration=None, loop_label="", argv=argv, shell="", tool_ref="", resources="default",
                    resources_profile={}, outputs=[], inputs=[], group="")


@pytest.mark.timeout(60)
def test_reap_cancels_the_jobs_of_an_execution_that_ended(engine: object, tmp_path: Path) -> None:
    from functions.reap.handler import handler

    run_id = "reap-run"
    engine.ledger.put_run(RunRecord(run_id=run_id, workflow="wf"))
    engine.ledger.begin_attempt(run_id, "work", state="work", attempt=1, task_token="tok")
    submission = engine.executor.submit(JobRequest(
        name="reap-run-01-work", step=step("work", [sys.executable, "-c", "import time; time.sleep(60)"]),
        env={}, workdir=tmp_path))
    engine.ledger.record_submission(run_id, "work", 1, job_id=submission.job_id)
    pgid = json.loads((tmp_path / "state" / "jobs" / f"{submission.job_id}.json").read_text())["pgid"]
    assert group_alive(pgid)

    event = {
        "version": "0", "id": "e-1", "detail-type": "Step Functions Execution Status Change", "source": "aws.states",
        "account": "123456789012", "time": "2025-01-01T00:00:00Z", "region": "us-east-1", "resources": [],
        "detail": {"executionArn": "arn:aws:states:us-east-1:123456789012:execution:m:reap-run-r2",
                   "stateMachineArn": "arn:aws:states:us-east-1:123456789012:stateMachine:m",
                   "name": "reap-run-r2", "status": "ABORTED",
                   "input": json.dumps({"run": {"run_id": run_id, "bucket": BUCKET}})},
    }
    result = handler(event, context("npa-workflow-reap"))
    assert result["run_id"] == run_id  # from the input, not the execution name of a resumed run
    assert result["cancelled"] == [submission.job_id]
    assert not group_alive(pgid)
    assert engine.ledger.latest_attempt(run_id, "work").status == WaveStatus.CANCELLED
    assert engine.ledger.get_run(run_id).status == RunStatus.ABORTED

    succeeded = {**event, "detail": {**event["detail"], "status": "SUCCEEDED"}}
    assert handler(succeeded, context("npa-workflow-reap"))["cancelled"] == []
    assert engine.ledger.get_run(run_id).status == RunStatus.ABORTED  # an ended run is not rewritten

    engine.ledger.put_run(RunRecord(run_id="ok-run", workflow="wf"))
    done = {**event, "detail": {**event["detail"], "name": "ok-run", "status": "SUCCEEDED",
                                "input": json.dumps({"run": {"run_id": "ok-run", "bucket": BUCKET}})}}
    assert handler(done, context("npa-workflow-reap"))["run_id"] == "ok-run"
    assert engine.ledger.get_run("ok-run").status == RunStatus.SUCCEEDED  # the cloud records success too


@pytest.mark.timeout(60)
def test_an_s3_object_created_event_completes_the_watch_on_its_prefix(engine: object) -> None:
    from functions.trigger.handler import handler

    prefix = f"s3://{BUCKET}/landing/"
    engine.ledger.put_watermark(Watermark(run_id="trig-run", state="ingest", uri=prefix, min_objects=1,
                                          task_token="not-a-live-token"))
    assert [m.state for m in engine.ledger.active_watches()] == ["ingest"]
    engine.store.put(prefix + "a.csv", b"a")
    event = {
        "version": "0", "id": "e-2", "detail-type": "Object Created", "source": "aws.s3", "account": "123456789012",
        "time": "2025-01-01T00:00:00Z", "region": "us-east-1", "resources": [f"arn:aws:s3:::{BUCKET}"],
        "detail": {"version": "0", "bucket": {"name": BUCKET},
                   "object": {"key": "landing/a.csv", "size": 1, "etag": "e", "sequencer": "01"},
                   "request-id": "r", "requester": "123456789012", "reason": "PutObject"},
    }
    result = handler(event, context("npa-workflow-trigger"))
    assert result == {"bucket": BUCKET, "key": "landing/a.csv", "completed": 1}
    mark = engine.ledger.watermark("trig-run", "ingest")
    assert mark.satisfied and mark.objects == 1
    assert engine.ledger.active_watches() == []


@pytest.mark.timeout(60)
def test_the_watch_handler_observes_a_finished_job_and_records_it(engine: object, tmp_path: Path) -> None:
    from functions.watch.handler import handler

    run_id = "watch-run"
    engine.ledger.begin_attempt(run_id, "quick", state="quick", attempt=1)
    submission = engine.executor.submit(JobRequest(
        name="watch-run-01-quick", step=step("quick", [sys.executable, "-c", "pass"]), env={},
        workdir=tmp_path))
    engine.ledger.record_submission(run_id, "quick", 1, job_id=submission.job_id)
    deadline = time.monotonic() + scaled(20)
    report = {}
    while time.monotonic() < deadline:
        report = handler({"id": "tick", "source": "aws.events"}, context("npa-workflow-watch"))
        if report.get("succeeded"):
            break
        time.sleep(0.2)
    assert report["succeeded"] == ["quick"], report
    attempt = engine.ledger.latest_attempt(run_id, "quick")
    assert attempt.status == WaveStatus.SUCCEEDED and attempt.job_id == submission.job_id


def test_the_skypilot_executor_is_built_on_first_use_and_needs_an_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    from npa_workflow.adapters.skypilot_api import SkyPilotError

    monkeypatch.setenv(environment.LEDGER_TABLE, "t")
    monkeypatch.setenv(environment.BUCKET, "b")
    monkeypatch.setenv(environment.EXECUTOR, "skypilot")
    monkeypatch.delenv("SKYPILOT_API_SERVER_ENDPOINT", raising=False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    wiring.clear_cache()
    engine = wiring.engine_from_environment()  # decide/trigger/inbox never touch the executor
    with pytest.raises(SkyPilotError, match="SKYPILOT_API_SERVER_ENDPOINT is not set"):
        engine.executor.find_by_name("job")
    monkeypatch.delenv(environment.BUCKET)
    with pytest.raises(wiring.WiringError, match="NPA_WORKFLOW_BUCKET"):
        wiring.engine_from_environment()


def test_the_local_job_environment_puts_this_python_first_and_points_at_the_endpoint() -> None:
    env = wiring.local_job_env({"PATH": "/usr/bin", "AWS_ENDPOINT_URL": "http://127.0.0.1:5000"})
    assert env["PATH"] == f"{Path(sys.executable).parent}:/usr/bin"
    assert env["AWS_ENDPOINT_URL"] == "http://127.0.0.1:5000" and env["AWS_DEFAULT_REGION"] == "us-east-1"
    assert env["AWS_ACCESS_KEY_ID"] == "testing"
    out = subprocess.run(["python", "-c", "import sys; print(sys.executable)"], env=env, capture_output=True,
                         text=True, check=True).stdout.strip()
    assert Path(out).parent == Path(sys.executable).parent
