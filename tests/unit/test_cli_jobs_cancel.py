"""`run --no-cancel-on-timeout` locally: the timed-out job outlives `run`, which names it and the command
(`npa-workflow jobs cancel JOB_ID`) that then stops it by exact id."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from deadlines import deadline as scaled

from npa_workflow.cli.progress import left_running

CLI = [sys.executable, "-c", "from npa_workflow.cli.app import main; main()"]


def cli(*args: str, home: Path, cwd: Path, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NPA_WORKFLOW_HOME": str(home)}
    env.pop("AWS_ENDPOINT_URL", None)
    return subprocess.run([*CLI, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def test_a_timed_out_job_keeps_running_after_run_and_the_named_command_cancels_it(tmp_path):
    home, pid_file = tmp_path / "home", tmp_path / "step.pid"
    step = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(120)"
    spec = tmp_path / "nap.yaml"
    spec.write_text("apiVersion: npa.workflow/v0.0.1\nkind: Workflow\nmetadata: {name: nap}\nstates:\n"
                    f"  nap: {{run: {{argv: {json.dumps([sys.executable, '-c', step])}}}, terminal: true}}\n")
    pid = None
    try:
        result = cli("run", str(spec), "--max-wait-seconds", "3", "--no-cancel-on-timeout", home=home, cwd=tmp_path)
        assert result.returncode == 1, result.stdout + result.stderr
        out = result.stdout + result.stderr
        # The cleanup's timeout branch (the execution fails with Wave.TimedOut) wrote this sentence.
        assert "timed out: it ran past its deadline of 3 s" in out, out
        found = re.search(r"job\(s\) still running \(--no-cancel-on-timeout\): (local-[0-9a-f]+); "
                          r"stop with `npa-workflow jobs cancel (local-[0-9a-f]+)`", out)
        assert found and found[1] == found[2], out
        job = found[1]
        report = json.loads(next((home / "runs").glob("*/report.json")).read_text())
        assert report["status"] == "FAILED" and job in report["error"]["message"]
        # The wave's row says its job still runs, and how to stop it (not the ledger's FAILED).
        [wave] = report["waves"]
        assert wave["status"] == "FAILED" and wave["left_running"] is True and wave["job_id"] == job
        [row] = [line for line in result.stdout.splitlines() if job in line and "nap" in line and "│" in line]
        assert "LEFT_RUNNING" in row and "FAILED" not in row, result.stdout
        assert f"nap: job(s) still running (--no-cancel-on-timeout): {job}; stop with `npa-workflow jobs cancel " \
               f"{job}`" in result.stdout
        assert [w["job_id"] for w in left_running(report, home)] == [job]

        pid = int(pid_file.read_text())
        assert alive(pid), "the timed-out job died with `run` although --no-cancel-on-timeout was given"
        record = json.loads((home / "jobs" / f"{job}.json").read_text())
        assert record.get("status") not in ("CANCELLED", "FAILED", "SUCCEEDED")

        cancelled = cli("jobs", "cancel", job, "--grace", "1", home=home, cwd=tmp_path)
        assert cancelled.returncode == 0, cancelled.stderr
        assert cancelled.stdout == f"{job}: CANCELLED (no process of the job is left)\n"
        assert not alive(pid)
        assert left_running(report, home) == []  # once stopped, the row is the ledger's FAILED again
        again = cli("jobs", "cancel", "local-0000", home=home, cwd=tmp_path)
        assert again.returncode == 1 and "no local job 'local-0000'" in again.stderr
    finally:
        if pid is None and pid_file.exists():
            pid = int(pid_file.read_text() or 0) or None
        if pid is not None and alive(pid):
            os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + scaled(5)
            while alive(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
