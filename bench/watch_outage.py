"""The watch handler under load and through a SkyPilot outage: heartbeats sent per due token, SkyPilot calls per
pending wave, pass duration against the budget.

The real watch handler (`functions/watch/handler.py`) runs over the twin's ledger (moto DynamoDB in this process,
with the local stack's speed-ups) and the real `SkyPilotApi` client / `SkyPilotExecutor`, which talk HTTP to the
SkyPilot stand-in on 127.0.0.1 (`tests/integration/skypilot/double.py`: a 0.14.1 server's recorded shapes) at
150 ms per answer. 10,000 waves in 200 runs: 3,000 launches still pending on the server (their job ids not yet
made), 7,000 jobs RUNNING. Heartbeats are due every 120 s (0.4 × HeartbeatSeconds 300); between passes the
heartbeat clock is moved on 60 s, a simulated minute of the schedule. SendTaskHeartbeat is answered in the client
(a live token: moto would answer InvalidToken for tokens of no execution, which the watch then treats as a
possibly lost reap), and counted per call.

Scenarios (each in its own process; a pass still running at the watch function's 120 s timeout is cut there, as
Lambda kills it, and counted as it stood):
- load: three passes a minute apart (a cold clock: every token due; then none; then all again);
- outage: SkyPilot down (connections refused) from the first pass on, for `--outage-minutes` passes a minute
  apart (the first with a cold clock: every token due), then back.

`--code DIR` runs the engine of another checkout (`git worktree add /tmp/watch-main main`): the baseline.

    .venv/bin/python bench/watch_outage.py [--code /tmp/watch-main] [--waves 10000] [--outage-minutes 10]

Figures (2026-12-02, 2 cores at load ~18–20; docs/cloud.md, "The watch under load and outages"):
main sent 0 of 10,000 due heartbeats in its first pass, under load and with SkyPilot down (cut at 120 s);
now every due heartbeat in every pass (sent/due 1.00 in the 3 load passes and the 11 outage passes, none
deferred, no wave failed), passes of 44–109 s against the 115 s budget, 0.001–0.006 SkyPilot calls per pending
wave per pass (target ≤ 1.05).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DOUBLE = ROOT / "tests" / "integration" / "skypilot" / "double.py"
TIMEOUT_SECONDS = 120.0  # the watch function's timeout (infra)
LATENCY = 0.150
RUNS = 200


def load_double() -> Any:
    spec = importlib.util.spec_from_file_location("skypilot_double", DOUBLE)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def seed(ledger: Any, double: Any, waves: int, pending: int) -> None:
    from npa_workflow.ledger import WaveAttempt, WaveStatus

    items = []
    for i in range(waves):
        name = f"job-{i}"
        if i < pending:
            ids = {"request_id": double.seed_launch(name)}
            status = WaveStatus.LAUNCHING
        else:
            ids = {"job_id": str(double.seed_job(name))}
            status = WaveStatus.RUNNING
        items.append(WaveAttempt(run_id=f"run-{i % RUNS}", wave_key=f"w{i}", state="work", attempt=1, job_name=name,
                                 task_token=f"token-{i}", status=status, **ids).to_item())
    for start in range(0, len(items), 25):
        batch = [{"PutRequest": {"Item": item}} for item in items[start:start + 25]]
        ledger.client.batch_write_item(RequestItems={ledger.table_name: batch})


class Counts:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: dict[str, int] = {}

    def hook(self, model: Any, **_: Any) -> None:
        with self.lock:
            self.calls[model.name] = self.calls.get(model.name, 0) + 1

    def get(self, name: str) -> int:
        with self.lock:
            return self.calls.get(name, 0)


def live_heartbeat(**_: Any) -> Any:
    from botocore.awsrequest import AWSResponse

    return AWSResponse("https://states.local", 200, {}, None), {}


class Cut:
    """One pass's figures, printed by the pass's end or, if it runs past the function's timeout, at the timeout
    (then the process ends: Lambda kills the sandbox, the rest of the plan never runs)."""

    def __init__(self, counts: Counts, double: Any, row: dict[str, Any]) -> None:
        self.counts, self.double, self.row = counts, double, row
        self.beats, self.fails, self.calls = (counts.get("SendTaskHeartbeat"), counts.get("SendTaskFailure"),
                                              len(double.calls))
        self.started = time.monotonic()
        self.done = threading.Event()
        threading.Thread(target=self._watchdog, daemon=True).start()

    def line(self, cut: bool) -> dict[str, Any]:
        return {**self.row, "heartbeats": self.counts.get("SendTaskHeartbeat") - self.beats,
                "failed": self.counts.get("SendTaskFailure") - self.fails,
                "skypilot_calls": len(self.double.calls) - self.calls,
                "seconds": round(time.monotonic() - self.started, 1), "cut_at_timeout": cut}

    def _watchdog(self) -> None:
        if not self.done.wait(TIMEOUT_SECONDS):
            print(json.dumps(self.line(True)), flush=True)
            os._exit(0)


def child(args: argparse.Namespace) -> None:
    """One scenario; prints one JSON line per pass."""
    import boto3
    from moto import mock_aws

    for key, value in {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x", "AWS_DEFAULT_REGION": "us-east-1",
                       "NPA_WORKFLOW_LEDGER_TABLE": "ledger", "NPA_WORKFLOW_BUCKET": "engine",
                       "NPA_WORKFLOW_EXECUTOR": "skypilot", "NPA_WORKFLOW_HEARTBEAT_EVERY_SECONDS": "120",
                       "POWERTOOLS_METRICS_DISABLED": "true", "POWERTOOLS_TRACE_DISABLED": "true",
                       "POWERTOOLS_LOG_LEVEL": "ERROR", "POWERTOOLS_METRICS_NAMESPACE": "bench"}.items():
        os.environ[key] = value
    os.environ.pop("AWS_ENDPOINT_URL", None)
    import logging

    logging.disable(logging.WARNING)  # the client logs each retry of the outage
    from functions.watch.handler import handler
    from npa_workflow import wiring
    from npa_workflow.embedded_aws.moto_lambda import LambdaContext
    from npa_workflow.embedded_aws.moto_speedups import moto_speedups
    from npa_workflow.engine import watch

    double_mod = load_double()
    with mock_aws(), moto_speedups(), double_mod.SkyPilotDouble() as double:
        double.request_polls = 0
        double.job_statuses = ["RUNNING"]
        double.launch_seconds = 1e9  # the 3,000 launches stay pending throughout
        os.environ["SKYPILOT_API_SERVER_ENDPOINT"] = double.endpoint
        boto3.client("s3").create_bucket(Bucket="engine")
        wiring.clear_cache()
        engine = wiring.engine_from_environment()
        engine.ledger.create_table()
        seed(engine.ledger, double, args.waves, args.pending)
        counts = Counts()
        for client in (engine.ledger.client, engine.callbacks.client):
            client.meta.events.register("before-call.*.*", counts.hook)
        engine.callbacks.client.meta.events.register("before-call.states.SendTaskHeartbeat", live_heartbeat)
        double.latency = LATENCY
        clock = watch._CLOCK
        context = LambdaContext(function_name="watch", function_version="$LATEST",
                                invoked_function_arn="arn:aws:lambda:us-east-1:123456789012:function:watch",
                                memory_limit_in_mb=512, timeout_seconds=TIMEOUT_SECONDS, log_group_name="/aws/lambda/w")
        plan = ["up", "up", "up"] if args.scenario == "load" else (["down"] * args.outage_minutes + ["up"])
        tokens = [f"token-{i}" for i in range(args.waves)]
        for minute, state in enumerate(plan):
            if state == "down":
                double.outage()
            else:
                double.recover()
            now = time.monotonic()
            due = sum(1 for t in tokens if clock.due(t, 120, now))
            row = {"minute": minute, "skypilot": state, "due": due, "pending": args.pending}
            cut = Cut(counts, double, row)
            context._deadline = time.monotonic() + TIMEOUT_SECONDS  # a fresh invocation each minute
            result = handler({"id": f"tick-{minute}", "source": "aws.events"}, context)
            cut.done.set()
            if "due" in result:  # the pass's own count, at its start (this checkout's watch reports it)
                cut.row["due"] = result["due"]
            cut.row["deferred"] = result.get("deferred", 0)
            print(json.dumps(cut.line(False)), flush=True)
            with clock._lock:  # a simulated minute of the schedule before the next tick
                for token in list(clock._last):
                    clock._last[token] -= 60


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--code", default=None, help="a checkout whose engine is the baseline")
    parser.add_argument("--waves", type=int, default=10_000)
    parser.add_argument("--pending", type=int, default=3_000)
    parser.add_argument("--outage-minutes", type=int, default=10)
    parser.add_argument("--scenario", choices=("load", "outage"), default=None, help="(internal: one child)")
    parser.add_argument("--only", action="append", choices=("load", "outage"), help="run only this scenario")
    parser.add_argument("--baseline-only", action="store_true", help="with --code: skip this checkout")
    args = parser.parse_args()
    if args.scenario:
        child(args)
        return
    versions = ([("main", Path(args.code).resolve())] if args.code else []) + ([] if args.baseline_only else
                                                                               [("now", ROOT)])
    print(f"{args.waves} waves in {RUNS} runs, {args.pending} launches pending, SkyPilot answers in "
          f"{LATENCY * 1000:.0f} ms; budget {TIMEOUT_SECONDS:.0f} s (the watch function's timeout)")
    print(f"{'code':<6}{'scenario':<9}{'min':>4} {'skypilot':<9}{'due':>7}{'sent':>7}{'sent/due':>9}{'failed':>7}"
          f"{'calls/pending':>14}{'pass s':>8}{'deferred':>9}  cut at timeout")
    for label, code in versions:
        for scenario in args.only or ("load", "outage"):
            env = dict(os.environ, PYTHONPATH=f"{code / 'layers' / 'engine'}{os.pathsep}{code}")
            out = subprocess.run([sys.executable, __file__, "--scenario", scenario, "--waves", str(args.waves),
                                  "--pending", str(args.pending), "--outage-minutes", str(args.outage_minutes)],
                                 env=env, capture_output=True, text=True, cwd=str(code))
            rows = [json.loads(x) for x in out.stdout.splitlines() if x.startswith("{")]
            if not rows:
                print(f"{label:<6}{scenario:<9} failed: {out.stderr.strip().splitlines()[-1:]}")
            for r in rows:
                ratio = f"{r['heartbeats'] / r['due']:.2f}" if r["due"] else "-"
                per = f"{r['skypilot_calls'] / r['pending']:.3f}" if r["pending"] else "-"
                cut = "yes" if r["cut_at_timeout"] else ""
                print(f"{label:<6}{scenario:<9}{r['minute']:>4} {r['skypilot']:<9}{r['due']:>7}{r['heartbeats']:>7}"
                      f"{ratio:>9}{r['failed']:>7}{per:>14}{r['seconds']:>8.1f}{r.get('deferred', '-'):>9}  {cut}",
                      flush=True)


if __name__ == "__main__":
    main()  # a scenario imports the engine from PYTHONPATH (this checkout's, or --code's)
