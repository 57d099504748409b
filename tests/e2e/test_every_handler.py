"""The twin runs every function of the table on its real handler: `serve` in this process, two runs submitted to
its inbox (one that waits on a trigger and branches on a decision, one that fails), and the in-process Lambda
adapter's count of invocations names each handler of `protocol.functions`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from e2e_support import CLI, aws_client, serve_in_this_process, wait_until, workspace, write_spec  # noqa: E402

from npa_workflow.embedded_aws import moto_lambda  # noqa: E402
from npa_workflow.ledger import DynamoLedger  # noqa: E402
from npa_workflow.protocol import functions as function_table  # noqa: E402
from npa_workflow.protocol.stack import LOCAL_LEDGER_TABLE  # noqa: E402

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

FLOW = """\
config:
  bucket: npa-workflow-examples
  prefix: "every/{{run.id}}"
  landing_uri: "s3://{{config.bucket}}/{{config.prefix}}/landing/"
  dataset_uri: "s3://{{config.bucket}}/{{config.prefix}}/landing/dataset.json"
  metrics_uri: "s3://{{config.bucket}}/{{config.prefix}}/metrics.json"
  decision_uri: "s3://{{config.bucket}}/{{config.prefix}}/decision.json"
  learning_rate: "0.01"
  gate_decision: promote_checkpoint
initial: prepare
states:
  prepare:
    toolRef: examples.data.prepare
    outputs: [{uri: "{{config.dataset_uri}}", schema: dataset}]
    next: train
  train:
    trigger: {uri: "{{config.landing_uri}}", pollSeconds: 1, maxPolls: 60, minObjects: 1}
    toolRef: examples.train.fit
    outputs: [{uri: "{{config.metrics_uri}}", schema: metrics}]
    next: gate
  gate:
    toolRef: examples.eval.gate
    outputs: [{uri: "{{config.decision_uri}}", schema: decision}]
    transitions: [{when: promote_checkpoint, goto: done}]
    next: done
  done: {run: {argv: ["true"]}, terminal: true}
"""

FAILS = """\
config: {bucket: npa-workflow-examples, prefix: "fails/{{run.id}}"}
initial: boom
states:
  boom:
    toolRef: examples.util.step
    terminal: true
    params: {step_fail: boom, step_out_uri: "s3://{{config.bucket}}/{{config.prefix}}/boom.json"}
"""


def test_serve_invokes_every_handler_of_the_function_table(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    flow, fails = write_spec(ws, "every-flow", FLOW), write_spec(ws, "every-fails", FAILS)
    before = dict(moto_lambda.invocations)

    def missing() -> list[str]:
        ran = {handler: n - before.get(handler, 0) for handler, n in moto_lambda.invocations.items()}
        return [f.name for f in function_table.FUNCTIONS if ran.get(f.handler, 0) < 1]

    with serve_in_this_process(ws / "tools.yaml", tmp_path / "home") as (_, env):
        for spec in (flow, fails):
            done = subprocess.run([*CLI, "submit", str(spec)], env=env, capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, done.stderr
        url = env["NPA_WORKFLOW_ENDPOINT"]
        ledger = DynamoLedger(LOCAL_LEDGER_TABLE, aws_client("dynamodb", url))

        def ended() -> dict[str, str] | None:
            runs = {r.workflow: r.status.value for r in ledger.list_runs(limit=10)}
            return runs if len(runs) == 2 and "RUNNING" not in runs.values() else None

        runs = wait_until(ended, 150, "the two runs did not end", interval=0.5)
        assert runs == {"every-flow": "SUCCEEDED", "every-fails": "FAILED"}
        # the status-change events of the last execution reach their handler after the run's end
        wait_until(lambda: not missing(), 30, "a handler of the function table was never invoked", interval=0.1)
    assert not missing(), f"handlers the twin never invoked: {missing()} (invocations: {moto_lambda.invocations})"
