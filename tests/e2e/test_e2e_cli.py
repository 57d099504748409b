"""End-to-end runs through the real `npa-workflow run` command in a subprocess: a trigger fed by uploads to
the printed local endpoint, Ctrl-C then `--resume`, and the errors a user can cause (no traceback)."""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from e2e_support import (  # noqa: E402
    SPECS,
    aws_client,
    check_shape,
    cli,
    free_port,
    job_gone,
    only,
    run,
    start_cli,
    ts,
    wait_until,
    workspace,
    write_spec,
)

from npa_workflow.ledger import DynamoLedger  # noqa: E402
from npa_workflow.protocol.stack import LOCAL_LEDGER_TABLE  # noqa: E402

pytestmark = pytest.mark.e2e


@pytest.mark.timeout(120)
def test_a_trigger_waits_until_the_objects_land_and_records_the_watermark(tmp_path: Path) -> None:
    port, run_id = free_port(), "trigger-e2e"
    endpoint = f"http://127.0.0.1:{port}"
    proc = start_cli("run", str(SPECS / "trigger.yaml"), "--run-id", run_id, "--local-port", str(port), "--json",
                     home=tmp_path / "home", cwd=tmp_path)
    try:
        ledger = DynamoLedger(LOCAL_LEDGER_TABLE, aws_client("dynamodb", endpoint))
        s3 = aws_client("s3", endpoint)
        landing = f"trigger/{run_id}/landing/"
        wait_until(lambda: ledger.watermark(run_id, "ingest"), 60, "the trigger never started waiting")
        s3.put_object(Bucket="npa-workflow-local", Key=landing + "a.csv", Body=b"a,1\n")
        # the run has seen the first object (counted it) and goes on waiting for the second
        mark = wait_until(lambda: (m := ledger.watermark(run_id, "ingest")) is not None and m.objects == 1 and m,
                          30, "the landed object was not counted")
        assert not mark.satisfied
        assert proc.poll() is None, "the run did not wait for the second object"
        landed = time.time()
        s3.put_object(Bucket="npa-workflow-local", Key=landing + "b.csv", Body=b"b,2\n")
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert f"local AWS (moto) at {endpoint}" in err
    assert "Traceback" not in err
    report = json.loads(out)  # --json: stdout is the report and nothing else
    check_shape(report)
    assert report["status"] == "SUCCEEDED"
    assert report["watermarks"] == [
        {"state": "ingest", "uri": f"s3://npa-workflow-local/{landing}", "objects": 2, "min_objects": 2,
         "waiting": False}]
    assert ts(only(report, "ingest")["started_at"]) >= landed - 1  # second precision of the upload clock
    assert [w["state"] for w in report["waves"]] == ["ingest", "publish"]


TWO_STEPS = """\
    config:
      bucket: npa-workflow-examples
      prefix: "twostep/{{run.id}}"
      b_sleep: "120"
    initial: a
    states:
      a:
        toolRef: examples.util.step
        params: {step_out_uri: "s3://{{config.bucket}}/{{config.prefix}}/a.json"}
        outputs: [{uri: "{{config.step_out_uri}}"}]
        next: b
      b:
        toolRef: examples.util.step
        terminal: true
        params: {step_sleep: "{{config.b_sleep}}", step_out_uri: "s3://{{config.bucket}}/{{config.prefix}}/b.json"}
        outputs: [{uri: "{{config.step_out_uri}}"}]
    """


