"""Helpers of the end-to-end tests: workspaces with the example catalog, runs, timestamps, processes."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from npa_workflow.local.runtime import LocalRunOptions, run_local

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from deadlines import deadline as scaled  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SPECS = REPO / "specs"
REPORT_KEYS = {"run_id", "workflow", "status", "error", "waves", "decisions", "watermarks", "execution_arn",
               "state_transitions", "history_events", "notices", "execution_started_at",
               "elapsed_seconds"}
WAVE_KEYS = {"state", "group", "iteration", "attempt", "job_id", "status", "replayed", "left_running", "submitted_at",
             "started_at", "ended_at"}
CLI = [sys.executable, "-c", "from npa_workflow.cli.app import main; main()"]


def workspace(tmp_path: Path) -> Path:
    """A folder with the example catalog and step programs, where test specs are written."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "tools.yaml").write_text((SPECS / "tools.yaml").read_text())
    # a copy, not a symlink: `submit` stages the folder's files (a symlinked folder is not staged) and a stack's
    # jobs start in that staged code
    shutil.copytree(SPECS / "steps", ws / "steps", ignore=shutil.ignore_patterns("__pycache__"))
    return ws


def code_folder(tmp_path: Path) -> Path:
    """A folder holding a copy of the example step programs, as a team's repository would: `submit` stages the
    spec's folder and a stack's jobs start in that staged code (a symlink would not be staged)."""
    folder = tmp_path / "code-ws"
    if not folder.is_dir():
        shutil.copytree(SPECS / "steps", folder / "steps", ignore=shutil.ignore_patterns("__pycache__"))
    return folder


def write_spec(ws: Path, name: str, body: str) -> Path:
    path = ws / f"{name}.yaml"
    header = f"apiVersion: npa.workflow/v0.0.1\nkind: Workflow\nmetadata: {{name: {name}}}\n"
    path.write_text(header + textwrap.dedent(body))
    return path


def run(spec: Path, home: Path, **options: Any) -> dict[str, Any]:
    """A local run in this process (the runtime's Python API), fast retries and ticks."""
    options.setdefault("retry_interval_seconds", 1)
    options.setdefault("tick_seconds", 0.2)
    report = run_local(LocalRunOptions(spec=spec, home=home, **options))
    check_shape(report)
    return report


def check_shape(report: dict[str, Any]) -> None:
    # a local run's report adds its monotonic `elapsed_seconds`; a stack's (`status`) has none
    assert set(report) - {"elapsed_seconds"} == REPORT_KEYS - {"elapsed_seconds"}, sorted(report)
    for wave in report["waves"]:
        assert set(wave) == WAVE_KEYS, sorted(wave)
        assert wave["status"] in ("RUNNING", "SUCCEEDED", "FAILED", "CANCELLED")
    assert report["status"] in ("SUCCEEDED", "FAILED", "ABORTED", "TIMED_OUT")


def ts(value: str | None) -> float:
    assert value, "missing timestamp"
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def waves_of(report: dict[str, Any], state: str) -> list[dict[str, Any]]:
    return [w for w in report["waves"] if w["state"] == state]


def only(report: dict[str, Any], state: str) -> dict[str, Any]:
    found = waves_of(report, state)
    assert len(found) == 1, (state, found)
    return found[0]


def max_overlap(intervals: list[tuple[float, float]]) -> int:
    """Most intervals open at once (an interval ending exactly when another starts does not overlap it)."""
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals], key=lambda x: (x[0], x[1]))
    peak = now = 0
    for _, delta in events:
        now += delta
        peak = max(peak, now)
    return peak


def job_record(home: Path, job_id: str) -> dict[str, Any]:
    return json.loads((home / "jobs" / f"{job_id}.json").read_text())


def group_alive(pgid: int) -> bool:
    """Any live (non-zombie) process in process group `pgid`."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry.name}/stat").read_text()
        except OSError:
            continue
        fields = raw[raw.rfind(")") + 2:].split()
        if fields[0] not in ("Z", "X") and int(fields[2]) == pgid:
            return True
    return False


def job_gone(home: Path, job_id: str) -> bool:
    record = job_record(home, job_id)
    return not record.get("pgid") or not group_alive(int(record["pgid"]))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cli(*args: str, home: Path, cwd: Path | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NPA_WORKFLOW_HOME": str(home)}
    env.pop("AWS_ENDPOINT_URL", None)
    return subprocess.run([*CLI, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=scaled(timeout))


def interruptible() -> None:
    """A child's SIGINT back to its default, so that the test's Ctrl-C reaches it: a suite started in the
    background of a script (`./scripts/test.sh &`) inherits SIGINT ignored, and a Python started so installs no
    KeyboardInterrupt handler (the Ctrl-C tests then saw a run finish, or not end, after their signal)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_cli(*args: str, home: Path, cwd: Path | None = None) -> subprocess.Popen[str]:
    env = {**os.environ, "NPA_WORKFLOW_HOME": str(home)}
    env.pop("AWS_ENDPOINT_URL", None)
    return subprocess.Popen([*CLI, *args], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=interruptible)


def stop_process(proc: subprocess.Popen[Any], grace: float = 30) -> None:
    """SIGTERM (a serve or run cancels its jobs and exits), then SIGKILL past `grace` seconds."""
    proc.terminate()
    try:
        proc.wait(timeout=scaled(grace))
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def aws_client(service: str, endpoint: str) -> Any:
    import boto3

    return boto3.client(service, endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="testing",
                        aws_secret_access_key="testing")


def wait_until(predicate: Any, timeout: float, message: str, interval: float = 0.2) -> Any:
    """Polls `predicate` until it is truthy; `timeout` is what the work needs on the idle reference machine,
    scaled to this one (tests/deadlines.py)."""
    timeout = scaled(timeout)
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = predicate()
            if value:
                return value
        except Exception as exc:  # noqa: BLE001 - the server may not be up yet
            last = exc
        time.sleep(interval)
    raise AssertionError(f"{message} (not within {timeout:.0f} s; last error: {last})")


@contextmanager
def serve_in_this_process(catalog: Path, home: Path, tick_seconds: float = 0.2) -> Iterator[tuple[Any, dict[str, str]]]:
    """`serve` on a thread of this process (so a test can see its calls), stopped at the end: yields the Serve
    and the environment a CLI subprocess reaches it with."""
    from npa_workflow.local.serve import Serve, ServeOptions

    endpoint: list[str] = []
    serve = Serve(ServeOptions(catalog=catalog, home=home, tick_seconds=tick_seconds), on_endpoint=endpoint.append)
    thread = threading.Thread(target=serve.serve, name="serve", daemon=True)
    thread.start()
    try:
        url = wait_until(lambda: endpoint[0] if endpoint else None, 60, "serve did not start")
        env = {**os.environ, "NPA_WORKFLOW_HOME": str(home), "NPA_WORKFLOW_ENDPOINT": url}
        env.pop("AWS_ENDPOINT_URL", None)
        yield serve, env
    finally:
        serve.stop()
        thread.join(timeout=60)
