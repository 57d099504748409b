"""The inbox (engine.inbox.handle_object, functions/inbox/handler.py) and engine.start.start_run on moto in-process.

Executions are only started here, never interpreted: the checks are on what exists (frozen files, RUN items,
executions by name, state machines)."""

from __future__ import annotations

import json
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import boto3
import pytest
import yaml
from moto import mock_aws

from npa_workflow import wiring
from npa_workflow.adapters.s3_store import S3Store
from npa_workflow.adapters.sfn_callbacks import SfnCallbacks
from npa_workflow.adapters.sfn_executions import SfnExecutions
from npa_workflow.compile.asl import CompileOptions, compile_spec
from npa_workflow.engine.context import Engine
from npa_workflow.engine.inbox import (
    FUNCTION_ARN_ENVS,
    InboxSettings,
    ad_hoc_definition,
    handle_object,
)
from npa_workflow.engine.runs import RunOptions, RunStore
from npa_workflow.engine.start import run_id_for_object, start_run
from npa_workflow.errors import SpecError
from npa_workflow.ledger import DynamoLedger
from npa_workflow.protocol import environment
from npa_workflow.protocol.run_ids import RUN_ID_PATTERN
from npa_workflow.spec.load import load_spec

SPECS = Path(__file__).resolve().parents[2] / "specs"
BUCKET = "engine"
TABLE = "ledger"
ACCOUNT = "123456789012"
ROLE_ARN = f"arn:aws:iam::{ACCOUNT}:role/npa-machines"
FUNCTION_ARNS = {p: f"arn:aws:lambda:us-east-1:{ACCOUNT}:function:npa-{n}" for p, n in
                 zip(FUNCTION_ARN_ENVS, ("launch", "decide", "trigger", "cleanup"), strict=True)}
DEPLOYED = ("fanout", "sweep")
AD_HOC_PREFIX = "NpaWorkflow-adhoc-"

BROKEN = """\
apiVersion: npa.workflow/v0.0.1
kind: Flow
metadata: {name: broken}
initial: prepare
states:
  prepare:
    toolRef: examples.data.prepar
    next: nowhere
  join:
    command: "echo {{config.missing_key}}"
    terminal: true
"""


@pytest.fixture(autouse=True)
def aws(monkeypatch):
    for key, value in {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x", "AWS_DEFAULT_REGION": "us-east-1",
                       "POWERTOOLS_METRICS_DISABLED": "true", "POWERTOOLS_TRACE_DISABLED": "true"}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        yield


@pytest.fixture
def env() -> SimpleNamespace:
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket=BUCKET)
    s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    ledger = DynamoLedger(TABLE)
    ledger.create_table()
    sfn = boto3.client("stepfunctions")
    store = S3Store(s3)
    engine = Engine(ledger=ledger, runs=RunStore(store, BUCKET), store=store, executor=None,  # type: ignore[arg-type]
                    callbacks=SfnCallbacks(sfn))
    # What the deploy publishes: the catalog, the specs, and one machine per spec.
    s3.put_object(Bucket=BUCKET, Key="catalog/tools.yaml", Body=(SPECS / "tools.yaml").read_bytes())
    machines = {}
    for name in DEPLOYED:
        s3.put_object(Bucket=BUCKET, Key=f"catalog/specs/{name}.yaml", Body=(SPECS / f"{name}.yaml").read_bytes())
        definition = json.dumps(compile_spec(load_spec(SPECS / f"{name}.yaml")).definition, indent=1)
        for placeholder, arn in FUNCTION_ARNS.items():
            definition = definition.replace(placeholder, arn)
        machines[name] = sfn.create_state_machine(name=f"NpaWorkflow-{name}", definition=definition,
                                                  roleArn=ROLE_ARN, type="STANDARD")["stateMachineArn"]
    settings = InboxSettings(
        state_machines=machines, allow_ad_hoc=True, ad_hoc_prefix=AD_HOC_PREFIX, ad_hoc_role_arn=ROLE_ARN,
        ad_hoc_log_group_arn=f"arn:aws:logs:us-east-1:{ACCOUNT}:log-group:/aws/vendedlogs/states/adhoc:*",
        function_arns=FUNCTION_ARNS,
    )
    return SimpleNamespace(s3=s3, sfn=sfn, engine=engine, ledger=ledger, machines=machines, settings=settings)


