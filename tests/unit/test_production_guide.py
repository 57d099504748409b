"""docs/production.md's claims a test can check without an account: a cluster's task reaches only S3 (the staged
code and the spec's own URIs) and is told of no ledger table, state machine or function."""

from __future__ import annotations

import os
import re
from pathlib import Path

import yaml
from typer.testing import CliRunner

from npa_workflow.cli.app import app
from npa_workflow.protocol import environment

REPO = Path(__file__).resolve().parents[2]
BUCKET = "my-engine-bucket"
# what a job must not be told: the engine's own resources (protocol.environment's names for the functions)
ENGINE_ONLY = {environment.LEDGER_TABLE, environment.STATE_MACHINES, environment.MACHINE_ARN_PREFIX,
               environment.AD_HOC_ROLE_ARN, environment.SKYPILOT_TOKEN_SECRET_ARN, environment.STEP_SECRETS_ARN}


def _tasks(spec: Path) -> list[dict]:
    result = CliRunner().invoke(app, ["render", str(spec), "--code-bucket", BUCKET], env={**os.environ})
    assert result.exit_code == 0, result.output
    jobs = re.split(r"^# ---- job .*$", result.stdout, flags=re.MULTILINE)
    return [d for job in jobs for d in yaml.safe_load_all(job) if d and "run" in d]


def test_every_example_task_reaches_only_s3_and_knows_no_ledger_machine_or_function(monkeypatch) -> None:
    monkeypatch.chdir(REPO)
    guide = (REPO / "docs" / "production.md").read_text()
    assert "Nothing on the ledger (DynamoDB) or Step Functions" in guide
    specs = [p for p in sorted((REPO / "specs").glob("*.yaml")) if p.name != "tools.yaml"]
    for spec in specs:
        for task in _tasks(spec):
            envs = task.get("envs") or {}
            assert not ENGINE_ONLY & set(envs), (spec.name, sorted(ENGINE_ONLY & set(envs)))
            text = yaml.safe_dump(task)
            assert not re.search(r"arn:aws[a-z-]*:(dynamodb|states|lambda):", text), spec.name
            assert set(task.get("file_mounts") or {}) <= {"/npa-workflow/code"}
            for uri in (task.get("file_mounts") or {}).values():
                assert uri.startswith(f"s3://{BUCKET}/code/"), uri  # the code prefix the role reads
