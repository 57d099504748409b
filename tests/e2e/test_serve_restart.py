"""`serve` killed with -9 and restarted on the same home knows every run of the previous process: a finished run
keeps its status and waves, a run whose execution died with the process is ABORTED with the reason and its job
is cancelled by exact id (no orphan writes into the new stack), and no inbox object is delivered twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from e2e_support import (  # noqa: E402
    CLI,
    SPECS,
    code_folder,
    free_port,
    group_alive,
    job_gone,
    job_record,
    stop_process,
    wait_until,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(150), pytest.mark.xdist_group("serve")]


def _serve(home: Path, port: int) -> subprocess.Popen[str]:
    env = {**os.environ, "NPA_WORKFLOW_HOME": str(home)}
    env.pop("AWS_ENDPOINT_URL", None)
    log = open(home / "serve.out", "a")  # noqa: SIM115 - the child owns it; closed when the test ends
    proc = subprocess.Popen([*CLI, "serve", "--port", str(port), "--catalog", str(SPECS / "tools.yaml")],
                            env=env, stdout=log, stderr=subprocess.STDOUT, text=True)
    log.close()
    wait_until(lambda: proc.poll() is None and "endpoint" in (home / "serve.out").read_text().split(
        "--- restart ---")[-1], 60, "serve printed no endpoint")
    return proc


def _cli(home: Path, port: int, *args: str) -> dict[str, Any]:
    env = {**os.environ, "NPA_WORKFLOW_HOME": str(home), "NPA_WORKFLOW_ENDPOINT": f"http://127.0.0.1:{port}"}
    env.pop("AWS_ENDPOINT_URL", None)
    done = subprocess.run([*CLI, *args, "--json"], env=env, capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return json.loads(done.stdout)


def test_serve_killed_then_restarted_accounts_for_every_run(tmp_path: Path) -> None:
    home, port = tmp_path / "home", free_port()
    home.mkdir()
    hang = code_folder(tmp_path) / "hang-restart.yaml"  # beside the step code submit stages
    hang.write_text("apiVersion: npa.workflow/v0.0.1\nkind: Workflow\nmetadata: {name: hang-restart}\n"
                    + textwrap.dedent("""\
        config: {bucket: npa-workflow-examples, prefix: "hang/{{run.id}}"}
        initial: work
        states:
          work:
            toolRef: examples.util.step
            terminal: true
            params: {step_sleep: "600", step_out_uri: "s3://{{config.bucket}}/{{config.prefix}}/work.json"}
        """))
    quick = code_folder(tmp_path) / "quick-restart.yaml"
    quick.write_text("apiVersion: npa.workflow/v0.0.1\nkind: Workflow\nmetadata: {name: quick-restart}\n"
                     + textwrap.dedent("""\
        config: {bucket: npa-workflow-examples, prefix: "quick/{{run.id}}"}
        initial: a
        states:
          a: {toolRef: examples.util.step, next: b,
              params: {step_out_uri: "s3://{{config.bucket}}/{{config.prefix}}/a.json"}}
          b: {toolRef: examples.util.step, terminal: true,
              params: {step_out_uri: "s3://{{config.bucket}}/{{config.prefix}}/b.json"}}
        """))
    proc = _serve(home, port)
    try:
        done = _cli(home, port, "submit", str(quick), "--wait")
        assert done["status"] == "SUCCEEDED"
        hanging = _cli(home, port, "submit", str(hang))["run_id"]

        def running_job() -> str | None:
            waves = _cli(home, port, "status", hanging)["waves"]
            return waves[0]["job_id"] if waves and waves[0]["status"] == "RUNNING" and waves[0]["job_id"] else None

        job_id = wait_until(running_job, 60, "the hanging job did not start", interval=0.5)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        assert group_alive(int(job_record(home, job_id)["pgid"])), "the job should outlive the killed serve"

        with open(home / "serve.out", "a") as out:
            out.write("--- restart ---\n")
        proc = _serve(home, port)
        finished = _cli(home, port, "status", done["run_id"])
        assert finished["status"] == "SUCCEEDED"
        assert [(w["state"], w["status"]) for w in finished["waves"]] == [("a", "SUCCEEDED"), ("b", "SUCCEEDED")]
        orphan = _cli(home, port, "status", hanging)
        assert orphan["status"] == "ABORTED", orphan
        assert "serve" in orphan["error"]["message"] and "ended before the run did" in orphan["error"]["message"]
        assert orphan["waves"][0]["status"] == "CANCELLED"
        assert job_gone(home, job_id), "the orphaned job still runs after the restart"
        runs = {r["run_id"]: r["status"] for r in _cli(home, port, "list")["runs"]}
        assert runs[done["run_id"]] == "SUCCEEDED" and runs[hanging] == "ABORTED"
        # The inbox objects of both runs were delivered by the first serve: the restart starts nothing again.
        restart_log = (home / "serve.out").read_text().split("--- restart ---")[-1]
        assert "inbox " not in restart_log, restart_log
    finally:
        stop_process(proc)
