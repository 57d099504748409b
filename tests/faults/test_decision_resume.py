"""A run that failed reading its decision is fixed by `npa-workflow run --resume` with a `--var` (README: "`--var`
may fix what failed"): the gate whose artifact could not be read is launched again, not replayed.

Through the command itself (a moto server, the compiled machine, real subprocess jobs): the example gate-loop,
one round each time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SPEC = Path(__file__).resolve().parents[2] / "specs" / "gate-loop.yaml"
CLI = [sys.executable, "-c", "from npa_workflow.cli.app import main; main()"]


def run(home: Path, *args: str) -> tuple[int, dict]:
    env = {**os.environ, "NPA_WORKFLOW_HOME": str(home)}
    env.pop("AWS_ENDPOINT_URL", None)
    done = subprocess.run([*CLI, "run", str(SPEC), "--run-id", "fix-me", "--json", *args], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.stdout.strip(), done.stderr
    return done.returncode, json.loads(done.stdout)


@pytest.mark.timeout(150)
def test_a_resume_with_a_var_relaunches_the_gate_whose_decision_was_malformed(tmp_path: Path) -> None:
    home = tmp_path / "home"
    code, failed = run(home, "--var", "gate_malformed=not-json", "--var", "gate_decision=promote")
    assert code != 0 and failed["status"] == "FAILED"
    assert failed["error"]["state"] == "gate" and "is not valid JSON" in failed["error"]["message"]
    [gate] = [w for w in failed["waves"] if w["state"] == "gate"]
    assert gate["status"] == "FAILED"  # its job exited 0, but what it wrote could not be used

    code, resumed = run(home, "--resume", "--var", "gate_malformed=", "--var", "gate_decision=promote")
    assert (code, resumed["status"]) == (0, "SUCCEEDED"), resumed["error"]
    by_state = {(w["state"], w["attempt"]): w for w in resumed["waves"]}
    assert by_state[("prepare", 1)]["replayed"] and by_state[("train", 1)]["replayed"]
    assert by_state[("gate", 2)]["status"] == "SUCCEEDED" and not by_state[("gate", 2)]["replayed"]
    assert by_state[("gate", 2)]["job_id"] != gate["job_id"]
    # one decision per visit, the latest read: the resumed gate's read replaces the malformed one of its visit
    assert [(d["state"], d["decision"]) for d in resumed["decisions"]] == [
        ("gate", "promote_checkpoint"), ("route", "promote_checkpoint")]
    assert by_state[("publish", 1)]["status"] == "SUCCEEDED"
