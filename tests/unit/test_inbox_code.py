"""A raw inbox upload's step code (engine.inbox_code), through the inbox's own entry point on moto: a code bundle
beside the spec is checked and staged as `submit` stages a folder, a spec that needs code and has none is
rejected with the command that uploads it, and a hostile bundle stages nothing."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from npa_workflow.adapters.s3_store import S3Store
from npa_workflow.adapters.sfn_callbacks import SfnCallbacks
from npa_workflow.adapters.sfn_executions import SfnExecutions
from npa_workflow.engine.context import Engine
from npa_workflow.engine.inbox import FUNCTION_ARN_ENVS, InboxSettings, handle_object
from npa_workflow.engine.runs import RunStore
from npa_workflow.ledger import DynamoLedger
from npa_workflow.local_jobs.code_checkout import checkout
from npa_workflow.render.code import code_bundle

BUCKET = "engine"
ACCOUNT = "123456789012"
SPEC = """apiVersion: npa.workflow/v0.0.1
kind: Workflow
metadata: {name: fit}
initial: fit
states:
  fit: {run: {shell: 'python steps/fit.py --epochs 2'}, terminal: true}
"""


@pytest.fixture
def inbox(monkeypatch):
    for key, value in {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x", "AWS_DEFAULT_REGION": "us-east-1",
                       "POWERTOOLS_METRICS_DISABLED": "true"}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        s3 = boto3.client("s3")
        s3.create_bucket(Bucket=BUCKET)
        ledger = DynamoLedger("ledger")
        ledger.create_table()
        store = S3Store(s3)
        engine = Engine(ledger=ledger, runs=RunStore(store, BUCKET), store=store, executor=None,  # type: ignore[arg-type]
                        callbacks=SfnCallbacks(boto3.client("stepfunctions")))
        role = f"arn:aws:iam::{ACCOUNT}:role/m"
        settings = InboxSettings(
            allow_ad_hoc=True, ad_hoc_prefix="adhoc-", ad_hoc_role_arn=role,
            ad_hoc_log_group_arn=f"arn:aws:logs:us-east-1:{ACCOUNT}:log-group:x:*",
            function_arns={p: f"arn:aws:lambda:us-east-1:{ACCOUNT}:function:{i}" for i, p in
                           enumerate(FUNCTION_ARN_ENVS)})

        def upload(key: str, body: bytes) -> object:
            put = s3.put_object(Bucket=BUCKET, Key=key, Body=body)
            return handle_object(engine, SfnExecutions(boto3.client("stepfunctions")), bucket=BUCKET, key=key,
                                 version_id=put.get("VersionId"), etag=put["ETag"], settings=settings)

        yield s3, engine, upload


def _code_keys(s3) -> list[str]:
    return [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix="code/").get("Contents", [])]


def _tar(members: list[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    packed = io.BytesIO()
    with tarfile.open(fileobj=packed, mode="w:gz") as tar:
        for info, content in members:
            if content is not None:
                info.size = len(content)
            tar.addfile(info, io.BytesIO(content) if content is not None else None)
    return packed.getvalue()


def _file(name: str, content: bytes, mode: int = 0o644) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.mode = mode
    return info, content


def test_a_bundle_beside_the_spec_is_staged_as_submit_stages_the_folder(inbox, tmp_path: Path) -> None:
    s3, engine, upload = inbox
    folder = tmp_path / "team"
    (folder / "steps").mkdir(parents=True)
    (folder / "steps" / "fit.py").write_text("print('fit')\n")
    (folder / "run.sh").write_text("echo hi\n")
    (folder / "run.sh").chmod(0o755)
    packed = io.BytesIO()
    with tarfile.open(fileobj=packed, mode="w:gz") as tar:
        tar.add(folder, arcname=".")  # `tar -czf fit.code.tar.gz -C team .`
    assert upload("inbox/fit.code.tar.gz", packed.getvalue()).status == "ignored"  # the bundle starts nothing
    started = upload("inbox/fit.yaml", SPEC.encode())
    assert started.status == "started", started.errors
    options = engine.runs.load(started.run_id).options
    digest = code_bundle(folder).digest  # the digest `submit` gives the same folder
    assert options.code_uri == f"s3://{BUCKET}/code/{digest}/" and options.code_digest == digest
    copy = checkout(options.code_uri, tmp_path / "checkouts", s3)  # what a serve job (or a task's mount) gets
    assert (copy / "steps" / "fit.py").read_text() == "print('fit')\n" and (copy / "run.sh").stat().st_mode & 0o100
    again = upload("inbox/fit2.yaml", SPEC.replace("name: fit", "name: fit2").encode())
    assert again.status == "rejected"  # its own bundle key is fit2.code.tar.gz: none there
    assert len(_code_keys(s3)) == 3  # two files and the manifest, once


def test_a_spec_that_needs_code_without_a_bundle_is_rejected_with_how_to_upload_it(inbox) -> None:
    s3, _, upload = inbox
    result = upload("inbox/fit.yaml", SPEC.encode())
    assert result.status == "rejected"
    [error] = result.errors
    assert error["message"] == ("the upload carries no step code, and state 'fit' runs steps/fit.py, a file of the "
                                "spec's folder")
    assert "npa-workflow submit fit.yaml --stack <stack>" in error["hint"]
    assert "inbox/fit.code.tar.gz before the spec" in error["hint"]
    image_tool = SPEC.replace("python steps/fit.py --epochs 2", "python -m mypkg.fit --epochs 2")
    started = upload("inbox/image.yaml", image_tool.encode())  # its program is in the image: no code needed
    assert started.status == "started" and _code_keys(s3) == []


def test_serve_runs_a_raw_spec_without_a_bundle_from_its_folder(inbox) -> None:
    _, engine, upload = inbox
    engine.jobs_on_this_machine = True  # as wiring makes serve's engine (NPA_WORKFLOW_EXECUTOR=local)
    started = upload("inbox/fit.yaml", SPEC.encode())
    assert started.status == "started" and engine.runs.load(started.run_id).options.code_uri == ""


def _symlink() -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo("steps/link.py")
    info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
    return info, None


@pytest.mark.parametrize(("members", "said"), [
    ([_file("../escaped.py", b"x")], "member '../escaped.py' is outside the bundle's folder"),
    ([_file("/abs/fit.py", b"x")], "member '/abs/fit.py' is outside the bundle's folder"),
    ([_symlink()], "member 'steps/link.py' is a link: a bundle holds regular files only"),
    ([_file("steps/fit.py", b"a"), _file("./steps/fit.py", b"b")], "member 'steps/fit.py' is in the bundle twice"),
])
def test_a_hostile_bundle_rejects_the_spec_and_stages_nothing(inbox, members, said) -> None:
    s3, _, upload = inbox
    assert upload("inbox/fit.code.tar.gz", _tar(members)).status == "ignored"
    result = upload("inbox/fit.yaml", SPEC.encode())
    assert result.status == "rejected"
    [error] = result.errors
    assert error["message"] == f"code bundle s3://{BUCKET}/inbox/fit.code.tar.gz: {said}" and error["hint"]
    assert _code_keys(s3) == []
    rejected = json.loads(s3.get_object(Bucket=BUCKET, Key="inbox-rejected/fit.yaml.json")["Body"].read())
    assert rejected["errors"][0]["message"] == error["message"]


def test_a_bundle_that_is_not_a_gzipped_tar_is_one_line(inbox) -> None:
    s3, _, upload = inbox
    upload("inbox/fit.code.tar.gz", b"not a tar at all")
    [error] = upload("inbox/fit.yaml", SPEC.encode()).errors
    assert error["message"].startswith(f"code bundle s3://{BUCKET}/inbox/fit.code.tar.gz: not a gzip'd tar")
    assert "tar -czf" in error["hint"] and _code_keys(s3) == []


def test_a_bundle_past_the_inbox_limits_is_refused_at_the_header_that_passes_them(inbox, monkeypatch) -> None:
    from npa_workflow.engine import inbox_code

    s3, _, upload = inbox
    monkeypatch.setattr(inbox_code, "MAX_BUNDLE_UNPACKED", 10)
    upload("inbox/fit.code.tar.gz", _tar([_file("steps/a.py", b"12345"), _file("steps/b.py", b"1234567")]))
    [error] = upload("inbox/fit.yaml", SPEC.encode()).errors
    assert "more than 1000 files or 0 MiB unpacked" in error["message"] and "npa-workflow submit" in error["hint"]
    assert _code_keys(s3) == []


def test_a_bundle_past_the_packed_limit_is_refused_by_its_size_before_its_body_is_read(inbox, monkeypatch) -> None:
    from npa_workflow.engine import inbox_code

    s3, engine, upload = inbox
    bundle = _tar([_file("steps/fit.py", bytes(range(256)) * 64)])
    monkeypatch.setattr(inbox_code, "MAX_BUNDLE_BYTES", len(bundle) - 1)
    upload("inbox/fit.code.tar.gz", bundle)
    read: list[str] = []
    get_object = engine.store.client.get_object

    def watched_get_object(**kwargs):  # the real GetObject on moto; notes whose body is read
        response = get_object(**kwargs)
        body, key = response["Body"], kwargs["Key"]

        def noted_read(*args):
            read.append(key)
            return type(body).read(body, *args)

        body.read = noted_read
        return response

    monkeypatch.setattr(engine.store.client, "get_object", watched_get_object)
    [error] = upload("inbox/fit.yaml", SPEC.encode()).errors
    assert error["message"] == (f"code bundle s3://{BUCKET}/inbox/fit.code.tar.gz: {len(bundle)} bytes packed, "
                                f"more than {(len(bundle) - 1) // 2**20} MiB")
    assert "ship data through S3" in error["hint"]
    assert "inbox/fit.code.tar.gz" not in read and _code_keys(s3) == []