@pytest.mark.timeout(150)
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["ctrl-c", "kill-9"])
def test_a_killed_run_resumes_without_rerunning_its_succeeded_waves(tmp_path: Path, sig: signal.Signals) -> None:
    ws = workspace(tmp_path)
    spec = write_spec(ws, "twostep", TWO_STEPS)
    home, port, run_id = tmp_path / "home", free_port(), "resume-e2e"
    proc = start_cli("run", str(spec), "--run-id", run_id, "--local-port", str(port), "--json", home=home, cwd=ws)
    try:
        ledger = DynamoLedger(LOCAL_LEDGER_TABLE, aws_client("dynamodb", f"http://127.0.0.1:{port}"))

        def b_running() -> bool:
            waves = {w.state: w for w in ledger.attempts(run_id)}
            return "b" in waves and waves["b"].job_id is not None and waves["a"].status.value == "SUCCEEDED"

        wait_until(b_running, 60, "b never started")
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert "Traceback" not in err
    assert (home / "runs" / run_id / "aws" / "state.sqlite").is_file()
    if sig == signal.SIGINT:
        # Ctrl-C: StopExecution, b's job cancelled by exact id, the report says ABORTED, exit 130.
        assert proc.returncode == 130, err
        stopped = json.loads(out)
        check_shape(stopped)
        assert stopped["status"] == "ABORTED"
        assert stopped["error"]["state"] is None and "interrupted" in stopped["error"]["message"]
        assert only(stopped, "a")["status"] == "SUCCEEDED"
        b_before = only(stopped, "b")
        assert b_before["status"] == "CANCELLED"
        assert job_gone(home, b_before["job_id"]), "Ctrl-C left b's process running"
    else:
        assert proc.returncode == -signal.SIGKILL

    resumed = run(spec, home, run_id=run_id, resume=True, variables={"b_sleep": "0"})
    assert resumed["status"] == "SUCCEEDED", resumed["error"]
    assert resumed["execution_arn"].endswith(f":{run_id}-r2")
    a = only(resumed, "a")
    assert a["replayed"] is True and a["attempt"] == 1 and a["status"] == "SUCCEEDED"
    b1, b2 = [w for w in resumed["waves"] if w["state"] == "b"]
    assert (b1["attempt"], b1["status"], b1["replayed"]) == (1, "CANCELLED", False)
    assert job_gone(home, b1["job_id"])  # after kill -9, the resume cancelled the orphaned job first
    assert (b2["attempt"], b2["status"], b2["replayed"]) == (2, "SUCCEEDED", False)
    assert b2["job_id"] != b1["job_id"]
    assert ts(b2["started_at"]) > ts(b1["ended_at"]) - 1  # ended_at of a cancel is second precision


@pytest.mark.timeout(60)
def test_user_errors_are_reported_without_a_traceback(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    home = tmp_path / "home"
    broken = write_spec(ws, "broken", """\
        initial: nowhere
        states:
          a: {run: {argv: [python, -c, "pass"]}, terminal: true}
        """)
    result = cli("run", str(broken), home=home, cwd=ws)
    assert result.returncode == 1
    assert f"{broken}: " in result.stderr and "nowhere" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout

    runtime_only = ws / "runtime-only.yaml"
    runtime_only.write_text((SPECS / "gate-loop.yaml").read_text().replace(
        "  name: gate-loop\n", "  name: gate-loop\n  executionMode: runtime\n"))
    result = cli("run", str(runtime_only), "--assume-decision", "promote", "--catalog", str(SPECS / "tools.yaml"),
                 home=home, cwd=ws)
    assert result.returncode == 1
    assert "executionMode: runtime" in result.stderr and "--assume-decision" in result.stderr
    assert "Traceback" not in result.stderr

    result = cli("run", str(SPECS / "fanout.yaml"), "--resume", "--run-id", "never-ran", home=home, cwd=ws)
    assert result.returncode == 1
    assert "no local run 'never-ran' to resume" in result.stderr
    assert "Traceback" not in result.stderr

    result = cli("run", str(SPECS / "fanout.yaml"), "--run-id", "bad id!", home=home, cwd=ws)
    # an option's value refused before anything starts: a usage error (exit 2), as plan's and render's --run-id
    assert result.returncode == 2 and "run id 'bad id!' is not valid" in result.stderr
    assert not (home / "runs").exists() or not any((home / "runs").iterdir())
