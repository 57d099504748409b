"""Values are data, never code (issue 18, item 1): every class of shell metacharacter in a var, through a real
`npa-workflow run`, through the inbox (a run request's `vars` on a deployed spec, ad-hoc specs off) and through the
rendered SkyPilot task. Each hostile value would create a file of its own if it ran; each must come back literally.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import boto3
import pytest
import yaml
from deadlines import deadline as scaled
from moto import mock_aws

from npa_workflow.adapters.s3_store import S3Store
from npa_workflow.adapters.sfn_executions import SfnExecutions
from npa_workflow.compile.asl import compile_spec
from npa_workflow.engine.context import Engine
from npa_workflow.engine.inbox import FUNCTION_ARN_ENVS, InboxSettings, handle_object
from npa_workflow.engine.launch import launch
from npa_workflow.engine.runs import RunStore
from npa_workflow.engine.watch import watch_pass
from npa_workflow.ledger import DynamoLedger
from npa_workflow.local_jobs.job_executor import LocalJobExecutor
from npa_workflow.spec.load import load_spec_text

pytestmark = pytest.mark.timeout(180)

# One value per metacharacter class; `PWN` is replaced by the file the value would create if it ran.
HOSTILE = {
    "semicolon": "x; touch PWN",
    "pipe": "x | touch PWN",
    "ampersand": "x & touch PWN",
    "and": "x && touch PWN",
    "subst": "$(touch PWN)",
    "backtick": "`touch PWN`",
    "single_quote": "'; touch PWN; '",
    "double_quote": '"; touch PWN; "',
    "newline": "x\ntouch PWN",
    "glob": "*",
    "redirect": "> PWN",
    "dollar": "${PATH:+$(touch PWN)}",
}
VALUES = {key: value.replace("PWN", f"pwned-{key}.txt") for key, value in HOSTILE.items()}

# Each value three times: a bare word, inside double quotes, inside single quotes.
SHELL = " ; ".join(
    f"printf '<%s>\\n' {{{{config.{k}}}}} \"{{{{config.{k}}}}}\" '{{{{config.{k}}}}}'" for k in VALUES)
SPEC = ("apiVersion: npa.workflow/v0.0.1\nkind: Workflow\nmetadata: {name: hostile}\n"
        f"config: {yaml.safe_dump({k: 'plain' for k in VALUES}, default_flow_style=True).strip()}\n"
        f"states:\n  say: {{run: {{shell: {json.dumps(SHELL)}}}, terminal: true}}\n")


def expected_output(values: dict[str, str]) -> str:
    return "".join(f"<{v}>\n" * 3 for v in values.values())


def planted(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("pwned-*"))


def var_args() -> list[str]:
    return [arg for key, value in VALUES.items() for arg in ("--var", f"{key}={value}")]


def cli(*args: str, cwd: Path, home: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NPA_WORKFLOW_HOME": str(home)}
    return subprocess.run([sys.executable, "-c", "from npa_workflow.cli.app import main; main()", *args],
                          cwd=cwd, env=env, text=True, capture_output=True, timeout=timeout)


def test_a_local_run_echoes_every_hostile_var_literally_and_runs_none(tmp_path):
    spec = tmp_path / "hostile.yaml"
    spec.write_text(SPEC)
    done = cli("run", str(spec), *var_args(), "--json", cwd=tmp_path, home=tmp_path / "home")
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert report["status"] == "SUCCEEDED"
    assert 0 < report["elapsed_seconds"] < 120  # the runtime's monotonic measure of the run, not wall-clock stamps
    [wave] = report["waves"]
    log = (tmp_path / "home" / "jobs" / f"{wave['job_id']}.log").read_text()
    assert log == expected_output(VALUES)
    assert planted(tmp_path) == []


def test_the_rendered_skypilot_task_keeps_every_hostile_var_one_word(tmp_path):
    spec = tmp_path / "hostile.yaml"
    spec.write_text(SPEC)
    done = cli("render", str(spec), *var_args(), "--run-id", "r1", "--out", str(tmp_path / "out"), cwd=tmp_path,
               home=tmp_path / "home", timeout=60)
    assert done.returncode == 0, done.stderr
    [task_file] = (tmp_path / "out").glob("*.yaml")
    [task] = [doc for doc in yaml.safe_load_all(task_file.read_text()) if doc and "run" in doc]
    work = tmp_path / "node"
    work.mkdir()
    ran = subprocess.run(["bash", "-c", task["run"]], cwd=work, capture_output=True, text=True, timeout=30)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == expected_output(VALUES)
    assert planted(tmp_path) == []


# --- the inbox ------------------------------------------------------------------------------------------------
class Callbacks:
    def __init__(self) -> None:
        self.done: dict[str, str] = {}

    def succeed(self, token, output):
        self.done[token] = "succeed"
        return True

    def fail(self, token, error, cause):
        self.done[token] = f"fail: {error}: {cause}"
        return True

    def heartbeat(self, token):
        return True


@pytest.fixture
def inbox_engine(tmp_path, monkeypatch):
    for key, value in {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x", "AWS_DEFAULT_REGION": "us-east-1",
                       "POWERTOOLS_METRICS_DISABLED": "true", "POWERTOOLS_TRACE_DISABLED": "true"}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.chdir(tmp_path)  # a local job starts in the spec's folder: this one, for a deployed spec
    with mock_aws():
        s3, sfn = boto3.client("s3"), boto3.client("stepfunctions")
        s3.create_bucket(Bucket="engine")
        s3.put_bucket_versioning(Bucket="engine", VersioningConfiguration={"Status": "Enabled"})
        ledger = DynamoLedger("ledger")
        ledger.create_table()
        store = S3Store(s3)
        engine = Engine(ledger=ledger, runs=RunStore(store, "engine"), store=store,
                        executor=LocalJobExecutor(tmp_path / "jobs", cancel_grace_seconds=1.0),
                        callbacks=Callbacks(), cancel_confirm_seconds=10)
        s3.put_object(Bucket="engine", Key="catalog/specs/hostile.yaml", Body=SPEC.encode())
        arns = {p: f"arn:aws:lambda:us-east-1:123456789012:function:{i}" for i, p in enumerate(FUNCTION_ARN_ENVS)}
        definition = json.dumps(compile_spec(load_spec_text(SPEC)).definition)
        for placeholder, arn in arns.items():
            definition = definition.replace(placeholder, arn)
        machine = sfn.create_state_machine(name="NpaWorkflow-hostile", definition=definition,
                                           roleArn="arn:aws:iam::123456789012:role/m", type="STANDARD")
        settings = InboxSettings(state_machines={"hostile": machine["stateMachineArn"]}, allow_ad_hoc=False,
                                 function_arns=arns)
        yield engine, s3, sfn, settings


def test_a_run_requests_hostile_vars_reach_a_deployed_specs_step_as_data(inbox_engine, tmp_path):
    engine, s3, sfn, settings = inbox_engine
    body = yaml.safe_dump({"apiVersion": "npa.workflow.run/v1", "spec": "hostile", "vars": VALUES})
    put = s3.put_object(Bucket="engine", Key="inbox/req.yaml", Body=body.encode())
    result = handle_object(engine, SfnExecutions(sfn), bucket="engine", key="inbox/req.yaml",
                           version_id=put.get("VersionId"), etag=put["ETag"], settings=settings)
    assert result.status == "started" and result.machine == "deployed", result
    launched = launch(engine, {"run_id": result.run_id, "state": "say", "token": "t1"})  # what the machine calls
    deadline = time.monotonic() + scaled(60)
    while "t1" not in engine.callbacks.done:
        assert time.monotonic() < deadline, "the step never ended"
        watch_pass(engine)
        time.sleep(0.1)
    assert engine.callbacks.done["t1"] == "succeed"
    log = (tmp_path / "jobs" / "jobs" / f"{launched['job_id']}.log").read_text()
    assert log == expected_output(VALUES)
    assert planted(tmp_path) == []
