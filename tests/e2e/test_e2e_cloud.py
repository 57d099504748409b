"""Cloud behaviours on the real interpreter (a moto server running the compiled machine, real handlers,
real subprocess jobs): what the execution itself ends with, read from Step Functions, not the ledger."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from e2e_support import aws_client, workspace, write_spec  # noqa: E402

from npa_workflow.local.runtime import LocalRunOptions, run_local  # noqa: E402

pytestmark = pytest.mark.e2e


class LastExecution:
    """Progress hook: describes the execution (and reads its history) once it has ended."""

    def __init__(self) -> None:
        self.endpoint = ""
        self.description: dict[str, Any] = {}
        self.history: list[dict[str, Any]] = []

    def started(self, run_id: str, execution_name: str, endpoint_url: str) -> None:
        self.endpoint = endpoint_url

    def update(self, waves: list[Any], execution_status: str) -> None:
        if execution_status == "RUNNING" or self.description:
            return
        sfn = aws_client("stepfunctions", self.endpoint)
        [machine] = sfn.list_state_machines()["stateMachines"]
        [execution] = sfn.list_executions(stateMachineArn=machine["stateMachineArn"])["executions"]
        self.description = sfn.describe_execution(executionArn=execution["executionArn"])
        self.history = sfn.get_execution_history(executionArn=execution["executionArn"], maxResults=1000)["events"]

    def finished(self) -> None:
        pass


def run_with(spec: Path, home: Path, **options: Any) -> tuple[dict[str, Any], LastExecution]:
    seen = LastExecution()
    report = run_local(LocalRunOptions(spec=spec, home=home, tick_seconds=0.2, retry_interval_seconds=1, **options),
                       seen)
    return report, seen


@pytest.mark.timeout(60)
def test_a_timeout_fails_the_execution_with_wave_timed_out_naming_the_deadline(tmp_path: Path) -> None:
    spec = write_spec(workspace(tmp_path), "slow", "states:\n  nap: {run: {shell: 'sleep 30'}, terminal: true}\n")
    report, seen = run_with(spec, tmp_path / "home", max_wait_seconds=3)
    assert report["status"] == "FAILED"
    # Before: the Fail state re-raised States.Timeout through ErrorPath and the execution ended States.Runtime
    # ("Custom Error Names MUST NOT begin with the prefix 'States.'") — on AWS as on moto.
    assert seen.description["status"] == "FAILED"
    assert seen.description["error"] == "Wave.TimedOut"
    assert "state 'nap' timed out: it ran past its deadline of 3 s" in seen.description["cause"]
    assert "timeoutSeconds" in seen.description["cause"]


HISTORY_CASES = {
    "leaf": "states:\n  a: {run: {shell: 'true'}, terminal: true}\n",
    "group": "states:\n  g: {parallel: [m1, m2], next: b}\n  m1: {run: {shell: 'true'}}\n  m2: {run: {shell: 'true'}}\n"
             "  b: {run: {shell: 'true'}, terminal: true}\n",
    "loops": "states:\n  s: {sequence: [a, b], loop: {max: 2}, next: c}\n  a: {run: {shell: 'true'}}\n"
             "  b: {run: {shell: 'true'}}\n  c: {run: {shell: 'true'}, loop: {max: 3}, terminal: true}\n",
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", sorted(HISTORY_CASES))
def test_the_history_estimate_counts_what_step_functions_writes(tmp_path: Path, case: str) -> None:
    """compile/history.py's per-construct counts, against the history of the same machine on the interpreter."""
    from npa_workflow.compile.asl import CompileOptions
    from npa_workflow.compile.history import FAILURE_TAIL, estimate_history_events
    from npa_workflow.spec.load import load_spec

    spec = write_spec(workspace(tmp_path), case, HISTORY_CASES[case])
    report, seen = run_with(spec, tmp_path / "home", max_infrastructure_recoveries=0)
    assert report["status"] == "SUCCEEDED", report["error"]
    estimate = estimate_history_events(load_spec(spec), CompileOptions(retries=0, max_infrastructure_recoveries=0))
    assert estimate.events - FAILURE_TAIL == len(seen.history)  # the success path, event for event
