"""A whole `npa-workflow run` (real moto server, real jobs) with a canary secret: the step that prints it and
fails leaks it nowhere the engine writes — ledger, report, handler log, run metadata, CLI output — and a
variable that was not granted never reaches a step."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path

import pytest

CANARY = "canary-7Hq2!vX/k+secret=="
SPEC = """\
apiVersion: npa.workflow/v0.0.1
kind: Workflow
metadata: {name: leaky}
states:
  peek:
    run: {argv: ["PY", "-c", "import json, os; print('OTHER=' + os.environ.get('OTHER_SECRET', 'absent'))"]}
    next: leak
  leak:
    run: {argv: ["PY", "-c", "LEAK"]}
    terminal: true
""".replace("PY", sys.executable).replace(
    "LEAK", "import base64, os, sys; v = os.environ['CANARY_TOKEN']; print('token', v); "
            "print('b64', base64.b64encode(v.encode()).decode()); sys.exit(4)")


@pytest.mark.e2e
def test_a_failing_step_that_prints_a_secret_leaks_it_nowhere(tmp_path: Path) -> None:
    spec = tmp_path / "leaky.yaml"
    spec.write_text(SPEC)
    home = tmp_path / "home"
    env = {**os.environ, "NPA_WORKFLOW_HOME": str(home), "CANARY_TOKEN": CANARY, "OTHER_SECRET": "other-canary-9"}
    env.pop("AWS_ENDPOINT_URL", None)
    result = subprocess.run(
        [sys.executable, "-c", "from npa_workflow.cli.app import main; main()", "run", str(spec),
         "--secret-env", "CANARY_TOKEN", "--run-id", "leaky-1", "--retry-interval-seconds", "1"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "[redacted:CANARY_TOKEN]" in result.stdout + result.stderr  # the tail is shown, redacted
    forms = [CANARY, base64.b64encode(CANARY.encode()).decode()]
    written = {"cli output": result.stdout + result.stderr}
    for path in (home / "runs" / "leaky-1").rglob("*"):
        if path.is_file():
            written[str(path.relative_to(home))] = path.read_text(errors="replace")
    assert any("report.json" in name for name in written) and any("lambdas.log" in name for name in written)
    for name, text in written.items():
        for form in forms:
            assert form not in text, f"the secret leaked into {name}"
    # The step that was not granted OTHER_SECRET did not see it (its log is the job's own raw output).
    logs = [p.read_text() for p in (home / "jobs").glob("*.log")]
    assert any("OTHER=absent" in log for log in logs), logs
