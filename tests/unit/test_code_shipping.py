"""Step code reaching the cluster: the folder's digest, staging it once under code/<digest>/, the inbox freezing
it with the run, and launch mounting it in every task."""

from __future__ import annotations

import boto3
import pytest
import yaml
from moto import mock_aws

from npa_workflow.code_stage import stage_code
from npa_workflow.render.code import MANIFEST, CodeError, code_bundle, code_root


def folder(tmp_path):
    root = tmp_path / "specs"
    (root / "steps" / "__pycache__").mkdir(parents=True)
    (root / "steps" / "train.py").write_text("print('train')\n")
    (root / "steps" / "__pycache__" / "train.cpython-311.pyc").write_bytes(b"\0")
    (root / "spec.yaml").write_text("x: 1\n")
    return root


def test_the_digest_names_the_content_and_skips_caches(tmp_path):
    root = folder(tmp_path)
    first = code_bundle(root)
    assert [rel for rel, _, _ in first.files] == ["spec.yaml", "steps/train.py"]
    assert code_bundle(root).digest == first.digest
    (root / "steps" / "train.py").write_text("print('train v2')\n")
    assert code_bundle(root).digest != first.digest
    with pytest.raises(CodeError, match="does not exist"):
        code_bundle(tmp_path / "nope")
    assert code_root(root / "spec.yaml") == root
    assert code_root(root / "spec.yaml", "steps", root / "tools.yaml") == root / "steps"


def test_a_folder_is_staged_once_and_reused_while_its_digest_matches(tmp_path, monkeypatch):
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        s3 = boto3.client("s3")
        s3.create_bucket(Bucket="eng")
        bundle = code_bundle(folder(tmp_path))
        uri, uploaded = stage_code(s3, "eng", bundle)
        assert uploaded and uri == f"s3://eng/code/{bundle.digest}/"
        keys = {o["Key"] for o in s3.list_objects_v2(Bucket="eng")["Contents"]}
        assert keys == {f"code/{bundle.digest}/{k}" for k in ("spec.yaml", "steps/train.py", MANIFEST)}
        assert stage_code(s3, "eng", bundle) == (uri, False)


def test_a_task_mounts_the_runs_code_and_runs_in_it():
    from npa_workflow.plan.model import PlanStep
    from npa_workflow.render import launch_document

    step = PlanStep(state="train", iteration=None, loop_label="", argv=["python", "steps/train.py"], shell="",
                    tool_ref="", resources="default", resources_profile={}, outputs=[], inputs=[], group="")
    uri = "s3://eng/code/" + "a" * 64 + "/"
    _, text = launch_document(step, workflow="w", run_id="r1", loops={}, attempt=1, fence_sequence=1, code_uri=uri)
    task = list(yaml.safe_load_all(text))[1]
    assert task["file_mounts"] == {"/npa-workflow/code": uri}
    assert task["run"].splitlines()[1] == "cd /npa-workflow/code"
    assert task["envs"]["NPA_WORKFLOW_CODE_URI"] == uri
    _, plain = launch_document(step, workflow="w", run_id="r1", loops={}, attempt=1, fence_sequence=1)
    assert "file_mounts" not in list(yaml.safe_load_all(plain))[1]
