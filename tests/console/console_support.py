"""Helpers of the console tests: a local run's folder written through the real durable layer, SSE viewers."""

from __future__ import annotations

import http.client
import json
import os
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from deadlines import deadline as scaled  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from e2e_support import stop_process  # noqa: E402, F401 - the one stop-a-process helper, re-exported for the tests

from npa_workflow.embedded_aws.durable_aws import RUN_STATE_DIR, DurableAws
from npa_workflow.ledger import RunRecord, WaveAttempt, WaveStatus
from npa_workflow.protocol.stack import LOCAL_LEDGER_TABLE

REPO = Path(__file__).resolve().parents[2]
SPECS = REPO / "specs"
ARTIFACTS = Path(os.environ.get("NPA_CONSOLE_ARTIFACTS", REPO / "tests" / "console" / "artifacts"))
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def chromium_path() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        raise AssertionError("no chromium on PATH: run scripts/install-system-deps.sh (Debian's chromium package)")
    return found


class LocalRunWriter:
    """A local run's folder (`runs/<id>/`) as `npa-workflow run` keeps it, its ledger written through the real
    `DurableAws` (the run's process holds its lock, so the run reads as RUNNING)."""

    def __init__(self, home: Path, run_id: str, spec: Path, workflow: str) -> None:
        self.run_id = run_id
        self.run_dir = home / "runs" / run_id
        self.run_dir.mkdir(parents=True)
        (self.run_dir / "meta.json").write_text(json.dumps({
            "run_id": run_id, "workflow": workflow, "spec": str(spec), "vars": {},
            "executions": [{"name": run_id, "arn": "", "started_at": "2026-01-01T00:00:00.000Z"}]}))
        self.durable = DurableAws(self.run_dir / RUN_STATE_DIR)
        self.put(RunRecord(run_id=run_id, workflow=workflow).to_item())

    def end(self, status: str) -> None:
        """The execution ended: what the runtime writes into meta.json (its report.json comes later)."""
        meta = json.loads((self.run_dir / "meta.json").read_text())
        meta["executions"][-1].update(status=status, ended_at="2026-01-01T00:01:00.000Z")
        (self.run_dir / "meta.json").write_text(json.dumps(meta))

    def put(self, item: dict[str, Any]) -> None:
        key = {"pk": item["pk"], "sk": item["sk"]}
        self.durable.record_item(LOCAL_LEDGER_TABLE, key, item)

    def wave(self, wave_key: str, status: WaveStatus, attempt: int = 1, **fields: Any) -> None:
        """A wave attempt: `train|refine=2` is state train in round 2 of loop refine (the ledger's wave key)."""
        state = wave_key.split("|")[0]
        rounds = wave_key.partition("|")[2].replace("=", "").replace(",", "-")
        fields.setdefault("job_id", f"local-{state}{rounds}a{attempt}")
        fields.setdefault("started_at", "2026-01-01T00:00:01.000Z")
        self.put(WaveAttempt(run_id=self.run_id, wave_key=wave_key, state=state, attempt=attempt, status=status,
                             **fields).to_item())

    def close(self) -> None:
        self.durable.close()


class Viewer(threading.Thread):
    """One browser-less viewer: reads `/runs/<id>/events` and keeps every `run` event's payload."""

    def __init__(self, port: int, run_id: str) -> None:
        super().__init__(daemon=True)
        self.port, self.run_id = port, run_id
        self.events: list[dict[str, Any]] = []
        self.connected = threading.Event()
        self.conn: http.client.HTTPConnection | None = None

    def run(self) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        self.conn.request("GET", f"/runs/{self.run_id}/events")
        response = self.conn.getresponse()
        assert response.status == 200, response.status
        self.connected.set()
        event = ""
        try:
            while True:
                line = response.fp.readline()
                if not line:
                    return
                text = line.decode().rstrip("\n")
                if text.startswith("event: "):
                    event = text[7:]
                elif text.startswith("data: ") and event == "run":
                    self.events.append(json.loads(text[6:]))
        except (OSError, ValueError):
            return

    def close(self) -> None:
        if self.conn is not None and self.conn.sock is not None:
            self.conn.sock.close()




def wait_until(predicate: Any, timeout: float, message: str, interval: float = 0.05) -> Any:
    """Polls `predicate` until it is truthy; `timeout` is what the work needs on the idle reference machine,
    scaled to this one (tests/deadlines.py)."""
    timeout = scaled(timeout)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"{message} (not within {timeout:.0f} s)")
