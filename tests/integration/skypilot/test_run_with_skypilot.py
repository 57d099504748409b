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
    waves = report["waves"]
    assert waves and all(w["state"] == "hello" and w["status"] == "FAILED" for w in waves), waves
    assert [w["attempt"] for w in waves] == list(range(1, len(waves) + 1)), waves
    # A configuration failure is not retried, whatever --retries says: it is the run's last attempt. Under load an
    # earlier attempt may fail on the slow server itself (a lookup or launch that timed out, Wave.InfrastructureFailed),
    # which the infrastructure-recovery budget (1 by default) retries: that is the product's policy, not a retry of the
    # configuration failure. So: at most one recovery, and no attempt's job but the last ended FAILED_PRECHECKS.
    assert len(waves) <= 2, waves
    wave = waves[-1]
    assert wave["job_id"].isdigit(), waves
    message = report["error"]["message"]
    assert f"(job {wave['job_id']})" in message, (message, waves)
    assert "hello" in message and ("Cloud access" in message or "NoCloudAccess" in message), message
    api = SkyPilotApi(skypilot_server.endpoint)
    job_ids = [int(w["job_id"]) for w in waves if w["job_id"]]
    rows = api.queue(job_ids)
    assert rows and all(r.terminal for r in rows), rows
    status_of = {str(r.job_id): r.status for r in rows}
    assert status_of.get(wave["job_id"]) == "FAILED_PRECHECKS", (rows, waves)
    retried = [w for w in waves[:-1] if status_of.get(w["job_id"] or "") == "FAILED_PRECHECKS"]
    assert not retried, f"a configuration failure was retried: {retried} (all: {waves}, jobs: {rows})"
    if len(waves) > 1:
        print(f"an infrastructure failure was recovered before the configuration failure: {waves[:-1]} ({rows})")
    print(f"run on SkyPilot failed after {elapsed:.0f} s with: {message}")
