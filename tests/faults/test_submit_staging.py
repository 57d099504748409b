"""`submit` ships nothing it should not: a spec the inbox would refuse stages no code, and a workdir outside the
spec's folder is refused unless `--allow-outside-workdir` says so (issue 18, item 4).

A real moto server stands for the stack's bucket (`--endpoint`); no inbox runs, so a submit that gets as far as
the upload times out waiting for it — after staging, which is what these tests look at."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from npa_workflow.embedded_aws.moto_server import start_moto_server
from npa_workflow.protocol.stack import LOCAL_BUCKET

pytestmark = pytest.mark.timeout(120)

HEAD = "apiVersion: npa.workflow/v0.0.1\nkind: Workflow\nmetadata: {name: ship}\n"
ONE_STATE = "states:\n  a: {run: {shell: 'python steps/a.py'}, terminal: true}\n"


@pytest.fixture(scope="module")
def stack() -> Iterator[tuple[str, object]]:
    with start_moto_server() as server:
        s3 = boto3.client("s3", endpoint_url=server.endpoint_url, region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")
        s3.create_bucket(Bucket=LOCAL_BUCKET)
        yield server.endpoint_url, s3


@pytest.fixture(autouse=True)
def empty_bucket(stack) -> Iterator[None]:
    yield
    _, s3 = stack
    for key in keys(s3):
        s3.delete_object(Bucket=LOCAL_BUCKET, Key=key)


def keys(s3) -> list[str]:
    return [o["Key"] for o in s3.list_objects_v2(Bucket=LOCAL_BUCKET).get("Contents", [])]


def submit(endpoint: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "NPA_WORKFLOW_ENDPOINT"}
    return subprocess.run([sys.executable, "-c", "from npa_workflow.cli.app import main; main()", "submit", *args,
                           "--endpoint", endpoint, "--timeout", "0.5"],
                          cwd=cwd, env=env, text=True, capture_output=True, timeout=60)


def layout(tmp_path: Path, spec_body: str) -> Path:
    """project/spec.yaml beside project/steps/, and a secret folder next to the project."""
    project, secret = tmp_path / "project", tmp_path / "secret"
    (project / "steps").mkdir(parents=True)
    secret.mkdir()
    (project / "steps" / "a.py").write_text("print('a')\n")
    (secret / "id_rsa").write_text("PRIVATE KEY\n")
    spec = project / "spec.yaml"
    spec.write_text(HEAD + spec_body)
    return spec


@pytest.mark.parametrize("body", [
    "workdir: ../secret\n" + ONE_STATE,
    "workdir: steps/../../secret\n" + ONE_STATE,
])
def test_a_workdir_outside_the_specs_folder_is_refused_and_nothing_is_uploaded(stack, tmp_path, body):
    endpoint, s3 = stack
    spec = layout(tmp_path, body)
    done = submit(endpoint, str(spec), cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "is outside the spec's folder" in done.stderr and "--allow-outside-workdir" in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert keys(s3) == []


def test_a_symlinked_workdir_leading_out_is_refused(stack, tmp_path):
    endpoint, s3 = stack
    spec = layout(tmp_path, "workdir: code\n" + ONE_STATE)
    (spec.parent / "code").symlink_to(tmp_path / "secret")
    done = submit(endpoint, str(spec), cwd=tmp_path)
    assert done.returncode == 1 and "is outside the spec's folder" in done.stderr
    assert keys(s3) == []


def test_the_catalogs_workdir_outside_the_specs_folder_is_refused_too(stack, tmp_path):
    endpoint, s3 = stack
    spec = layout(tmp_path, ONE_STATE)
    (spec.parent / "tools.yaml").write_text("apiVersion: npa.workflow.tools/v1\nworkdir: ../secret\ntools: {}\n")
    done = submit(endpoint, str(spec), cwd=tmp_path)
    assert done.returncode == 1 and "the tool catalog's workdir" in done.stderr
    assert keys(s3) == []


def test_allow_outside_workdir_ships_it(stack, tmp_path):
    endpoint, s3 = stack
    spec = layout(tmp_path, "workdir: ../secret\n" + ONE_STATE)
    submit(endpoint, str(spec), "--allow-outside-workdir", cwd=tmp_path)  # then waits for an inbox that is not there
    assert any(k.startswith("code/") and k.endswith("/id_rsa") for k in keys(s3))


def test_a_workdir_inside_the_specs_folder_is_shipped(stack, tmp_path):
    endpoint, s3 = stack
    spec = layout(tmp_path, "workdir: steps\n" + ONE_STATE)
    submit(endpoint, str(spec), cwd=tmp_path)
    assert any(k.startswith("code/") and k.endswith("/a.py") for k in keys(s3))
    assert not any(k.endswith("/id_rsa") for k in keys(s3))


@pytest.mark.parametrize(("body", "args", "said"), [
    ("workdir: /etc\n" + ONE_STATE, (), "workdir '/etc' is not relative to the spec file"),
    ("states:\n  a: {run: {shell: x}, next: nowhere}\n", (), "next state 'nowhere' is not defined"),
    (ONE_STATE, ("--var", "nothing_reads=1"), "--var"),
    ("config: {bucket: b}\n" + ONE_STATE, (), "is not a legal S3 bucket name"),
])
def test_a_spec_the_inbox_would_refuse_is_refused_before_staging(stack, tmp_path, body, args, said):
    endpoint, s3 = stack
    spec = layout(tmp_path, body)
    done = submit(endpoint, str(spec), *args, cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "refused before staging its code" in done.stderr and said in done.stderr
    assert "Traceback" not in done.stderr
    assert keys(s3) == []  # no code/, no inbox/ object


def test_validation_before_staging_uses_the_stacks_catalog(stack, tmp_path):
    """A toolRef the deployed catalog has passes, although no catalog lies beside the spec."""
    endpoint, s3 = stack
    s3.put_object(Bucket=LOCAL_BUCKET, Key="catalog/tools.yaml",
                  Body=b"apiVersion: npa.workflow.tools/v1\ntools:\n  demo.step: {argv: [echo, hi]}\n")
    spec = layout(tmp_path, "states:\n  a: {toolRef: demo.step, terminal: true}\n")
    done = submit(endpoint, str(spec), cwd=tmp_path)
    assert "refused before staging" not in done.stderr, done.stderr
    assert any(k.startswith("code/") for k in keys(s3))
