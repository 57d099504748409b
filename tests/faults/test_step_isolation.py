"""A local step cannot reach the control plane (issue 18, item 3): its credentials reach the S3 places its run
names, through the step gate (`embedded_aws.step_gate`), never the ledger, Step Functions, the inbox, the frozen runs
or another run's objects. Real step subprocesses, real moto behind the gate, real boto3 clients."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from npa_workflow.embedded_aws.moto_server import start_moto_server
from npa_workflow.embedded_aws.step_gate import GRANTS_DIR, Grant, StepAccess, start_step_gate
from npa_workflow.engine.ports import JobRequest, TrackedJob
from npa_workflow.local.runtime import LocalRunOptions, run_local
from npa_workflow.local_jobs.job_executor import LocalJobExecutor

from .conftest import PY, plan_step, wait_terminal, wait_until

# The step: every attempt a hostile step would make, each answer written down; then its own output.
PROBE = r'''
import json, os, sys
import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

own, out = sys.argv[1], sys.argv[2]
cfg = Config(retries={"max_attempts": 1})
bucket, key = own[len("s3://"):].split("/", 1)
answers = {"endpoint": os.environ.get("AWS_ENDPOINT_URL"), "key": os.environ.get("AWS_ACCESS_KEY_ID")}

def attempt(name, call):
    try:
        call()
        answers[name] = "allowed"
    except ClientError as exc:
        answers[name] = exc.response["Error"]["Code"]
    except Exception as exc:
        answers[name] = type(exc).__name__

ddb = boto3.client("dynamodb", config=cfg)
sfn = boto3.client("stepfunctions", config=cfg)
s3 = boto3.client("s3", config=cfg)
attempt("ledger_scan", lambda: ddb.scan(TableName="npa-workflow-ledger"))
attempt("list_tables", lambda: ddb.list_tables())
attempt("list_state_machines", lambda: sfn.list_state_machines())
attempt("send_task_success", lambda: sfn.send_task_success(taskToken="another-runs-token", output="{}"))
frozen = "runs/" + os.environ["NPA_WORKFLOW_RUN_ID"] + "/run.json"
attempt("frozen_run", lambda: s3.get_object(Bucket=bucket, Key=frozen))
attempt("inbox_write", lambda: s3.put_object(Bucket=bucket, Key="inbox/forged.yaml", Body=b"x"))
attempt("other_run_read", lambda: s3.get_object(Bucket=bucket, Key="probe/other-run/own.json"))
attempt("list_whole_bucket", lambda: s3.list_objects_v2(Bucket=bucket))
attempt("list_buckets", lambda: s3.list_buckets())
attempt("own_write", lambda: s3.put_object(Bucket=bucket, Key=key, Body=b'{"ok": true}'))
attempt("own_read", lambda: s3.get_object(Bucket=bucket, Key=key)["Body"].read())
attempt("own_list", lambda: s3.list_objects_v2(Bucket=bucket, Prefix=key.rsplit("/", 1)[0] + "/"))
json.dump(answers, open(out, "w"))
'''


SPEC = """\
apiVersion: npa.workflow/v0.0.1
kind: Workflow
metadata: {name: probe}
initial: probe
states:
  probe:
    run: {argv: [python, probe.py, "s3://{{run.bucket}}/probe/{{run.id}}/own.json", "{{config.answers}}"]}
    outputs: [{uri: "s3://{{run.bucket}}/probe/{{run.id}}/own.json"}]
    terminal: true
