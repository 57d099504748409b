"""Preflight (issue 21): every secret the plan's jobs need is checked before the first launch — by `run` in its
environment, by the inbox in serve's environment or in the stack's step-secrets secret — naming the secret, the
states that need it and the command that must have it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from npa_workflow import wiring
from npa_workflow.engine.preflight import environment_presence, needed_secrets, secret_problems
from npa_workflow.errors import SpecError
from npa_workflow.local.runtime import LocalRunOptions, LocalRuntime
from npa_workflow.protocol import environment
from npa_workflow.spec.load import load_spec

CATALOG = """\
apiVersion: npa.workflow.tools/v1
tools:
  t.fit: {description: fit, argv: ["true"], image: python:3.11-slim}
  t.publish: {description: publish, argv: ["true"], image: python:3.11-slim, secretEnv: [HF_TOKEN]}
"""
SPEC = """\
apiVersion: npa.workflow/v0.0.1
kind: Workflow
metadata: {name: pre}
states:
  fit: {toolRef: t.fit, next: publish}
  publish: {toolRef: t.publish, terminal: true}
"""


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    (tmp_path / "tools.yaml").write_text(CATALOG)
    path = tmp_path / "pre.yaml"
    path.write_text(SPEC)
    return path


def test_the_secrets_a_plan_needs_are_named_with_their_states(spec: Path) -> None:
    loaded = load_spec(spec, catalog=spec.parent / "tools.yaml")
    assert needed_secrets(loaded) == {"HF_TOKEN": ["publish"]}
    assert needed_secrets(loaded, ["DB_PASS"]) == {"DB_PASS": ["fit", "publish"], "HF_TOKEN": ["publish"]}
    [problem] = secret_problems(loaded, environment_presence({"HF_TOKEN": "abc"}), where="here", fix="fix it")
    assert "shorter than 4 characters" in problem.message  # too short to redact: refused before any launch too
    assert secret_problems(loaded, environment_presence({"HF_TOKEN": "hf-real-value"}), where="", fix="") == []


def test_run_refuses_before_anything_starts_naming_the_secret_the_state_and_run(spec: Path, tmp_path: Path,
                                                                                  monkeypatch) -> None:
    monkeypatch.delenv("HF_TOKEN", raising=False)
    runtime = LocalRuntime(LocalRunOptions(spec=spec, catalog=spec.parent / "tools.yaml", home=tmp_path / "home"))
    with pytest.raises(SpecError) as raised:
        runtime.run()
    [problem] = raised.value.problems
    assert problem.format() == (f"{spec}: states.publish: secret HF_TOKEN (for state publish) is not set in the "
                                "environment of npa-workflow run (fix: export HF_TOKEN before `npa-workflow run`)")
    assert not (tmp_path / "home" / "runs").exists() or not any((tmp_path / "home" / "runs").iterdir())
    assert not (tmp_path / "home" / "jobs").exists()  # nothing launched


def test_serves_inbox_names_serve_and_a_stacks_inbox_names_the_step_secrets_secret(spec: Path,
                                                                                    monkeypatch) -> None:
    loaded = load_spec(spec, catalog=spec.parent / "tools.yaml")
    present, where, fix = wiring.step_secret_presence({environment.EXECUTOR: "local"})
    [problem] = secret_problems(loaded, present, where=where, fix=fix)
    assert "the environment of npa-workflow serve" in problem.message
    assert "export HF_TOKEN where `npa-workflow serve` starts, then restart serve" in problem.hint
    assert "npa-workflow run" not in problem.hint + problem.message
    # a stack without a step-secrets secret can give a step no secret: refused, naming the context value
    present, where, fix = wiring.step_secret_presence({environment.EXECUTOR: "skypilot"})
    [problem] = secret_problems(loaded, present, where=where, fix=fix)
    assert problem.message == ("secret HF_TOKEN (for state publish) cannot be given to its jobs: this stack has "
                               "no step-secrets secret")
    assert "-c stepSecretsArn=ARN" in problem.hint and "the key HF_TOKEN" in problem.hint
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(key, "x")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        arn = boto3.client("secretsmanager").create_secret(
            Name="steps", SecretString=json.dumps({"OTHER": "some-value"}))["ARN"]
        env = {environment.EXECUTOR: "skypilot", environment.STEP_SECRETS_ARN: arn, "AWS_DEFAULT_REGION": "us-east-1"}
        present, where, fix = wiring.step_secret_presence(env)
        [problem] = secret_problems(loaded, present, where=where, fix=fix)
        assert f"secret HF_TOKEN (for state publish) is not set in the step-secrets secret {arn}" == problem.message
        assert "some-value" not in problem.message + problem.hint  # keys only: no value in a message
        assert problem.hint.startswith("add the key HF_TOKEN to that JSON secret")
        boto3.client("secretsmanager").put_secret_value(SecretId=arn, SecretString="not json")
        present, where, fix = wiring.step_secret_presence(env)
        [problem] = secret_problems(loaded, present, where=where, fix=fix)
        assert problem.message == (f"secret HF_TOKEN (for state publish) cannot be given to its jobs: the "
                                   f"step-secrets secret {arn} is not a JSON object of NAME: value")
        gone = arn.replace(":steps-", ":gone-")  # a deleted (or never created) secret: the launch could not read it
        present, where, fix = wiring.step_secret_presence({**env, environment.STEP_SECRETS_ARN: gone})
        [problem] = secret_problems(loaded, present, where=where, fix=fix)
        assert "ResourceNotFoundException" in problem.message and "stepSecretsArn" in problem.hint
        boto3.client("secretsmanager").put_secret_value(SecretId=arn, SecretString=json.dumps({"HF_TOKEN": "hf-v"}))
        present, where, fix = wiring.step_secret_presence(env)
        assert secret_problems(loaded, present, where=where, fix=fix) == []
    # a secret the inbox cannot reach just now (the network): no verdict, the launch reads it again and says
    unreadable = wiring.step_secret_presence({environment.EXECUTOR: "skypilot", environment.STEP_SECRETS_ARN:
                                              "arn:aws:secretsmanager:us-east-1:123456789012:secret:gone-AbCdEf",
                                              "AWS_ENDPOINT_URL": "http://127.0.0.1:9"})
    assert unreadable[0](["HF_TOKEN"]) is None


class TwinInbox:
    """The inbox handler over moto (S3, Step Functions, DynamoDB, Secrets Manager): an engine bucket holding
    `catalog`, a ledger, ad-hoc machines allowed; `submit` uploads a spec under inbox/ and handles its event."""

    def __init__(self, catalog: str) -> None:
        from npa_workflow.adapters.s3_store import S3Store
        from npa_workflow.engine.context import Engine
        from npa_workflow.engine.inbox import InboxSettings
        from npa_workflow.engine.runs import RunStore
        from npa_workflow.ledger import DynamoLedger

        self.s3, self.sfn, self.ddb = boto3.client("s3"), boto3.client("stepfunctions"), boto3.client("dynamodb")
        self.s3.create_bucket(Bucket="engine")
        self.s3.put_object(Bucket="engine", Key="catalog/tools.yaml", Body=catalog.encode())
        ledger = DynamoLedger("ledger")
        ledger.create_table()
        store = S3Store(self.s3)
        self.engine = Engine(ledger=ledger, runs=RunStore(store, "engine"), store=store,
                             executor=None, callbacks=None)  # type: ignore[arg-type]
        self.settings = InboxSettings(allow_ad_hoc=True, ad_hoc_role_arn="arn:aws:iam::123456789012:role/adhoc")

    def submit(self, key: str, spec: str) -> Any:
        from npa_workflow.adapters.sfn_executions import SfnExecutions
        from npa_workflow.engine.inbox import handle_object

        put = self.s3.put_object(Bucket="engine", Key=key, Body=spec.encode())
        return handle_object(self.engine, SfnExecutions(self.sfn), bucket="engine", key=key, version_id=None,
                             etag=put["ETag"], settings=self.settings)


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for key, value in {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x", "AWS_DEFAULT_REGION": "us-east-1"
                       }.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        yield


def test_the_inbox_rejects_a_run_whose_secret_serve_lacks_before_starting_it(aws: None, monkeypatch) -> None:
    monkeypatch.setenv(environment.EXECUTOR, "local")
    monkeypatch.delenv("HF_TOKEN", raising=False)
    twin = TwinInbox(CATALOG)
    result = twin.submit("inbox/pre.yaml", SPEC)
    assert result.status == "rejected"
    [error] = result.errors
    assert error["path"] == "states.publish" and "HF_TOKEN" in error["message"]
    assert "npa-workflow serve" in error["message"] + error["hint"]
    assert twin.sfn.list_state_machines()["stateMachines"] == []  # nothing started


# prepare, a group (fit-b needs DB_PASS, which the step-secrets hold), a loop whose body needs WANDB_KEY
# (missing), then publish (HF_TOKEN, missing): the missing keys are needed from the third state on.
DATA = Path(__file__).resolve().parent / "data" / "preflight"
HELD_VALUE = "db-pass-value-never-said"


def test_a_stacks_inbox_refuses_a_run_whose_later_states_need_keys_the_step_secrets_lack(aws: None,
                                                                                         monkeypatch) -> None:
    """On the twin, the inbox as a stack runs it: the step-secrets secret's keys are read once; each missing key
    is one error naming the state, the secret and the key; no execution, no run record, no attempt; no value
    anywhere. With the keys added, the same spec starts."""
    secrets = boto3.client("secretsmanager")
    arn = secrets.create_secret(Name="step-secrets", SecretString=json.dumps({"DB_PASS": HELD_VALUE}))["ARN"]
    monkeypatch.setenv(environment.EXECUTOR, "skypilot")
    monkeypatch.setenv(environment.STEP_SECRETS_ARN, arn)
    twin, spec = TwinInbox((DATA / "tools.yaml").read_text()), (DATA / "late-secret.yaml").read_text()
    result = twin.submit("inbox/late-secret.yaml", spec)
    assert result.status == "rejected"
    assert [(e["path"], e["message"]) for e in result.errors] == [
        ("states.train", f"secret WANDB_KEY (for state train) is not set in the step-secrets secret {arn}"),
        ("states.publish", f"secret HF_TOKEN (for state publish) is not set in the step-secrets secret {arn}"),
    ]
    assert result.errors[0]["hint"].startswith("add the key WANDB_KEY to that JSON secret")
    assert twin.sfn.list_state_machines()["stateMachines"] == []  # nothing started: no machine, no execution
    assert twin.ddb.scan(TableName="ledger")["Items"] == []  # no run record, no wave attempt
    rejected = twin.s3.get_object(Bucket="engine", Key=result.rejected_key)["Body"].read().decode()
    assert "WANDB_KEY" in rejected and "HF_TOKEN" in rejected
    assert HELD_VALUE not in rejected + json.dumps(result.to_json())  # names only: never a value
    secrets.put_secret_value(SecretId=arn, SecretString=json.dumps(
        {"DB_PASS": HELD_VALUE, "WANDB_KEY": "wandb-value", "HF_TOKEN": "hf-value"}))
    started = twin.submit("inbox/late-secret-again.yaml", spec)
    assert started.status == "started", started
    [execution] = twin.sfn.list_executions(stateMachineArn=started.machine_arn)["executions"]
    assert execution["status"] == "RUNNING"
    stored = json.dumps(twin.ddb.scan(TableName="ledger")["Items"]) + twin.sfn.describe_execution(
        executionArn=execution["executionArn"])["input"]
    assert started.run_id in stored and HELD_VALUE not in stored and "hf-value" not in stored
