"""Clients in another folder (issue 18, item 9): `logs`/`status --endpoint` find a serve stack's job logs through
the stack (serve publishes its home), whatever folder and home the client has; `logs --follow` ends when the
runtime that runs its step is gone. Real `serve` and `run` processes."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from deadlines import deadline as scaled

CLI = [sys.executable, "-c", "from npa_workflow.cli.app import main; main()"]
SPECS = Path(__file__).resolve().parents[2] / "specs"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("AWS_ENDPOINT_URL", "NPA_WORKFLOW_HOME")}
    return {**env, **extra}


def _wait_for(predicate, timeout: float, what: str):
    timeout = scaled(timeout)  # the idle machine's figure, scaled to this one
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"{what} within {timeout}s")


@pytest.mark.timeout(300)
def test_logs_and_status_against_serve_from_another_folder_read_serves_home(tmp_path: Path) -> None:
    serve_dir, client_dir = tmp_path / "serve-here", tmp_path / "client-elsewhere"
    serve_dir.mkdir()
    client_dir.mkdir()
    out = open(serve_dir / "serve.out", "w+")  # noqa: SIM115 - closed below
    # serve's home is the default one of its folder (./.npa-workflow); the client's folder has none.
    proc = subprocess.Popen([*CLI, "serve", "--port", str(_free_port()), "--catalog", str(SPECS / "tools.yaml")],
                            cwd=serve_dir, env=_env(), stdout=out, stderr=subprocess.STDOUT, text=True)
    try:
        def endpoint() -> str | None:
            assert proc.poll() is None, (serve_dir / "serve.out").read_text()
            lines = (serve_dir / "serve.out").read_text().splitlines()
            return next((ln.split()[-1] for ln in lines if ln.startswith("npa-workflow serve: endpoint ")), None)

        url = _wait_for(endpoint, 120, "serve printed no endpoint")

        def client(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run([*CLI, *args, "--endpoint", url], cwd=client_dir, env=_env(), capture_output=True,
                                  text=True, timeout=120)

        done = client("submit", str(SPECS / "fanout.yaml"), "--var", "shard_sleep=0", "--wait", "--json")
        assert done.returncode == 0, done.stderr
        import json

        run_id = json.loads(done.stdout)["run_id"]
        home = (serve_dir / ".npa-workflow").resolve()
        logs = client("logs", run_id, "join")
        assert logs.returncode == 0, logs.stderr
        join_logs = [p for p in (home / "jobs").glob("*.log") if p.read_text() == logs.stdout]
        assert logs.stdout.strip() and join_logs, logs.stdout
        status = client("status", run_id)
        assert status.returncode == 0 and f"log of join attempt 1: {home / 'jobs'}" in status.stdout, status.stdout
        assert not (client_dir / ".npa-workflow").exists()  # nothing looked for, or made, in the client's folder
        # serve's steps reached S3 through the step gate, each with a key of its own (embedded_aws.step_gate),
        # revoked once serve saw its job end: the run is over, so no grant is left
        records = [json.loads(p.read_text()) for p in (home / "jobs").glob("local-*.json")]
        assert len(records) >= 5, records  # prepare, three shards, join, done
        assert all({"AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID"} <= set(r["env_keys"]) for r in records), records
        access = home / "serve" / "step-access"
        assert access.is_dir() and not [p for p in access.rglob("*") if p.is_file()]
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        out.close()


@pytest.mark.timeout(240)
def test_logs_follow_ends_when_the_run_that_runs_its_step_is_killed(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    spec = ws / "slow.yaml"
    spec.write_text("apiVersion: npa.workflow/v0.0.1\nkind: Workflow\nmetadata: {name: slow}\ninitial: a\n"
                    "states:\n  a: {run: {shell: \"echo started; sleep 120\"}, terminal: true}\n")
    home = tmp_path / "home"
    env = _env(NPA_WORKFLOW_HOME=str(home))
    runtime = subprocess.Popen([*CLI, "run", str(spec), "--run-id", "slow1"], cwd=ws, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    follower = None
    try:
        def started() -> bool:
            return any(p.read_text().startswith("started") for p in (home / "jobs").glob("*.log")) \
                if (home / "jobs").is_dir() else False

        _wait_for(started, 120, "the step did not start")
        follower = subprocess.Popen([*CLI, "logs", "slow1", "a", "--follow"], cwd=ws, env=env,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(2)
        assert follower.poll() is None  # following while the run goes
        os.kill(runtime.pid, signal.SIGKILL)  # the runtime is gone; its job goes on (until resume or its end)
        runtime.wait()
        stdout, stderr = follower.communicate(timeout=30)
        assert follower.returncode == 1, stderr
        assert stdout.startswith("started") and "is no longer running" in stderr and "--resume" in stderr, stderr
    finally:
        if follower is not None and follower.poll() is None:
            follower.kill()
        for record in (home / "jobs").glob("local-*.json"):  # the job the killed runtime left: ended here
            subprocess.run([*CLI, "jobs", "cancel", record.stem], env=env, capture_output=True, timeout=60)
