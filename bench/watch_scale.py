"""One watch tick with 100 / 1,000 / 10,000 active waves: wall time and AWS calls per wave.

The ledger (DynamoDB), the store (S3) and Step Functions are moto, in this process, with the speed-ups the
local stack applies to it (`embedded_aws.moto_speedups`: the same results, DynamoDB responses serialized faster);
every wave is RUNNING on a scheduler that answers the one batched status call with "running" (an executor
of the port, so the figures are the watch pass's own, not SkyPilot's; its queue call is one call per tick
whatever N). The
heartbeats go to Step Functions for real; their tokens belong to no execution, so moto answers
InvalidToken — one call each, as on AWS.

Two ticks per size, as a warm watch Lambda sees them: the first with a cold heartbeat clock (every token
is beaten once), the second 60 s of schedule later (nothing due: a heartbeat is due every 0.4 × 300 s).
`cpu s` is this process's CPU time (moto's work and the pass's, every thread): on a shared machine it is
steadier than the wall time. `--before REV` also times the watch pass of git revision REV (e.g. the commit
before the scale work) on the same setup: the baseline.

moto serves a call in-process in well under a millisecond and the GIL serializes it, so threads cannot
speed moto up; AWS answers in ~10–30 ms per call over the network, where 32 threads overlap them. The last
column projects AWS wall time from the measured calls: calls × 20 ms / min(32, waves) — a projection,
labelled so, against the 120 s the watch function has (infra's timeout).

    .venv/bin/python bench/watch_scale.py [--sizes 100,1000,10000] [--before 537e42e^]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
AWS_CALL_SECONDS = 0.020
WATCH_TIMEOUT_SECONDS = 120.0


class AllRunning:
    """The scheduler port: one batched status call per tick, every job running."""

    def __init__(self) -> None:
        self.calls = 0

    def observe(self, jobs: list[Any]) -> dict[str, Any]:
        from npa_workflow.engine.ports import Observation

        self.calls += 1
        return {j.key: Observation("running", job_id=j.job_id, started_at="2026-12-01T00:00:00.000Z") for j in jobs}

    def find_by_name(self, name: str) -> list[str]:
        return []

    def submit(self, job: Any) -> Any:
        raise NotImplementedError

    def cancel(self, job_ids: list[str]) -> None:
        pass

    def confirm_cancelled(self, job_ids: list[str], timeout_seconds: float) -> bool:
        return True


def load_watch(revision: str | None) -> Any:
    from npa_workflow.engine import watch

    if revision is None:
        return watch
    source = subprocess.run(["git", "-C", str(ROOT), "show", f"{revision}:layers/engine/npa_workflow/engine/watch.py"],
                            capture_output=True, text=True, check=True).stdout
    path = Path(tempfile.mkdtemp()) / "watch_before.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("watch_before", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["watch_before"] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def seed(ledger: Any, n: int) -> None:
    from npa_workflow.ledger import WaveAttempt, WaveStatus

    items = [WaveAttempt(run_id=f"run-{i // 50}", wave_key=f"state-{i % 50}", state=f"state-{i % 50}", attempt=1,
                         job_name=f"job-{i}", job_id=str(i), task_token=f"token-{i}", status=WaveStatus.RUNNING,
                         submitted_at="2026-12-01T00:00:00.000Z", started_at="2026-12-01T00:00:00.000Z").to_item()
             for i in range(n)]
    for start in range(0, len(items), 25):
        batch = [{"PutRequest": {"Item": item}} for item in items[start:start + 25]]
        ledger.client.batch_write_item(RequestItems={ledger.table_name: batch})


def one_size(n: int, revision: str | None) -> list[tuple[str, float, float, Counter[str]]]:
    import boto3
    from moto import mock_aws

    from npa_workflow.adapters.s3_store import S3Store
    from npa_workflow.adapters.sfn_callbacks import SfnCallbacks
    from npa_workflow.embedded_aws.moto_speedups import moto_speedups
    from npa_workflow.engine.context import Engine
    from npa_workflow.engine.runs import RunStore
    from npa_workflow.ledger import DynamoLedger

    watch = load_watch(revision)
    rows = []
    with mock_aws(), moto_speedups():  # the twin's moto: the local stack applies the same speed-ups
        session = boto3.session.Session(region_name="us-east-1")
        calls: Counter[str] = Counter()
        clients = {name: session.client(name) for name in ("s3", "dynamodb", "stepfunctions")}
        for client in clients.values():
            client.meta.events.register("before-call.*.*", lambda model, **_: calls.update([model.name]))
        clients["s3"].create_bucket(Bucket="engine")
        ledger = DynamoLedger("ledger", clients["dynamodb"])
        ledger.create_table()
        seed(ledger, n)
        store = S3Store(clients["s3"])
        executor = AllRunning()
        engine = Engine(ledger=ledger, runs=RunStore(store, "engine"), store=store, executor=executor,
                        callbacks=SfnCallbacks(clients["stepfunctions"]))
        new = hasattr(watch, "HeartbeatClock")  # a revision from before the scale work beats every token
        clock = watch.HeartbeatClock() if new else None
        for tick in ("cold", "warm"):
            calls.clear()
            executor.calls = 0
            started, cpu_started = time.perf_counter(), time.process_time()
            if new:
                report = watch.watch_pass(engine, budget_seconds=WATCH_TIMEOUT_SECONDS, heartbeat_every_seconds=120,
                                          clock=clock)
            else:
                report = watch.watch_pass(engine)
            wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
            assert report.active == n, (report.active, n)
            calls["scheduler.observe"] = executor.calls
            calls["deferred (next tick)"] = getattr(report, "deferred", 0)
            rows.append((tick, wall, cpu, Counter(calls)))
            if clock is not None:  # the next tick starts a minute of schedule after this one's beats
                now = time.monotonic()
                for token in list(clock._last):
                    clock._last[token] = now - 60
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--before", default=None, help="git revision whose watch pass is the baseline")
    args = parser.parse_args()
    dummy = {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x", "AWS_DEFAULT_REGION": "us-east-1"}
    for key, value in dummy.items():
        os.environ.setdefault(key, value)
    os.environ.pop("AWS_ENDPOINT_URL", None)
    versions = [("before " + args.before, args.before)] if args.before else []
    versions.append(("now", None))
    pooled = {revision: hasattr(load_watch(revision), "HeartbeatClock") for _, revision in versions}
    print(f"{'version':<22}{'waves':>7} {'tick':<5}{'wall s':>9}{'cpu s':>8}{'calls/wave':>11}  {'by API':<52}"
          f"{'AWS proj. s':>11}{'deferred':>9}")
    for size in (int(s) for s in args.sizes.split(",")):
        for label, revision in versions:
            for tick, wall, cpu, calls in one_size(size, revision):
                deferred = calls.pop("deferred (next tick)")
                total = sum(calls.values())
                workers = min(32, size) if pooled[revision] else 1
                projected = total * AWS_CALL_SECONDS / workers
                top = ", ".join(f"{k} {v}" for k, v in calls.most_common(4))
                print(f"{label:<22}{size:>7} {tick:<5}{wall:>9.2f}{cpu:>8.2f}{total / size:>11.2f}  {top:<52}"
                      f"{projected:>11.1f}{deferred:>9}", flush=True)
    print(f"(AWS projection: calls x {AWS_CALL_SECONDS * 1000:.0f} ms / threads; the watch function's timeout is "
          f"{WATCH_TIMEOUT_SECONDS:.0f} s)")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "layers" / "engine"))
    main()
