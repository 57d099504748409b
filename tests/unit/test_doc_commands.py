"""Commands the docs show run as written (issue 21: `docs/operating.md`'s render example failed as written)."""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import yaml
from typer.testing import CliRunner

from npa_workflow.cli.app import app

REPO = Path(__file__).resolve().parents[2]


def test_the_operating_guides_render_with_a_code_bucket_shows_what_it_says(monkeypatch) -> None:
    text = (REPO / "docs" / "operating.md").read_text()
    [command] = re.findall(r"`(npa-workflow render [^`]*--code-bucket [^`]*)`", text)
    monkeypatch.chdir(REPO)
    monkeypatch.delenv("NPA_WORKFLOW_CATALOG", raising=False)
    result = CliRunner().invoke(app, shlex.split(command)[1:], env={**os.environ})
    assert result.exit_code == 0, result.output
    bucket = shlex.split(command)[-1]
    # one SkyPilot pipeline per job, each `# ---- job NAME` then its header and its task
    jobs = re.split(r"^# ---- job .*$", result.stdout, flags=re.MULTILINE)
    tasks = [d for job in jobs for d in yaml.safe_load_all(job) if d]
    train = next(t for t in tasks if t.get("name") == "train")
    uri = train["envs"]["NPA_WORKFLOW_CODE_URI"]
    assert uri.startswith(f"s3://{bucket}/code/") and train["file_mounts"] == {"/npa-workflow/code": uri}
    shown = re.search(r"NPA_WORKFLOW_CODE_URI: (\S+)…/", text).group(1)  # the abridged digest the guide shows
    assert uri.startswith(shown)
