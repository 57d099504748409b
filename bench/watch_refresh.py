"""What one refresh of `status --watch` / `submit --wait` reads, for a run of 10,000 waves: AWS calls, DynamoDB read
units and bytes, side by side with a baseline revision (default `main`, checked out as a `git worktree`).

Each side runs in its own process with its own package (`PYTHONPATH=<tree>/layers/engine`) on the twin's AWS
(moto, in that process): a frozen spec in S3, a RUN item and 10,000 WAVE items in the ledger shaped as the
engine writes them (a task token, a four-entry timeline), an execution of a one-state machine. Three refreshes:

- first: the view's first read;
- unchanged: nothing was written since;
- changed: the watch pass ended one wave (and, on a side that has it, noted the run: `note_changes`).

A refresh is what the live view calls every second: `StackClient.report(run)` on a side without a follower
(the baseline), `StackClient.follow(run).refresh()` on one with it. Every call is counted through botocore's
`before-call` event, bytes from each `after-call`'s HTTP body; every DynamoDB call is sent with
`ReturnConsumedCapacity=TOTAL` (`provide-client-params`). moto answers a constant ConsumedCapacity per call
whatever the size read, so the table also gives the read units AWS would bill, from the bytes of the items read:
a GetItem ceil(size / 4 KB) (half if eventually consistent), a Query the page's items summed, then rounded up to
4 KB (DynamoDB developer guide, "Read consumption for Query"). moto's history of the one-state execution is a
handful of events; on AWS a 10,000-wave run's is tens of thousands, 1,000 a page, each refresh of the baseline.

    .venv/bin/python bench/watch_refresh.py [--waves 10000] [--baseline DIR | --baseline-rev main]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SPEC = """\
apiVersion: npa.workflow/v0.0.1
kind: Workflow
metadata: {name: wide}
initial: g
states:
  g: {parallel: [m], maxConcurrency: 64, terminal: true}
  m: {run: {shell: work}}
