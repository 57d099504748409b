"""The compiled machines against AWS's limits and failure modes (docs/cloud.md): Lambda service errors
retried on their own budget, timeouts that say which deadline, and the limits checked at compile time."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_compile_asl import EXAMPLES, all_states, compiled

from npa_workflow.compile.asl import LAMBDA_SERVICE_ERRORS, CompileOptions, compile_spec
from npa_workflow.spec.load import load_spec

ALL_KINDS = """
states:
  ingest:
    trigger: {uri: "s3://b/landing/", pollSeconds: 10, maxPolls: 6}
    run: {shell: i}
    next: refine
  refine: {sequence: [work, gate], loop: {max: 3, until: promote_checkpoint}, next: fan}
  work: {run: {shell: w}}
  gate: {run: {shell: g}, writesDecision: true, outputs: [{uri: "s3://b/d.json", schema: decision}]}
  fan: {parallel: [m1, m2], next: route}
  m1: {run: {shell: x}, trigger: {uri: "s3://b/m1/"}}
  m2: {run: {shell: y}}
  route: {run: {shell: r}, transitions: [{when: promote_checkpoint, goto: done}], next: done}
  done: {run: {shell: d}, terminal: true}
"""


def lambda_tasks(definition: dict) -> dict[str, dict]:
    return {n: s for n, s in all_states(definition).items()
            if s["Type"] == "Task" and s["Resource"].startswith("arn:aws:states:::lambda:invoke")}


def test_every_lambda_task_retries_the_lambda_service_errors_first_with_backoff():
    m = compiled(ALL_KINDS, retries=2)
    tasks = lambda_tasks(m.definition)
    kinds = {p["FunctionName"] for p in (t["Parameters"] for t in tasks.values())}
    assert kinds == {"${LaunchFunctionArn}", "${DecideFunctionArn}", "${TriggerFunctionArn}",
                     "${CleanupFunctionArn}"}  # launch, decide, trigger and cleanup Tasks are all here
    for name, task in tasks.items():
        first = task["Retry"][0]
        # AWS's recommended retrier for lambda:invoke; first, because Step Functions uses the first match.
        assert first["ErrorEquals"] == list(LAMBDA_SERVICE_ERRORS), name
        assert first["BackoffRate"] > 1 and first["MaxAttempts"] >= 3 and first["IntervalSeconds"] >= 1
        for later in task["Retry"][1:]:
            assert not set(later["ErrorEquals"]) & set(LAMBDA_SERVICE_ERRORS), name
            assert "States.ALL" not in later["ErrorEquals"], name
    launch = tasks["work"]
    # The wave budgets stay separate: Wave.Failed (workload) and Wave.InfrastructureFailed (capacity).
    assert [r["ErrorEquals"] for r in launch["Retry"][1:]] == [["Wave.Failed"], ["Wave.InfrastructureFailed"]]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_retry_lambda_service_errors_everywhere(path: Path):
    for name, task in lambda_tasks(compile_spec(load_spec(path), CompileOptions()).definition).items():
        assert task["Retry"][0]["ErrorEquals"] == list(LAMBDA_SERVICE_ERRORS), (path.name, name)


def test_cleanup_learns_the_deadline_of_the_state_it_catches():
    m = compiled(ALL_KINDS, max_wait_seconds=7200, heartbeat_seconds=300)
    states = all_states(m.definition)
    assert states["work.cleanup"]["Parameters"]["Payload"]["deadline"] == {"timeoutSeconds": 7200,
                                                                          "heartbeatSeconds": 300}
    assert states["fan.cleanup"]["Parameters"]["Payload"]["deadline"]["timeoutSeconds"] == 7200  # its members'