"""


@pytest.mark.timeout(120)
def test_a_real_step_reaches_its_own_outputs_and_nothing_of_the_control_plane(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "probe.py").write_text(PROBE)
    spec = ws / "probe.yaml"
    answers_path = tmp_path / "answers.json"  # outside the code: the step runs in a staged copy of its folder
    config = f"\nconfig: {{answers: {json.dumps(str(answers_path))}}}"
    spec.write_text(SPEC.replace("metadata: {name: probe}", "metadata: {name: probe}" + config))
    report = run_local(LocalRunOptions(spec=spec, home=tmp_path / "home", tick_seconds=0.2))
    answers = json.loads(answers_path.read_text())
    assert report["status"] == "SUCCEEDED", report.get("error")
    assert answers["key"].startswith("NPASTEP") and answers["key"] != "testing"
    for name in ("ledger_scan", "list_tables", "list_state_machines", "send_task_success"):
        assert answers[name] == "AccessDeniedException", (name, answers)
    for name in ("frozen_run", "inbox_write", "other_run_read", "list_whole_bucket", "list_buckets"):
        assert answers[name] == "AccessDenied", (name, answers)
    assert answers["own_write"] == answers["own_read"] == answers["own_list"] == "allowed", answers
    # The job ended, so its grant was revoked: the runtime keeps no key of a job that no longer runs.
    grants = [p for p in (tmp_path / "home").rglob(f"{GRANTS_DIR}/*") if p.is_file()]
    assert not grants and any((tmp_path / "home").rglob(GRANTS_DIR)), grants


@pytest.fixture
def gated(tmp_path: Path):
    server = start_moto_server()
    gate = start_step_gate(server.wsgi_app, tmp_path / "grants")
    try:
        yield server, gate
    finally:
        gate.stop()
        server.stop()


def _client(service: str, endpoint: str, env: dict[str, str] | None = None):
    env = env or {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    return boto3.client(service, endpoint_url=endpoint, region_name="us-east-1",
                        aws_access_key_id=env["AWS_ACCESS_KEY_ID"], aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
                        config=Config(retries={"max_attempts": 1}))


@pytest.mark.timeout(60)
def test_one_runs_key_cannot_touch_another_runs_objects_or_the_reserved_prefixes(gated, tmp_path: Path) -> None:
    server, gate = gated
    engine_s3 = _client("s3", server.endpoint_url)
    engine_s3.create_bucket(Bucket="engine")
    engine_s3.create_bucket(Bucket="data")
    for key in ("w/run-a/out.json", "w/run-b/out.json", "code/abc/step.py", "runs/run-a/spec.yaml"):
        engine_s3.put_object(Bucket="engine", Key=key, Body=b"x")
    access = StepAccess(gate.grants_dir, gate.endpoint_url, "engine", "us-east-1")
    a = access.credentials("run-a", "w", ["--code s3://engine/code/abc/ --in s3://data/in/x.csv,s3://engine/top.json"])
    s3 = _client("s3", gate.endpoint_url, a)

    def code(call) -> str:
        try:
            call()
            return "allowed"
        except ClientError as exc:
            return exc.response["Error"]["Code"]

    assert code(lambda: s3.get_object(Bucket="engine", Key="w/run-a/out.json")) == "allowed"  # its run's prefix
    assert code(lambda: s3.get_object(Bucket="engine", Key="w/run-b/out.json")) == "AccessDenied"
    assert code(lambda: s3.list_objects_v2(Bucket="engine", Prefix="w/")) == "AccessDenied"
    assert code(lambda: s3.get_object(Bucket="engine", Key="code/abc/step.py")) == "allowed"  # named, read-only
    assert code(lambda: s3.put_object(Bucket="engine", Key="code/abc/step.py", Body=b"evil")) == "AccessDenied"
    assert code(lambda: s3.get_object(Bucket="engine", Key="runs/run-a/spec.yaml")) == "AccessDenied"
    assert code(lambda: s3.put_object(Bucket="data", Key="in/y.csv", Body=b"1")) == "allowed"  # the named folder
    assert code(lambda: s3.put_object(Bucket="data", Key="elsewhere.csv", Body=b"1")) == "AccessDenied"
    assert code(lambda: s3.put_object(Bucket="engine", Key="top.json", Body=b"1")) == "allowed"  # a root object
    assert code(lambda: s3.put_object(Bucket="engine", Key="top2.json", Body=b"1")) == "AccessDenied"
    assert code(lambda: s3.put_object(Bucket="engine", Key="w/run-a/../run-b/out.json", Body=b"1")) == "AccessDenied"
    assert code(lambda: s3.copy_object(Bucket="engine", Key="w/run-a/copy.json",
                                       CopySource={"Bucket": "engine", "Key": "w/run-b/out.json"})) == "AccessDenied"
    assert code(lambda: s3.delete_objects(Bucket="engine", Delete={"Objects": [
        {"Key": "w/run-a/out.json"}, {"Key": "w/run-b/out.json"}]})) == "AccessDenied"
    assert engine_s3.get_object(Bucket="engine", Key="w/run-b/out.json")["Body"].read() == b"x"
    assert engine_s3.get_object(Bucket="engine", Key="code/abc/step.py")["Body"].read() == b"x"
    # A made-up key, and the engine's own credentials, are nobody at the gate.
    for env in ({"AWS_ACCESS_KEY_ID": "NPASTEP" + "0" * 32, "AWS_SECRET_ACCESS_KEY": "x"}, None):
        assert code(lambda env=env: _client("s3", gate.endpoint_url, env).get_object(
            Bucket="engine", Key="w/run-a/out.json")) == "AccessDenied"
    grant = Grant.from_json(json.loads((gate.grants_dir / f"{a['AWS_ACCESS_KEY_ID']}.json").read_text()))
    assert grant.run_id == "run-a" and (gate.grants_dir / f"{a['AWS_ACCESS_KEY_ID']}.json").stat().st_mode & 0o077 == 0


@pytest.mark.timeout(60)
def test_a_revoked_key_reaches_nothing_even_after_the_gate_has_honoured_it(gated) -> None:
    server, gate = gated
    _client("s3", server.endpoint_url).create_bucket(Bucket="engine")
    access = StepAccess(gate.grants_dir, gate.endpoint_url, "engine", "us-east-1")
    keys = access.credentials("run-a", "w", [])
    access.bind("local-0123456789abcdef", keys["AWS_ACCESS_KEY_ID"])
    s3 = _client("s3", gate.endpoint_url, keys)
    s3.put_object(Bucket="engine", Key="w/run-a/out.json", Body=b"1")  # honoured, so the gate has it kept
    access.revoke(["local-0123456789abcdef"])
    with pytest.raises(ClientError) as denied:
        s3.get_object(Bucket="engine", Key="w/run-a/out.json")
    assert denied.value.response["Error"]["Code"] == "AccessDenied"
    assert not [p for p in gate.grants_dir.rglob("*") if p.is_file()]
    access.revoke(["local-0123456789abcdef", "../../etc/passwd"])  # again, and a name that is no job id: nothing


@pytest.mark.timeout(60)
def test_a_cancelled_job_s_key_is_revoked_and_a_running_one_s_is_kept(tmp_path: Path) -> None:
    access = StepAccess(tmp_path / "grants", "http://127.0.0.1:1", "engine", "us-east-1")
    jobs = LocalJobExecutor(tmp_path / "state", cancel_grace_seconds=0.5, step_access=access)
    seen = tmp_path / "key"
    code = f"import os, time; open({str(seen)!r}, 'w').write(os.environ['AWS_ACCESS_KEY_ID']); time.sleep(60)"
    job_id = jobs.submit(JobRequest(name="held", step=plan_step([PY, "-c", code]), env={})).job_id
    wait_until(lambda: seen.exists() and seen.read_text(), 30)
    grant = access.grants_dir / f"{seen.read_text()}.json"
    observed = jobs.observe([TrackedJob("held", job_id, None)])
    assert observed["held"].outcome == "running" and grant.exists()  # a live job keeps its key
    jobs.cancel([job_id])
    assert not grant.exists() and not (access.grants_dir / "jobs" / job_id).exists()
    wait_terminal(jobs.local, job_id)


def test_a_pointer_the_disk_refuses_does_not_fail_the_started_job_s_launch(tmp_path: Path) -> None:
    access = StepAccess(tmp_path / "grants", "http://127.0.0.1:1", "engine", "us-east-1")
    keys = access.credentials("run-a", "w", [])
    (tmp_path / "grants" / "jobs").write_text("not a folder")  # mkdir and the write under it fail, as on a full disk
    access.bind("local-0123456789abcdef", keys["AWS_ACCESS_KEY_ID"])  # no error: the job has already started
    assert (tmp_path / "grants" / f"{keys['AWS_ACCESS_KEY_ID']}.json").exists()  # its grant holds; one file left


@pytest.mark.timeout(60)
def test_the_gate_refuses_moto_s_own_api(gated) -> None:
    import urllib.error
    import urllib.request

    _, gate = gated
    request = urllib.request.Request(f"{gate.endpoint_url}/moto-api/reset", method="POST", data=b"")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=5)
    assert refused.value.code == 403
