"""A run's staged code checked out for local jobs (local_jobs.code_checkout), on moto S3: complete or absent, reused by
digest, and never written outside its folder whatever the manifest says."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from npa_workflow.code_stage import stage_code
from npa_workflow.local_jobs.code_checkout import CodeCheckoutError, checkout
from npa_workflow.render.code import MANIFEST, code_bundle


@pytest.fixture
def s3(monkeypatch):
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(key, "x")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        client = boto3.client("s3")
        client.create_bucket(Bucket="engine")
        yield client


def test_the_staged_folder_is_checked_out_once_with_its_modes(s3, tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "steps").mkdir(parents=True)
    (src / "steps" / "run.sh").write_text("echo hi\n")
    (src / "steps" / "run.sh").chmod(0o755)
    (src / "data.txt").write_text("v1\n")
    uri, _ = stage_code(s3, "engine", code_bundle(src))
    (src / "data.txt").write_text("v2\n")  # the folder changes: the staged code does not
    folder = checkout(uri, tmp_path / "code", s3)
    assert (folder / "data.txt").read_text() == "v1\n" and (folder / "steps" / "run.sh").stat().st_mode & 0o100
    assert folder.name == uri.rstrip("/").rsplit("/", 1)[-1]
    s3.delete_object(Bucket="engine", Key=uri[len("s3://engine/"):] + "data.txt")
    assert checkout(uri, tmp_path / "code", s3) == folder  # reused: not fetched again
    assert [p.name for p in (tmp_path / "code").iterdir()] == [folder.name]  # no temporary folder left


def test_an_unstaged_prefix_and_a_manifest_naming_a_path_outside_are_refused(s3, tmp_path: Path) -> None:
    with pytest.raises(CodeCheckoutError, match="is not staged"):
        checkout("s3://engine/code/abc/", tmp_path / "code", s3)
    s3.put_object(Bucket="engine", Key="code/evil/" + MANIFEST,
                  Body=json.dumps({"files": [{"path": "../../escaped.txt"}]}).encode())
    with pytest.raises(CodeCheckoutError, match="not a file inside the staged folder"):
        checkout("s3://engine/code/evil/", tmp_path / "code", s3)
    assert not (tmp_path / "escaped.txt").exists() and not (tmp_path / "code" / "evil").exists()
