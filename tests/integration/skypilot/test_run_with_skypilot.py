"""`npa-workflow run --executor skypilot` against the real SkyPilot 0.14.1 API server.

With no cloud the job ends FAILED_PRECHECKS: the run must fail fast with the server's reason
(a configuration failure: no retry), record the SkyPilot job id, and leave no job running.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from npa_workflow.adapters.skypilot_api import SkyPilotApi

# One real server per test session: keep its tests on one xdist worker.
pytestmark = [pytest.mark.skypilot, pytest.mark.xdist_group("skypilot-server")]

SPEC = """\
apiVersion: npa.workflow/v0.0.1
kind: Workflow
metadata: {name: sky-one}
states:
  hello:
    run: {shell: "echo hello from npa-workflow"}
    terminal: true
"""


def test_a_run_on_skypilot_fails_fast_records_the_job_and_leaves_nothing_running(skypilot_server, tmp_path: Path):
    spec = tmp_path / "one.yaml"
    spec.write_text(SPEC)
    env = {**os.environ, "NPA_WORKFLOW_HOME": str(tmp_path / "state")}
    env.pop("SKYPILOT_SERVICE_ACCOUNT_TOKEN", None)
    started = time.monotonic()
    result = subprocess.run(
        [str(Path(sys.executable).parent / "npa-workflow"), "run", str(spec), "--executor", "skypilot",
         "--skypilot-endpoint", skypilot_server.endpoint, "--run-id", "sky-one-1", "--retries", "2",
         "--max-wait-seconds", "600", "--json"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=420,
    )
    elapsed = time.monotonic() - started
    assert result.returncode == 1, result.stdout + result.stderr + skypilot_server.log_tail()
    assert "Traceback" not in result.stderr
    report = json.loads(result.stdout)
    assert report["status"] == "FAILED"
    [wave] = report["waves"]  # a configuration failure is not retried, whatever --retries says
    assert wave["state"] == "hello" and wave["status"] == "FAILED" and wave["job_id"].isdigit()
    message = report["error"]["message"]
    assert "hello" in message and ("Cloud access" in message or "NoCloudAccess" in message), message
    api = SkyPilotApi(skypilot_server.endpoint)
    rows = api.queue([int(wave["job_id"])])
    assert rows and all(r.terminal for r in rows), rows
    print(f"run on SkyPilot failed after {elapsed:.0f} s with: {message}")
