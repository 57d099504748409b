"""Hostile names and environments through the real CLI (issue 18, items 2 and 10 and the small ones): each is one
line naming where, what and the fix, exit 1 (or 2 for a usage error), no traceback, nothing started."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(120)

HEAD = "apiVersion: npa.workflow/v0.0.1\nkind: Workflow\nmetadata: {name: env}\n"


def cli(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 90) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "NPA_WORKFLOW_"))}
    base.update({"NPA_WORKFLOW_HOME": str(cwd / "home"), "AWS_CONFIG_FILE": str(cwd / "no-config"),
                 "AWS_SHARED_CREDENTIALS_FILE": str(cwd / "no-credentials")})
    return subprocess.run([sys.executable, "-c", "from npa_workflow.cli.app import main; main()", *args], cwd=cwd,
                          env={**base, **(env or {})}, text=True, capture_output=True, timeout=timeout)


def clean_failure(done: subprocess.CompletedProcess, code: int = 1) -> str:
    assert done.returncode == code, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr, done.stderr
    return done.stderr


def spec(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(HEAD + body)
    return path


@pytest.mark.parametrize("variables", [
    {"AWS_REGION": "", "AWS_DEFAULT_REGION": ""},
    {"AWS_REGION": ""},
    {"AWS_DEFAULT_REGION": " "},
])
def test_an_empty_region_variable_is_treated_as_unset(tmp_path, variables):
    err = clean_failure(cli("list", "--stack", "X", cwd=tmp_path, env=variables))
    assert "no AWS region is configured" in err and "Invalid endpoint" not in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(("first", "second"), [("Train", "train"), ("tr\u200bain", "train"), ("a b", "a-b")])
def test_states_whose_job_names_collide_are_refused_by_validate_and_run(tmp_path, first, second):
    path = spec(tmp_path, f'states:\n  "{first}": {{run: {{shell: "touch one"}}, next: "{second}"}}\n'
                          f'  "{second}": {{run: {{shell: "touch two"}}, terminal: true}}\n')
    for command in ("validate", "run"):
        err = clean_failure(cli(command, str(path), cwd=tmp_path))
        assert "would get the same job name as state" in err and "one would adopt the other's job" in err
    assert not (tmp_path / "one").exists() and not (tmp_path / "two").exists()
    assert not (tmp_path / "home" / "jobs").exists()


@pytest.mark.parametrize("bucket", ["b", "My_Bucket", "xn--data", "10.0.0.1", "data..lake"])
def test_a_config_bucket_s3_refuses_is_a_validate_error(tmp_path, bucket):
    path = spec(tmp_path, f"config: {{bucket: '{bucket}'}}\nstates:\n  a: {{run: {{shell: 'true'}}, terminal: true}}\n")
    for command in ("validate", "run"):
        err = clean_failure(cli(command, str(path), cwd=tmp_path))
        assert f"config.bucket: bucket '{bucket}' is not a legal S3 bucket name" in err
        assert "reap of run" not in err and "ResourceNotFound" not in err


def test_a_bucket_made_illegal_by_the_run_id_fails_the_run_in_one_line_without_a_reap_message(tmp_path):
    path = spec(tmp_path, "config: {bucket: 'data-{{run.id}}'}\nstates:\n  a: {run: {shell: 'true'}, terminal: true}\n")
    err = clean_failure(cli("run", str(path), "--run-id", "Upper_Case", cwd=tmp_path))
    assert "bucket 'data-Upper_Case' is not a legal S3 bucket name" in err
    assert "reap of run" not in err and "ResourceNotFound" not in err and "GetItem" not in err


def test_run_ids_the_rule_refuses_say_why(tmp_path):
    path = spec(tmp_path, "states:\n  a: {run: {shell: 'true'}, terminal: true}\n")
    err = clean_failure(cli("run", str(path), "--run-id", "", cwd=tmp_path), code=2)
    assert "the run id is empty" in err
    err = clean_failure(cli("run", str(path), "--run-id", "r" * 80, cwd=tmp_path), code=2)
    assert "80 characters long, over the 72 allowed" in err
    assert not (tmp_path / "home" / "runs").exists()
