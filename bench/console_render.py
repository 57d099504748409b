"""The console's run page for a run of 1,000 waves: first render, warm render and live update, side by side with
`npa-workflow status --json` of the same run; and the runs page among 10,000 runs.

The run is a local run's folder as `npa-workflow run` keeps it (meta.json and its ledger, written through the real
durable layer, `embedded_aws.durable_aws`): a leaf loop of 1,000 rounds, each round one wave. The console reads it
through `console.sources.LocalSource`, as `npa-workflow console` does.

- `status --json`: the CLI as a user runs it (a process: start-up included), and its read alone in this process
  (`cli.local_runs.LocalRunFollower.report`: the ledger read and the report, what the console reads too);
- page, first: GET /runs/RUN on a fresh console (the spec's graph, plan and cost estimate made once per run);
- page, warm: GET again (what every further page view costs);
- update: a ledger write → the SSE event in a viewer connected to a real server (the watcher's stat poll, one
  read, the render of every section, the push); median of `--updates` writes.
- runs page: GET /?page=100 among 10,000 local runs, first (every meta.json read) and warm (stat only).

The issue's goal: render ≤ 1 s and update ≤ 1 s on this machine.

    .venv/bin/python bench/console_render.py [--waves 1000] [--updates 5] [--runs 10000]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "layers" / "engine"))

from npa_workflow.embedded_aws.durable_aws import RUN_STATE_DIR, DurableAws  # noqa: E402
from npa_workflow.ledger import RunRecord, WaveAttempt, WaveStatus  # noqa: E402

TABLE = "npa-workflow-ledger"
warnings.filterwarnings("ignore", message=".*httpx2.*")  # Starlette's TestClient on httpx: the figures are the same
SPEC = """apiVersion: npa.workflow/v0.0.1
kind: Workflow
metadata: {{name: spin}}
initial: spin
states:
  spin:
    run: {{argv: ["true"]}}
    loop: {{max: {rounds}}}
    next: done
  done: {{run: {{argv: ["true"]}}, terminal: true}}
