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


SPEC_WITH_WORKDIR = """\
apiVersion: npa.workflow/v0.0.1
kind: Workflow
metadata: {name: wd}
workdir: steps
states:
  only: {run: {argv: [PYTHON, where.py]}, terminal: true}
"""


def test_the_specs_own_workdir_wins_relative_to_the_spec_file(tmp_path):
    root = folder(tmp_path)
    (root / "lib").mkdir()
    assert code_root(root / "spec.yaml", "lib", root / "tools.yaml", spec_workdir="steps") == root / "steps"
    assert code_root(root / "spec.yaml", spec_workdir="../specs/steps") == root / "steps"
    assert code_root(root / "spec.yaml", "lib", root / "tools.yaml") == root / "lib"  # else the catalog's


@pytest.mark.parametrize(("value", "message"), [
    ("3", "workdir must be a folder path, got int"),
    ("''", "workdir must be a folder path, got an empty string"),
    ("/opt/code", "workdir '/opt/code' is not relative to the spec file"),
])
def test_a_workdir_that_is_no_relative_folder_is_an_error(value, message):
    from npa_workflow.errors import SpecError
    from npa_workflow.spec.load import load_spec_text

    with pytest.raises(SpecError) as caught:
        load_spec_text(SPEC_WITH_WORKDIR.replace("workdir: steps", f"workdir: {value}"))
    [problem] = caught.value.problems
    assert problem.path == "workdir" and message in problem.message and problem.hint


def test_render_ships_and_a_local_run_starts_in_the_specs_workdir(tmp_path):
    import json
    import os
    import subprocess
    import sys

    root = folder(tmp_path)
    (root / "steps" / "where.py").write_text("import os; print('cwd=' + os.getcwd())\n")
    spec = root / "wd.yaml"
    spec.write_text(SPEC_WITH_WORKDIR.replace("PYTHON", json.dumps(sys.executable)))
    cli = [sys.executable, "-c", "from npa_workflow.cli.app import main; main()"]
    env = {k: v for k, v in os.environ.items() if k not in ("NPA_WORKFLOW_CATALOG", "AWS_ENDPOINT_URL")}
    rendered = subprocess.run([*cli, "render", str(spec), "--code-bucket", "eng"], capture_output=True, text=True,
                              env=env, timeout=60, check=True).stdout
    task = list(yaml.safe_load_all(rendered.split("\n", 1)[1]))[1]
    assert task["file_mounts"] == {"/npa-workflow/code": code_bundle(root / "steps").uri("eng")}
    home = tmp_path / "home"
    done = subprocess.run([*cli, "run", str(spec)], capture_output=True, text=True, cwd=tmp_path,
                          env={**env, "NPA_WORKFLOW_HOME": str(home)}, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    [log] = list((home / "jobs").glob("*.log"))
    # As on the cluster: in a copy of the workdir staged for the run (content-addressed), not in the folder itself.
    assert log.read_text().strip() == f"cwd={home / 'code' / code_bundle(root / 'steps').digest}"