def upload(env: SimpleNamespace, key: str, body: str | bytes) -> dict[str, Any]:
    answer = env.s3.put_object(Bucket=BUCKET, Key=key, Body=body.encode() if isinstance(body, str) else body)
    return {"bucket": BUCKET, "key": key, "version_id": answer.get("VersionId"), "etag": answer["ETag"].strip('"')}


def handle(env: SimpleNamespace, obj: dict[str, Any], settings: InboxSettings | None = None):
    return handle_object(env.engine, SfnExecutions(env.sfn), settings=settings or env.settings, **obj)


def request(**fields: Any) -> str:
    return yaml.safe_dump({"apiVersion": "npa.workflow.run/v1", **fields}, sort_keys=False)


def executions(env: SimpleNamespace, machine_arn: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for page in env.sfn.get_paginator("list_executions").paginate(stateMachineArn=machine_arn):
        found += page["executions"]
    return found


def all_executions(env: SimpleNamespace) -> list[dict[str, Any]]:
    machines = [m["stateMachineArn"] for m in env.sfn.list_state_machines()["stateMachines"]]
    return [e for arn in machines for e in executions(env, arn)]


def rejection(env: SimpleNamespace, key: str) -> dict[str, Any]:
    return json.loads(env.s3.get_object(Bucket=BUCKET, Key=key)["Body"].read())


def ledger_item_count(env: SimpleNamespace) -> int:
    return boto3.client("dynamodb").scan(TableName=TABLE, Select="COUNT")["Count"]


# ------------------------------------------------------------------------------------------------ run ids
def test_run_id_for_object_is_deterministic_and_a_valid_execution_name():
    a = run_id_for_object(BUCKET, "inbox/team/fanout.yaml", "v1", "fanout")
    assert a == run_id_for_object(BUCKET, "inbox/team/fanout.yaml", "v1", "fanout")
    assert a != run_id_for_object(BUCKET, "inbox/team/fanout.yaml", "v2", "fanout")
    assert a != run_id_for_object(BUCKET, "inbox/other.yaml", "v1", "fanout")
    assert re.fullmatch(r"fanout-[0-9a-f]{12}", a)
    odd = run_id_for_object(BUCKET, "inbox/x.yaml", "e" * 40, "Spec with spaces / slashes: " + "x" * 200)
    assert RUN_ID_PATTERN.match(odd) and len(odd) <= 80
    assert RUN_ID_PATTERN.match(run_id_for_object(BUCKET, "inbox/ü ü.yaml", "v"))


# ------------------------------------------------------------------------------------------------ specs
def test_valid_spec_upload_freezes_records_and_starts_one_execution(env):
    obj = upload(env, "inbox/fanout.yaml", (SPECS / "fanout.yaml").read_text())
    result = handle(env, obj)
    assert result.status == "started" and result.machine == "deployed"
    assert result.machine_arn == env.machines["fanout"]
    run_id = result.run_id
    assert run_id == run_id_for_object(BUCKET, "inbox/fanout.yaml", obj["version_id"], "fanout")
    frozen = env.s3.list_objects_v2(Bucket=BUCKET, Prefix=f"runs/{run_id}/")["Contents"]
    assert sorted(o["Key"].rsplit("/", 1)[1] for o in frozen) == ["run.json", "spec.yaml", "tools.yaml"]
    assert env.engine.runs.load(run_id).loaded.spec.name == "fanout"  # what every later function reads
    run = env.ledger.get_run(run_id)
    assert run is not None and run.workflow == "fanout" and run.execution_arn == result.execution_arn
    assert run.options["source"] == f"s3://{BUCKET}/inbox/fanout.yaml"
    runs = executions(env, env.machines["fanout"])
    assert [e["name"] for e in runs] == [run_id]
    payload = json.loads(env.sfn.describe_execution(executionArn=result.execution_arn)["input"])
    assert payload["run"] == {"run_id": run_id, "bucket": BUCKET, "deadline": 7 * 24 * 3600}
    assert payload["groups"] == {"g1": ["shard-0", "shard-1", "shard-2"]}


def test_the_same_event_three_times_starts_one_execution(env):
    obj = upload(env, "inbox/fanout.yaml", (SPECS / "fanout.yaml").read_text())
    results = [handle(env, obj) for _ in range(3)]
    assert [r.status for r in results] == ["started", "already_started", "already_started"]
    assert len({r.run_id for r in results}) == 1 and len({r.execution_arn for r in results}) == 1
    assert len(all_executions(env)) == 1


def test_a_new_version_of_the_same_key_is_a_new_run(env):
    first = handle(env, upload(env, "inbox/fanout.yaml", (SPECS / "fanout.yaml").read_text()))
    second = handle(env, upload(env, "inbox/fanout.yaml", (SPECS / "fanout.yaml").read_text() + "\n"))
    assert first.run_id != second.run_id and len(all_executions(env)) == 2


def test_a_broken_spec_is_rejected_with_every_error_as_validate_reports_them(env, tmp_path):
    obj = upload(env, "inbox/team/broken.yaml", BROKEN)
    result = handle(env, obj)
    assert result.status == "rejected" and result.rejected_key == "inbox-rejected/team/broken.yaml.json"
    doc = rejection(env, result.rejected_key)
    assert doc["key"] == "inbox/team/broken.yaml" and doc["rejected_at"].endswith("Z")
    # The same problems, word for word, as `npa-workflow validate broken.yaml --catalog specs/tools.yaml`.
    (tmp_path / "broken.yaml").write_text(BROKEN)
    with pytest.raises(SpecError) as info:
        load_spec(tmp_path / "broken.yaml", catalog=SPECS / "tools.yaml")
    expected = [(p.path, p.message, p.hint) for p in info.value.problems]
    assert [(e["path"], e["message"], e["hint"]) for e in doc["errors"]] == expected
    assert len(expected) >= 3
    paths = {e["path"] for e in doc["errors"]}
    assert {"kind", "states.prepare.toolRef", "states.prepare.next"} <= paths
    assert all(e["file"] == f"s3://{BUCKET}/inbox/team/broken.yaml" for e in doc["errors"])
    assert all_executions(env) == [] and ledger_item_count(env) == 0
    assert "Contents" not in env.s3.list_objects_v2(Bucket=BUCKET, Prefix="runs/")


@pytest.mark.parametrize("body, message", [
    ("states: [unclosed", "not valid YAML"),
    ("just a string", "spec must be a mapping"),
    (b"\xff\xfe not utf-8", "not UTF-8"),
    ("apiVersion: npa.workflow/v9\nkind: Workflow\nmetadata: {name: x}\nstates: {a: {command: x}}\n",
     "unsupported apiVersion"),
])
def test_unreadable_uploads_are_rejected(env, body, message):
    result = handle(env, upload(env, "inbox/bad.yaml", body))
    assert result.status == "rejected"
    assert message in rejection(env, "inbox-rejected/bad.yaml.json")["errors"][0]["message"]
    assert all_executions(env) == []


def test_a_spec_not_deployed_runs_on_an_ad_hoc_machine_or_is_rejected(env):
    import io
    import tarfile

    text = (SPECS / "gate-loop.yaml").read_text()
    packed = io.BytesIO()
    with tarfile.open(fileobj=packed, mode="w:gz") as tar:  # its steps' code, beside it (engine.inbox_code)
        tar.add(SPECS / "steps", arcname="steps", filter=lambda m: None if "__pycache__" in m.name else m)
    assert handle(env, upload(env, "inbox/gate.code.tar.gz", packed.getvalue())).status == "ignored"
    started = handle(env, upload(env, "inbox/gate.yaml", text))
    assert started.status == "started" and started.machine == "ad-hoc"
    assert env.engine.runs.load(started.run_id).options.code_uri.startswith(f"s3://{BUCKET}/code/")
    assert re.fullmatch(re.escape(AD_HOC_PREFIX) + r"[0-9a-f]{16}", started.machine_arn.rsplit(":", 1)[1])
    strict = InboxSettings(state_machines=env.settings.state_machines)
    result = handle(env, upload(env, "inbox/gate2.yaml", text), strict)
    assert result.status == "rejected"
    [error] = result.errors
    assert error["path"] == "metadata.name"
    assert error["message"] == "spec 'gate-loop' is not deployed and ad-hoc specs are not allowed"
    assert error["hint"] == "add it to specs/ and deploy, or set allowAdHocSpecs"
    assert len(all_executions(env)) == 1


def test_an_empty_or_non_inbox_key_is_ignored(env):
    obj = upload(env, "elsewhere/fanout.yaml", (SPECS / "fanout.yaml").read_text())
    assert handle(env, obj).status == "ignored"
    assert handle(env, {**obj, "key": "inbox/"}).status == "ignored"
    assert handle(env, {**obj, "key": "inbox/deleted.yaml", "version_id": None}).status == "ignored"
    assert all_executions(env) == [] and ledger_item_count(env) == 0


# ------------------------------------------------------------------------------------------------ run requests
def test_a_run_request_for_a_deployed_spec_runs_on_the_deployed_machine(env):
    body = request(spec="sweep", vars={"train_epochs": 2}, options={"maxWaitSeconds": 3600})
    result = handle(env, upload(env, "inbox/req.yaml", body))
    assert result.status == "started" and result.machine == "deployed"
    assert result.machine_arn == env.machines["sweep"]
    frozen = env.engine.runs.load(result.run_id)
    assert frozen.variables == {"train_epochs": "2"}
    assert frozen.loaded.spec.config["train_epochs"] == "2"
    [execution] = executions(env, env.machines["sweep"])
    assert execution["name"] == result.run_id
    # The run's own deadline rides in the input: the deployed machine (compiled once) honours it.
    payload = json.loads(env.sfn.describe_execution(executionArn=execution["executionArn"])["input"])
    assert payload["run"]["deadline"] == 3600


def test_a_deadline_as_long_as_the_stacks_retention_is_refused_with_the_fix(env):
    """S3 lifecycle expiry counts from an object's creation: a wave waiting retentionDays would come back to a run
    whose frozen spec is gone. The run request is refused (one line each: where, what, the fix); shorter runs."""
    from dataclasses import replace

    kept = replace(env.settings, retention_days=30)
    for seconds, told in ((30 * 86400, "(30 days)"), (0, "no deadline")):
        result = handle(env, upload(env, f"inbox/long-{seconds}.yaml",
                                    request(spec="sweep", options={"maxWaitSeconds": seconds})), kept)
        assert result.status == "rejected"
        [error] = result.errors
        assert error["path"] == "options.maxWaitSeconds" and told in error["message"]
        assert "retentionDays=30" in error["message"] and "expire" in error["message"]
        assert "under 2592000 s" in error["hint"] and "-c retentionDays=" in error["hint"]
    spec = yaml.safe_load((SPECS / "gate-loop.yaml").read_text())
    state = "train"
    spec["states"][state]["timeoutSeconds"] = 40 * 86400
    result = handle(env, upload(env, "inbox/state.yaml", request(spec=spec)), kept)
    assert result.status == "rejected" and result.errors[0]["path"] == f"states.{state}"
    assert "40 days" in result.errors[0]["message"]
    assert all_executions(env) == []
    ok = handle(env, upload(env, "inbox/ok.yaml", request(spec="sweep", options={"maxWaitSeconds": 29 * 86400})), kept)
    assert ok.status == "started", ok.errors
    assert InboxSettings.from_environment({"NPA_WORKFLOW_RETENTION_DAYS": "30"}).retention_days == 30


def test_a_run_request_that_changes_the_definition_gets_one_reused_ad_hoc_machine(env):
    body = request(spec="sweep", vars={"max_concurrency": "3"}, options={"retries": 1})
    first = handle(env, upload(env, "inbox/a.yaml", body))
    second = handle(env, upload(env, "inbox/b.yaml", body))
    assert first.machine == second.machine == "ad-hoc"
    assert first.machine_arn == second.machine_arn and first.run_id != second.run_id
    machines = env.sfn.list_state_machines()["stateMachines"]
    assert len(machines) == len(DEPLOYED) + 1
    described = env.sfn.describe_state_machine(stateMachineArn=first.machine_arn)
    assert "${" not in described["definition"] and FUNCTION_ARNS[next(iter(FUNCTION_ARNS))] in described["definition"]
    assert described["roleArn"] == ROLE_ARN
    assert sorted(e["name"] for e in executions(env, first.machine_arn)) == sorted([first.run_id, second.run_id])
    assert executions(env, env.machines["sweep"]) == []
    compiled = compile_spec(env.engine.runs.load(first.run_id).loaded, CompileOptions(retries=1))
    assert described["definition"] == ad_hoc_definition(env.settings, compiled)


def test_a_changed_definition_without_ad_hoc_is_rejected(env):
    strict = InboxSettings(state_machines=env.settings.state_machines)
    result = handle(env, upload(env, "inbox/req.yaml", request(spec="sweep", options={"retries": 2})), strict)
    assert result.status == "rejected"
    assert "differs from its deployed state machine" in result.errors[0]["message"]
    assert "allowAdHocSpecs" in result.errors[0]["hint"]
    assert all_executions(env) == [] and ledger_item_count(env) == 0


def test_a_run_request_with_unknown_keys_is_rejected_with_each_of_them(env):
    body = request(spec="fanout", colour="red", options={"retires": 1, "maxConcurrency": -1}, vars={"a": [1]})
    result = handle(env, upload(env, "inbox/req.yaml", body))
    assert result.status == "rejected"
    found = {(e["path"], e["message"].split(",")[0]) for e in rejection(env, "inbox-rejected/req.yaml.json")["errors"]}
    assert ("colour", "unknown field 'colour'") in found
    assert ("options.retires", "unknown field 'retires'") in found
    assert any(path == "options.maxConcurrency" for path, _ in found)
    assert any(path.startswith("vars.a") for path, _ in found)
    assert all_executions(env) == []


def test_a_run_request_for_an_unknown_spec_or_with_bad_vars_is_rejected(env):
    unknown = handle(env, upload(env, "inbox/a.yaml", request(spec="nope")))
    assert unknown.status == "rejected" and unknown.errors[0]["path"] == "spec"
    assert "'nope' is not deployed" in unknown.errors[0]["message"]
    bad_var = handle(env, upload(env, "inbox/b.yaml", request(spec="sweep", vars={"max_concurrency": "lots"})))
    assert bad_var.status == "rejected" and bad_var.errors
    assert all_executions(env) == []


def test_an_inline_spec_runs_and_its_problems_are_reported_under_spec(env):
    spec = yaml.safe_load((SPECS / "gate-loop.yaml").read_text())
    ok = handle(env, upload(env, "inbox/inline.yaml", request(spec=spec, options={"assumeDecision": "promote"})))
    assert ok.status == "started" and ok.machine == "ad-hoc"
    assert env.engine.runs.load(ok.run_id).options.assume_decision == "promote_checkpoint"
    broken = yaml.safe_load(BROKEN)
    bad = handle(env, upload(env, "inbox/inline-bad.yaml", request(spec=broken)))
    assert bad.status == "rejected"
    assert {"spec.states.prepare.toolRef", "spec.states.prepare.next"} <= {e["path"] for e in bad.errors}


def test_an_unknown_key_rejects_a_spec_unless_the_request_allows_it(env):
    spec = yaml.safe_load((SPECS / "gate-loop.yaml").read_text())
    spec["states"]["train"]["toolRf"] = spec["states"]["train"].pop("toolRef")  # a typo: the step would do nothing
    typo = handle(env, upload(env, "inbox/typo.yaml", yaml.safe_dump(spec)))
    assert typo.status == "rejected"
    assert [(e["path"], e["hint"]) for e in typo.errors if e["path"].endswith("toolRf")] == [
        ("states.train.toolRf", "did you mean 'toolRef'?")]
    spec["states"]["train"]["toolRef"] = spec["states"]["train"]["toolRf"]
    legacy = handle(env, upload(env, "inbox/legacy.yaml", request(spec=spec, options={"allowUnknownKeys": True})))
    assert legacy.status == "started", legacy.errors
    # Every function of the run reads the frozen spec with the policy it was accepted under.
    assert "train" in env.engine.runs.load(legacy.run_id).loaded.spec.states


def test_a_run_request_freezes_its_staged_code_with_the_run(env):
    uri = "s3://engine/code/" + "b" * 64 + "/"
    ok = handle(env, upload(env, "inbox/code.yaml", request(spec="fanout", options={"codeUri": uri})))
    assert ok.status == "started", ok.errors
    options = env.engine.runs.load(ok.run_id).options
    assert (options.code_uri, options.code_digest) == (uri, "b" * 64)
    bad = handle(env, upload(env, "inbox/code-bad.yaml", request(spec="fanout", options={"codeUri": "/tmp/x"})))
    assert bad.status == "rejected" and bad.errors[0]["path"] == "options.codeUri"


def test_an_explicit_run_id_is_idempotent_and_never_taken_over(env):
    body = request(spec="fanout", runId="my-run-1")
    first = handle(env, upload(env, "inbox/a.yaml", body))
    again = handle(env, upload(env, "inbox/b.yaml", body))
    assert first.run_id == again.run_id == "my-run-1"
    assert first.status == "started" and again.status == "already_started"
    other = handle(env, upload(env, "inbox/c.yaml", request(spec="fanout", runId="my-run-1", vars={"shard_sleep": 9})))
    assert other.status == "rejected" and other.errors[0]["path"] == "runId"
    assert env.engine.runs.load("my-run-1").variables == {}  # the first run's frozen inputs are untouched
    assert len(all_executions(env)) == 1


# ------------------------------------------------------------------------------------------------ start_run
def test_start_run_writes_distributed_map_members_and_absorbs_execution_already_exists(env):
    loaded = load_spec(SPECS / "fanout.yaml")
    compiled = compile_spec(loaded, CompileOptions(inline_map_limit=2))
    assert compiled.distributed_groups == ["shards"]
    arn = env.sfn.create_state_machine(name="dist", definition=json.dumps(compiled.definition), roleArn=ROLE_ARN,
                                       type="STANDARD")["stateMachineArn"]
    kwargs = dict(machine_arn=arn, compiled=compiled, loaded=loaded, spec_text="x", catalog_text="",
                  run_id="dist-1", variables={}, options=RunOptions())
    started = start_run(env.engine, SfnExecutions(env.sfn), **kwargs)
    assert not started.already_started and started.run_created
    members = env.s3.get_object(Bucket=BUCKET, Key="runs/dist-1/groups/g1.json")["Body"].read()
    assert json.loads(members) == ["shard-0", "shard-1", "shard-2"]
    env.sfn.stop_execution(executionArn=started.execution_arn)  # ended: StartExecution now raises
    again = start_run(env.engine, SfnExecutions(env.sfn), **kwargs)
    assert again.already_started and not again.run_created and again.execution_arn == started.execution_arn
    assert len(executions(env, arn)) == 1


# ------------------------------------------------------------------------------------------------ concurrency
@pytest.fixture
def atomic_moto(monkeypatch):
    """AWS applies a conditional put and a named StartExecution atomically; moto in-process does not lock."""
    from moto.dynamodb.models import DynamoDBBackend
    from moto.stepfunctions.models import StepFunctionBackend

    lock = threading.RLock()
    for cls, name in ((DynamoDBBackend, "put_item"), (StepFunctionBackend, "start_execution")):
        original = getattr(cls, name)

        def atomic(self, *args, _original=original, **kwargs):
            with lock:
                return _original(self, *args, **kwargs)

        monkeypatch.setattr(cls, name, atomic)


def test_fifty_uploads_at_once_each_delivered_twice_start_fifty_executions(env, atomic_moto):
    text = (SPECS / "fanout.yaml").read_text()
    objects = [upload(env, f"inbox/batch/{i:02d}.yaml", text) for i in range(50)]
    with ThreadPoolExecutor(max_workers=16) as pool:
        results = list(pool.map(lambda obj: handle(env, obj), objects + objects[::-1]))
    assert {r.status for r in results} <= {"started", "already_started"}
    run_ids = {r.run_id for r in results}
    assert len(run_ids) == 50
    assert sum(r.status == "started" for r in results) == 50
    names = [e["name"] for e in executions(env, env.machines["fanout"])]
    assert sorted(names) == sorted(run_ids)
    assert all(env.ledger.get_run(run_id).execution_arn for run_id in run_ids)


# ------------------------------------------------------------------------------------------------ handler
def event(obj: dict[str, Any]) -> dict[str, Any]:
    return {
        "version": "0", "id": "17793124-05d4-b198-2fde-7ededc63b103", "detail-type": "Object Created",
        "source": "aws.s3", "account": ACCOUNT, "time": "2026-01-01T00:00:00Z", "region": "us-east-1",
        "resources": [f"arn:aws:s3:::{obj['bucket']}"],
        "detail": {
            "version": "0", "bucket": {"name": obj["bucket"]},
            "object": {"key": obj["key"], "size": 10, "etag": obj["etag"], "version-id": obj["version_id"],
                       "sequencer": "00617F08299329D189"},
            "request-id": "N4N7GDK58NMKJ12R", "requester": ACCOUNT, "reason": "PutObject",
        },
    }


def test_handler_parses_the_eventbridge_event_and_starts_the_run(env, monkeypatch):
    from functions.inbox.handler import handler

    monkeypatch.setenv(environment.LEDGER_TABLE, TABLE)
    monkeypatch.setenv(environment.BUCKET, BUCKET)
    monkeypatch.setenv("NPA_WORKFLOW_STATE_MACHINES", json.dumps(env.machines))
    monkeypatch.setenv("NPA_WORKFLOW_ALLOW_AD_HOC", "false")
    wiring.clear_cache()
    context = SimpleNamespace(function_name="inbox", memory_limit_in_mb=128, aws_request_id="r-1",
                              invoked_function_arn=f"arn:aws:lambda:us-east-1:{ACCOUNT}:function:inbox")
    try:
        obj = upload(env, "inbox/fanout.yaml", (SPECS / "fanout.yaml").read_text())
        answer = handler(event(obj), context)
        assert answer["status"] == "started" and answer["machine"] == "deployed"
        assert handler(event(obj), context)["status"] == "already_started"
        ignored = handler(event({**obj, "key": "runs/x/spec.yaml"}), context)
        assert ignored["status"] == "ignored"
        assert [e["name"] for e in executions(env, env.machines["fanout"])] == [answer["run_id"]]
    finally:
        wiring.clear_cache()


def test_settings_from_environment():
    env = {"NPA_WORKFLOW_STATE_MACHINES": json.dumps({"fanout": "arn:x"}), "NPA_WORKFLOW_ALLOW_AD_HOC": "true",
           "NPA_WORKFLOW_AD_HOC_MACHINE_PREFIX": "S-adhoc-", "NPA_WORKFLOW_AD_HOC_ROLE_ARN": ROLE_ARN,
           "NPA_WORKFLOW_AD_HOC_LOG_GROUP_ARN": "arn:lg:*", "NPA_WORKFLOW_HEARTBEAT_SECONDS": "360",
           **{name: FUNCTION_ARNS[p] for p, name in FUNCTION_ARN_ENVS.items()}}
    settings = InboxSettings.from_environment(env)
    assert settings.state_machines == {"fanout": "arn:x"} and settings.allow_ad_hoc
    assert settings.function_arns == FUNCTION_ARNS and settings.heartbeat_seconds == 360
    assert not InboxSettings.from_environment({}).allow_ad_hoc
    with pytest.raises(wiring.WiringError, match="NPA_WORKFLOW_AD_HOC_ROLE_ARN"):
        InboxSettings.from_environment({**env, "NPA_WORKFLOW_AD_HOC_ROLE_ARN": ""})
    with pytest.raises(wiring.WiringError, match="JSON object"):
        InboxSettings.from_environment({"NPA_WORKFLOW_STATE_MACHINES": "[1]"})
