"""Preflight through the commands (issue 21): a spec whose later states need secrets that are not there is
refused before its first job — by `run` (its environment), by `serve`'s inbox (serve's environment) — one line
per missing secret naming the state, the secret and the command that must have it; a held secret's value is
said nowhere. (The stack's inbox, over the step-secrets secret: tests/unit/test_preflight.py.)"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e_support import CLI, aws_client, cli, free_port, stop_process, wait_until

from npa_workflow.ledger.items import run_pk
from npa_workflow.protocol.stack import LOCAL_LEDGER_TABLE

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

# prepare, a group (fit-b needs DB_PASS, which is set), a loop whose body needs WANDB_KEY, then publish
# (HF_TOKEN): the two missing ones are needed only from the third state on.
DATA = Path(__file__).resolve().parents[1] / "unit" / "data" / "preflight"
HELD_VALUE = "db-pass-value-never-said"
MISSING = ("WANDB_KEY", "HF_TOKEN")


def folder(tmp_path: Path) -> Path:
    ws = tmp_path / "team"
    ws.mkdir()
    for name in ("tools.yaml", "late-secret.yaml"):
        (ws / name).write_text((DATA / name).read_text())
    return ws


def environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in MISSING and k != "AWS_ENDPOINT_URL"}
    return {**env, "DB_PASS": HELD_VALUE, **extra}


def nowhere_under(home: Path, value: str) -> None:
    for path in home.rglob("*"):
        if path.is_file():
            assert value.encode() not in path.read_bytes(), path


def test_run_refuses_before_any_job_one_line_per_missing_secret_naming_run(tmp_path: Path) -> None:
    ws, home = folder(tmp_path), tmp_path / "home"
    done = subprocess.run([*CLI, "run", "late-secret.yaml"], cwd=ws, capture_output=True, text=True, timeout=120,
                          env=environment(NPA_WORKFLOW_HOME=str(home)))
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert done.stderr.splitlines() == [
        "late-secret.yaml: states.train: secret WANDB_KEY (for state train) is not set in the environment of "
        "npa-workflow run (fix: export WANDB_KEY before `npa-workflow run`)",
        "late-secret.yaml: states.publish: secret HF_TOKEN (for state publish) is not set in the environment of "
        "npa-workflow run (fix: export HF_TOKEN before `npa-workflow run`)",
    ]
    assert HELD_VALUE not in done.stdout + done.stderr
    assert not (home / "jobs").exists() and not (home / "runs").exists()  # no run recorded, no job launched
    if home.exists():
        nowhere_under(home, HELD_VALUE)


class Serve:
    def __init__(self, endpoint: str, home: Path, ws: Path, log: Path) -> None:
        self.endpoint, self.home, self.ws, self.log = endpoint, home, ws, log

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return cli(*args, "--endpoint", self.endpoint, home=self.home, cwd=self.ws, timeout=120)


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    tmp = tmp_path_factory.mktemp("preflight-serve")
    ws, home, log_path = folder(tmp), tmp / "home", tmp / "serve.out"
    log = open(log_path, "w+")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([*CLI, "serve", "--port", str(free_port()), "--catalog", str(ws / "tools.yaml")],
                            env=environment(NPA_WORKFLOW_HOME=str(home)), stdout=log, stderr=subprocess.STDOUT,
                            text=True)
    try:
        def endpoint() -> str | None:
            assert proc.poll() is None, log_path.read_text()
            lines = log_path.read_text().splitlines()
            return next((line.split()[-1] for line in lines if line.startswith("npa-workflow serve: endpoint ")), None)

        yield Serve(wait_until(endpoint, 120, "serve printed no endpoint"), home, ws, log_path)
    finally:
        stop_process(proc)
        log.close()


@pytest.mark.parametrize("what", ["late-secret", "late-secret.yaml"], ids=["deployed", "file"])
def test_serves_inbox_refuses_before_any_job_naming_serve_not_run(serve: Serve, what: str) -> None:
    done = serve.cli("submit", what, "--json")
    assert done.returncode == 1, (done.stdout, done.stderr)
    doc = json.loads(done.stdout)
    assert doc["rejected"] and doc["run_id"] is None
    by_path = {e["path"].removeprefix("spec."): e for e in doc["errors"]}
    assert sorted(by_path) == ["states.publish", "states.train"], doc["errors"]
    for path, name in (("states.train", "WANDB_KEY"), ("states.publish", "HF_TOKEN")):
        error = by_path[path]
        assert error["message"].startswith(f"secret {name} (for state {path.split('.')[1]}) is not set in the "
                                           "environment of npa-workflow serve"), error
        assert error["hint"].startswith(f"export {name} where `npa-workflow serve` starts, then restart serve")
        assert "npa-workflow run" not in error["message"] + error["hint"]
    table = serve.cli("submit", what)  # the same, as lines: one per missing secret
    assert table.returncode == 1 and "rejected by the inbox" in table.stderr
    assert sum("is not set in the environment of npa-workflow serve" in line
               for line in table.stderr.splitlines()) == 2, table.stderr
    # nothing started: no execution, no run or attempt in the ledger, no job
    sfn = aws_client("stepfunctions", serve.endpoint)
    for machine in sfn.list_state_machines()["stateMachines"]:
        assert sfn.list_executions(stateMachineArn=machine["stateMachineArn"])["executions"] == []
    items = aws_client("dynamodb", serve.endpoint).scan(TableName=LOCAL_LEDGER_TABLE)["Items"]
    assert [i for i in items if i["pk"]["S"].startswith(run_pk(""))] == []  # (the stack's own watch lease only)
    jobs = serve.home / "jobs"
    assert not jobs.exists() or [p.name for p in jobs.iterdir() if p.is_file()] == []  # no job record, no log
    said = serve.log.read_text()  # and serve said so when it started, for the spec it deployed
    assert (f"npa-workflow serve: warning: {serve.ws / 'late-secret.yaml'}: states.publish: secret HF_TOKEN (for "
            "state publish) is not set in the environment of npa-workflow serve (fix: export HF_TOKEN where "
            "`npa-workflow serve` starts, then restart serve (its jobs get serve's environment)); its runs are "
            "refused until then") in said.splitlines()
    assert HELD_VALUE not in done.stdout + done.stderr + table.stderr + said
    nowhere_under(serve.home, HELD_VALUE)
