"""`npa-workflow run` used wrongly, through the real command in a subprocess: one line naming where, what and the
fix, exit 2 for a usage error and 1 for a failure (README: exit codes), never a traceback; SIGTERM stops a
run as Ctrl-C does, said as SIGTERM, exit 143; and a trigger that waits says for what."""

from __future__ import annotations

import json
import re
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
    start_cli,
    wait_until,
    workspace,
    write_spec,
)

from npa_workflow.embedded_aws.durable_aws import RUN_STATE_DIR, held_elsewhere  # noqa: E402
from npa_workflow.ledger import DynamoLedger  # noqa: E402
from npa_workflow.protocol.stack import LOCAL_LEDGER_TABLE  # noqa: E402

pytestmark = pytest.mark.e2e


def one_line(result, code: int) -> str:
    assert result.returncode == code, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    lines = [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert lines[0].startswith("npa-workflow run: error: ") and "(fix: " in lines[0], lines[0]
    return lines[0]


@pytest.mark.timeout(60)
def test_resume_without_a_run_id_is_a_usage_error_naming_how_to_find_it(tmp_path: Path) -> None:
    line = one_line(cli("run", str(SPECS / "fanout.yaml"), "--resume", home=tmp_path / "home", cwd=tmp_path), 2)
    assert "--run-id" in line and "npa-workflow list" in line


@pytest.mark.timeout(60)
@pytest.mark.parametrize("where", ["a-file", "/proc/npa-workflow-home"])
def test_a_home_that_cannot_be_a_folder_is_a_usage_error(tmp_path: Path, where: str) -> None:
    home = tmp_path / where if not where.startswith("/") else Path(where)
    if where == "a-file":
        home.write_text("not a folder")
    line = one_line(cli("run", str(SPECS / "fanout.yaml"), home=home, cwd=tmp_path), 2)
    assert f"$NPA_WORKFLOW_HOME={home}: " in line and "NPA_WORKFLOW_HOME at a folder" in line
    assert "file, not a folder" in line if where == "a-file" else "cannot create it" in line


@pytest.mark.timeout(90)
def test_resuming_a_run_with_another_workflows_spec_names_the_runs_own_spec(tmp_path: Path) -> None:
    home = tmp_path / "home"
    first = cli("run", str(SPECS / "fanout.yaml"), "--run-id", "fan-1", "--var", "shard_sleep=0", "--json",
                home=home, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    # sweep.yaml has no shard_sleep: said as the wrong spec, not as a --var that no token of sweep.yaml reads
    line = one_line(cli("run", str(SPECS / "sweep.yaml"), "--resume", "--run-id", "fan-1", home=home, cwd=tmp_path),
                    2)
    assert "run 'fan-1' is a run of workflow 'fanout'" in line and "not 'sweep'" in line
    assert f"npa-workflow run {SPECS / 'fanout.yaml'} --resume --run-id fan-1" in line
    assert "--var" not in line


LONG_STEP = """\
    config:
      bucket: npa-workflow-examples
      prefix: "long/{{run.id}}"
    initial: a
    states:
      a:
        toolRef: examples.util.step
        terminal: true
        params: {step_sleep: "120", step_out_uri: "s3://{{config.bucket}}/{{config.prefix}}/a.json"}
        outputs: [{uri: "{{config.step_out_uri}}"}]
    """


@pytest.mark.timeout(120)
def test_a_held_run_is_refused_before_anything_starts_and_sigterm_stops_it_as_ctrl_c_does(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    spec = write_spec(ws, "long", LONG_STEP)
    home, run_id = tmp_path / "home", "long-1"
    run_dir = home / "runs" / run_id
    proc = start_cli("run", str(spec), "--run-id", run_id, "--json", home=home, cwd=ws)
    try:
        def a_running() -> bool:
            meta = json.loads((run_dir / "meta.json").read_text())
            return bool(meta["executions"]) and bool(list((home / "jobs").glob("*.json")))

        wait_until(a_running, 60, "a never started")
        assert held_elsewhere(run_dir / RUN_STATE_DIR)
        refused = cli("run", str(spec), "--resume", "--run-id", run_id, home=home, cwd=ws)
        line = one_line(refused, 1)  # the refusal is the only line: no "local AWS (moto) at ..." before it
        assert f"{run_dir} is in use by another npa-workflow process" in line
        assert proc.poll() is None, "the refused resume disturbed the run"

        proc.send_signal(signal.SIGTERM)  # as `timeout` or a service manager stops it
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:  # a failed assertion above: Ctrl-C, so that its job does not outlive the test
            proc.send_signal(signal.SIGINT)
            try:
                proc.communicate(timeout=30)
            except Exception:
                proc.kill()
                proc.communicate()
                raise
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "Traceback" not in err
    report = json.loads(out)
    check_shape(report)
    assert report["status"] == "ABORTED"
    assert report["error"]["state"] is None and report["error"]["message"] == "interrupted (SIGTERM)"
    a = only(report, "a")
    assert a["status"] == "CANCELLED"
    assert job_gone(home, a["job_id"]), "SIGTERM left a's process running"


@pytest.mark.timeout(90)
def test_a_waiting_trigger_says_once_where_objects_must_land_and_how(tmp_path: Path) -> None:
    port, run_id = free_port(), "wait-1"
    endpoint = f"http://127.0.0.1:{port}"
    landing = f"s3://npa-workflow-local/trigger/{run_id}/landing/"
    proc = start_cli("run", str(SPECS / "trigger.yaml"), "--run-id", run_id, "--local-port", str(port),
                     home=tmp_path / "home", cwd=tmp_path)  # stdout is a pipe: plain lines
    try:
        ledger = DynamoLedger(LOCAL_LEDGER_TABLE, aws_client("dynamodb", endpoint))
        wait_until(lambda: ledger.watermark(run_id, "ingest"), 60, "the trigger never started waiting")
        s3 = aws_client("s3", endpoint)
        s3.put_object(Bucket="npa-workflow-local", Key=f"trigger/{run_id}/landing/a.csv", Body=b"a,1\n")
        wait_until(lambda: ledger.watermark(run_id, "ingest").objects == 1, 30, "the landed object was not counted")
        time.sleep(1.0)  # a few refreshes of the view after the count changed
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.communicate(timeout=30)
    assert proc.returncode == 143, err
    said = [line for line in out.splitlines() if "waits for objects" in line]
    assert len(said) == 1, out  # once, not at every new count
    # 0, or 1 when the upload came before the view's first look (it refreshes every half second)
    assert re.search(rf"ingest waits for objects under {re.escape(landing)}: [01] of 2 landed; ", said[0]), said[0]
    assert f"aws --endpoint-url {endpoint} s3 cp FILE {landing}" in said[0]