"""
TOKEN = "AAAAKgAAAAIAAAAAAAAAA" + "x" * 680  # a Step Functions task token is ~700 characters


def item_bytes(item: dict[str, Any]) -> int:
    """An item's size as DynamoDB counts it, near enough: names plus values (strings in UTF-8, numbers ~ digits/2 + 1,
    3 bytes per list or map plus 1 per element)."""
    def size(value: dict[str, Any]) -> int:
        (kind, v), = value.items()
        if kind == "S":
            return len(v.encode("utf-8"))
        if kind == "N":
            return len(v) // 2 + 1
        if kind == "BOOL" or kind == "NULL":
            return 1
        if kind == "L":
            return 3 + sum(1 + size(x) for x in v)
        if kind == "M":
            return 3 + sum(1 + len(k) + size(x) for k, x in v.items())
        return len(json.dumps(v))
    return sum(len(name) + size(value) for name, value in item.items())


def read_units(operation: str, params: dict[str, Any], parsed: dict[str, Any]) -> float:
    consistent = 1.0 if params.get("ConsistentRead") else 0.5
    if operation == "GetItem":
        return math.ceil(max(item_bytes(parsed.get("Item", {})), 1) / 4096) * consistent
    if operation == "Query":
        return math.ceil(max(sum(item_bytes(i) for i in parsed.get("Items", [])), 1) / 4096) * consistent
    return 0.0


def side(waves: int) -> None:
    """One side's figures (run in the side's own process), printed as JSON."""
    os.environ.update({"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x", "AWS_DEFAULT_REGION": "us-east-1"})
    os.environ.pop("AWS_ENDPOINT_URL", None)
    import boto3
    from moto import mock_aws

    from npa_workflow.adapters.s3_store import S3Store
    from npa_workflow.engine.runs import RunOptions, RunStore
    from npa_workflow.ledger import DynamoLedger, RunRecord, WaveAttempt, WaveStatus
    from npa_workflow.ledger.items import TimelineEntry
    from npa_workflow.protocol.keys import WaveKey
    from npa_workflow.stack_client import StackClient

    with mock_aws():
        boto3.client("s3").create_bucket(Bucket="engine")
        DynamoLedger("ledger").create_table()
        client = StackClient(boto3.session.Session(), bucket="engine", ledger_table="ledger")
        RunStore(S3Store(client.s3), "engine").freeze("wide", SPEC, "", {}, RunOptions())
        sfn = client.executions.client
        machine = sfn.create_state_machine(name="wide", roleArn="arn:aws:iam::123456789012:role/sfn",
                                           definition=json.dumps({"StartAt": "p", "States": {
                                               "p": {"Type": "Wait", "Seconds": 3600, "End": True}}}))
        arn = sfn.start_execution(stateMachineArn=machine["stateMachineArn"], name="wide")["executionArn"]
        client.ledger.put_run(RunRecord(run_id="wide", workflow="wide", execution_arn=arn))
        at = "2026-12-01T00:00:00.000Z"
        keys = [WaveKey("m", {"l1": i}).format() for i in range(waves)]  # distinct waves of one state
        items = [WaveAttempt(run_id="wide", wave_key=keys[i], state="m", group="g", attempt=1,
                             job_name=f"wide-m-{i:05d}", job_id=str(1000 + i), request_id=f"req-{i:05d}",
                             task_token=TOKEN, status=WaveStatus.RUNNING, submitted_at=at, started_at=at,
                             timeline=[TimelineEntry(at=at, status=s, note=n) for s, n in (
                                 ("PENDING", "begin"), ("LAUNCHING", f"job_id={1000 + i}, request_id=req-{i:05d}"),
                                 ("RUNNING", ""), ("RUNNING", "task 0 RUNNING"))]).to_item() for i in range(waves)]
        dynamo = client.ledger.client
        for start in range(0, len(items), 25):
            dynamo.batch_write_item(RequestItems={"ledger": [{"PutRequest": {"Item": i}} for i in
                                                              items[start:start + 25]]})

        calls: Counter[str] = Counter()
        figures = {"bytes": 0, "moto_capacity": 0.0, "read_units": 0.0}
        pending: dict[int, dict[str, Any]] = {}

        def before(model: Any, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
            calls[model.name] += 1
            pending[id(context)] = params

        def after(http_response: Any, parsed: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
            if model.has_streaming_output:  # reading the body here would take it from the caller: its length
                figures["bytes"] += int(http_response.headers.get("content-length") or 0)
            else:
                figures["bytes"] += len(http_response.content or b"")
            figures["moto_capacity"] += float(parsed.get("ConsumedCapacity", {}).get("CapacityUnits", 0) or 0)
            figures["read_units"] += read_units(model.name, pending.pop(id(context), {}), parsed)

        def total_capacity(params: dict[str, Any], **_: Any) -> None:
            params["ReturnConsumedCapacity"] = "TOTAL"

        for sdk in (dynamo, client.s3, sfn):
            sdk.meta.events.register("before-call.*.*", before)
            sdk.meta.events.register("after-call.*.*", after)
        dynamo.meta.events.register("provide-client-params.dynamodb.*", total_capacity)

        follow = getattr(client, "follow", None)
        refresh = follow("wide").refresh if follow else (lambda: client.report("wide"))
        results = {}
        for name in ("first", "unchanged", "changed"):
            if name == "changed":
                client.ledger.finish_attempt("wide", keys[0], 1, WaveStatus.SUCCEEDED)
                getattr(client.ledger, "note_changes", lambda: 0)()
            calls.clear()
            figures.update(bytes=0, moto_capacity=0.0, read_units=0.0)
            report = refresh()
            assert len(report["waves"]) == waves, len(report["waves"])
            results[name] = {"calls": dict(calls), **figures}
        print(json.dumps({"follower": bool(follow), "refreshes": results}))


def run_side(tree: Path, waves: int) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(tree / "layers" / "engine")}
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--side", "--waves", str(waves)], env=env,
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"watch_refresh: the side in {tree} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def calls_text(calls: dict[str, int]) -> str:
    return ", ".join(f"{n} {op}" for op, n in sorted(calls.items())) or "none"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--waves", type=int, default=10_000)
    parser.add_argument("--baseline", type=Path, help="a checkout of the baseline (default: a worktree of the rev)")
    parser.add_argument("--baseline-rev", default="main")
    parser.add_argument("--side", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        side(args.waves)
        return
    made = None
    baseline = args.baseline
    if baseline is None:
        made = Path(tempfile.mkdtemp(prefix="watch-refresh-")) / "baseline"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(made), args.baseline_rev],
                       check=True, capture_output=True)
        baseline = made
    try:
        before = run_side(baseline, args.waves)
        after = run_side(ROOT, args.waves)
    finally:
        if made is not None:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(made)], check=False,
                           capture_output=True)
    print(f"one refresh of a {args.waves:,}-wave run (moto; read units by AWS's formula from the bytes read; "
          "moto's own ConsumedCapacity in brackets)")
    print(f"{'refresh':<10} {'side':<9} {'AWS calls':<62} {'read units':>16} {'bytes':>12}")
    for name in ("first", "unchanged", "changed"):
        for label, doc in (("baseline", before), ("this", after)):
            r = doc["refreshes"][name]
            units = f"{r['read_units']:,.1f} [{r['moto_capacity']:g}]"
            print(f"{name:<10} {label:<9} {calls_text(r['calls']):<62} {units:>16} {r['bytes']:>12,}")


if __name__ == "__main__":
    main()
