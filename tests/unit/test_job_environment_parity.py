"""One job environment: for every example of specs/, each state's local job (a real subprocess started by the
local executor) sees exactly the variables of the SkyPilot task launch renders for it (`envs`): the identity of
`protocol.environment`, the catalog's `env` and the engine's job env. The local job has on top only its base
(`local_jobs.job_environment`'s allow-list) and its executor's own markers."""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from pathlib import Path

import boto3
import pytest
import yaml
from deadlines import deadline as scaled
from moto import mock_aws

from npa_workflow.adapters.s3_store import S3Store
from npa_workflow.engine.context import Engine
from npa_workflow.engine.launch import launch
from npa_workflow.engine.runs import RunOptions, RunStore
from npa_workflow.ledger import DynamoLedger, RunRecord
from npa_workflow.local_jobs.gang import NODE_VARIABLES
from npa_workflow.local_jobs.job_environment import base_environment
from npa_workflow.local_jobs.job_executor import LocalJobExecutor
from npa_workflow.plan.planner import build_plan
from npa_workflow.protocol.environment import JOB_IDENTITY
from npa_workflow.protocol.keys import loop_keys
from npa_workflow.spec.load import load_spec

SPECS_DIR = Path(__file__).resolve().parents[2] / "specs"
EXAMPLES = sorted(SPECS_DIR.glob("*.yaml"))
EXAMPLES = [p for p in EXAMPLES if p.name != "tools.yaml"]
JOB_ENV = {"AWS_ENDPOINT_URL": "http://127.0.0.1:1", "AWS_DEFAULT_REGION": "us-east-1"}
# What a local job has beyond the task's envs: the executor's own markers (its job id and name), and the node
# variables SkyPilot's runtime sets on every node (not in the task document either)
LOCAL_MARKERS = {"NPA_LOCAL_JOB_ID", "NPA_LOCAL_JOB_NAME", *NODE_VARIABLES}


class EnvironmentDumping(LocalJobExecutor):
    """The real local executor, each job's command replaced by one that writes its environment to a file."""

    def __init__(self, state_dir: Path, out: Path) -> None:
        super().__init__(state_dir, cancel_grace_seconds=1.0)
        self.out = out
        self.tasks: dict[str, dict[str, str]] = {}

    def submit(self, job):
        path = self.out / f"{len(self.tasks)}.json"
        self.tasks[str(path)] = list(yaml.safe_load_all(job.task_yaml))[1]["envs"]
        dump = f"import json, os; json.dump(dict(os.environ), open({str(path)!r}, 'w'))"
        step = dataclasses.replace(job.step, argv=[sys.executable, "-c", dump], shell="")
        return super().submit(dataclasses.replace(job, step=step))


class NoCallbacks:
    def succeed(self, token, output):
        return True

    def fail(self, token, error, cause):
        return True

    def heartbeat(self, token):
        return True


@pytest.fixture
def engine(tmp_path: Path, monkeypatch):
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(key, "x")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        s3 = boto3.client("s3")
        s3.create_bucket(Bucket="engine")
        ledger = DynamoLedger("ledger")
        ledger.create_table()
        store = S3Store(s3)
        (tmp_path / "env").mkdir()
        yield Engine(ledger=ledger, runs=RunStore(store, "engine"), store=store,
                     executor=EnvironmentDumping(tmp_path / "jobs", tmp_path / "env"), callbacks=NoCallbacks(),
                     job_env=JOB_ENV, cancel_confirm_seconds=10)


def _wait_for(paths: list[str], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + scaled(timeout)
    while time.monotonic() < deadline:
        if all(Path(p).exists() and Path(p).stat().st_size for p in paths):
            return
        time.sleep(0.05)
    raise AssertionError(f"jobs wrote no environment: {[p for p in paths if not Path(p).exists()]}")


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_a_local_job_sees_the_rendered_skypilot_tasks_envs(engine, example: Path) -> None:
    loaded = load_spec(example, catalog=SPECS_DIR / "tools.yaml")
    keys = loop_keys(loaded.spec)
    engine.runs.freeze("r1", example.read_text(), (SPECS_DIR / "tools.yaml").read_text(), {}, RunOptions())
    engine.ledger.put_run(RunRecord(run_id="r1", workflow=loaded.spec.name))
    launched: set[str] = set()
    for i, step in enumerate(build_plan(loaded).steps):
        if not step.command or step.state in launched:
            continue
        launched.add(step.state)
        loops = {keys[name]: n for name, n in step.loops.items()}
        launch(engine, {"run_id": "r1", "state": step.state, "loops": loops, "token": f"t{i}"})
    tasks = engine.executor.tasks
    assert tasks, f"{example.name}: no job launched"
    _wait_for(list(tasks))
    base = base_environment()
    for path, envs in tasks.items():
        seen = json.loads(Path(path).read_text())
        assert set(JOB_IDENTITY) <= set(envs)
        assert {k: v for k, v in seen.items() if k in envs} == envs  # every variable of the task, its value
        extra = set(seen) - set(envs) - LOCAL_MARKERS
        assert {k: seen[k] for k in extra} == {k: base[k] for k in extra}, "a variable the task does not carry"