"""


def at(second: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(1_767_225_600 + second)) + ".000Z"


def write_run(home: Path, run_id: str, waves: int) -> tuple[Path, DurableAws]:
    home.mkdir(parents=True, exist_ok=True)
    spec = home / "spin.yaml"
    spec.write_text(SPEC.format(rounds=waves + 5))
    run_dir = home / "runs" / run_id
    run_dir.mkdir(parents=True)
    (run_dir / "meta.json").write_text(json.dumps({"run_id": run_id, "workflow": "spin", "spec": str(spec),
                                                   "vars": {}, "executions": [{"name": run_id, "arn": "",
                                                                               "started_at": at(0)}]}))
    durable = DurableAws(run_dir / RUN_STATE_DIR)  # held by this process: the run reads as RUNNING
    put(durable, RunRecord(run_id=run_id, workflow="spin", started_at=at(0)).to_item())
    for n in range(1, waves + 1):
        put(durable, wave(run_id, n))
    return run_dir, durable


def wave(run_id: str, n: int, status: WaveStatus = WaveStatus.SUCCEEDED) -> dict[str, Any]:
    return WaveAttempt(run_id=run_id, wave_key=f"spin|spin={n}", state="spin", iteration=n, attempt=1,
                       status=status, job_id=f"local-{n:016x}", started_at=at(n),
                       ended_at=at(n + 1) if status == WaveStatus.SUCCEEDED else None).to_item()


def put(durable: DurableAws, item: dict[str, Any]) -> None:
    durable.record_item(TABLE, {"pk": item["pk"], "sk": item["sk"]}, item)


def timed(call: Any) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def status_cli(home: Path, run_id: str) -> float:
    env = {**os.environ, "NPA_WORKFLOW_HOME": str(home)}
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", "from npa_workflow.cli.app import main; main()", "status", run_id,
                           "--json"], env=env, capture_output=True, text=True, timeout=120)
    elapsed = time.perf_counter() - started
    assert done.returncode == 0, done.stderr
    return elapsed


def update_latency(home: Path, run_id: str, durable: DurableAws, waves: int, updates: int) -> list[float]:
    from npa_workflow.console.app import Console
    from npa_workflow.console.server import ConsoleServer
    from npa_workflow.console.sources import LocalSource

    server = ConsoleServer(Console(LocalSource(home)), 0).start()
    got: list[tuple[float, int]] = []
    arrived = threading.Condition()

    def viewer() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        conn.request("GET", f"/runs/{run_id}/events")
        response = conn.getresponse()
        for line in response.fp:
            if line.startswith(b"data: "):
                payload = json.loads(line[6:])
                with arrived:
                    got.append((time.perf_counter(), payload["sections"]["timeline"].count("<tr class=\"wave ")))
                    arrived.notify_all()

    threading.Thread(target=viewer, daemon=True).start()
    with arrived:
        arrived.wait_for(lambda: got, 60)
    latencies = []
    try:
        for i in range(updates):
            n = waves + 1 + i
            with arrived:
                seen = len(got)
            written = time.perf_counter()
            put(durable, wave(run_id, n, WaveStatus.RUNNING))
            with arrived:
                arrived.wait_for(lambda seen=seen, n=n: len(got) > seen and got[-1][1] >= n, 30)
                latencies.append(got[-1][0] - written)
            time.sleep(0.2)
    finally:
        server.stop()
    return latencies


def runs_page(home: Path, count: int) -> tuple[float, float]:
    from starlette.testclient import TestClient

    from npa_workflow.console.app import Console
    from npa_workflow.console.sources import LocalSource

    for i in range(count):
        run_dir = home / "runs" / f"bulk-{i:05d}"
        run_dir.mkdir(parents=True)
        (run_dir / "meta.json").write_text(json.dumps({
            "workflow": f"w{i % 7}", "spec": "x.yaml",
            "executions": [{"started_at": at(i), "status": "SUCCEEDED", "ended_at": at(i + 30)}]}))
    client = TestClient(Console(LocalSource(home)).app(), base_url="http://127.0.0.1")
    first = timed(lambda: client.get("/?page=100").raise_for_status())
    warm = timed(lambda: client.get("/?page=100&workflow=w3").raise_for_status())
    return first, warm


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--waves", type=int, default=1000)
    parser.add_argument("--updates", type=int, default=5)
    parser.add_argument("--runs", type=int, default=10_000)
    args = parser.parse_args()
    from starlette.testclient import TestClient

    from npa_workflow.cli.local_runs import LocalRunFollower
    from npa_workflow.console.app import Console
    from npa_workflow.console.sources import LocalSource

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        run_id = "spin-bench"
        run_dir, durable = write_run(home, run_id, args.waves)
        try:
            cli = status_cli(home, run_id)
            read = timed(lambda: LocalRunFollower(run_dir).report())
            client = TestClient(Console(LocalSource(home)).app(), base_url="http://127.0.0.1")
            first = timed(lambda: client.get(f"/runs/{run_id}").raise_for_status())
            warm = timed(lambda: client.get(f"/runs/{run_id}").raise_for_status())
            page = client.get(f"/runs/{run_id}")
            rows = page.text.count('<tr class="wave ')
            latencies = update_latency(home, run_id, durable, args.waves, args.updates)
        finally:
            durable.close()
        bulk_first, bulk_warm = runs_page(Path(tmp) / "bulk", args.runs)
    print(f"run of {args.waves:,} waves ({rows:,} timeline rows on the page, {len(page.content):,} bytes)")
    print(f"{'what':<44}{'seconds':>10}")
    print(f"{'status --json (the CLI, start-up included)':<44}{cli:>10.3f}")
    print(f"{'status read alone (ledger + report)':<44}{read:>10.3f}")
    print(f"{'run page, first render':<44}{first:>10.3f}")
    print(f"{'run page, warm render':<44}{warm:>10.3f}")
    print(f"{'live update, write → SSE event (median)':<44}{statistics.median(latencies):>10.3f}")
    print(f"{'live update, slowest of ' + str(len(latencies)):<44}{max(latencies):>10.3f}")
    print(f"{f'runs page among {args.runs:,} runs, first':<44}{bulk_first:>10.3f}")
    print(f"{f'runs page among {args.runs:,} runs, warm + filter':<44}{bulk_warm:>10.3f}")
    print("goal (issue 20): render ≤ 1 s, update ≤ 1 s")


if __name__ == "__main__":
    main()
