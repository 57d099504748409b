"""moto is not the only judge: each case runs on the twin (moto's interpreter, `local.runtime`) and on
aws-local-stepfunctions (an independent TypeScript ASL interpreter, `harness.mjs` + `alsf_bridge.py`), both
driving the project's real handlers against a moto S3 and ledger, and both must record the same run: the same
states entered in the same order, the same Map member visits, the same wave attempts in the ledger, the same
final status and error (`traces.Trace`).

Where an interpreter departs from what AWS documents, the case pins AWS's behaviour and names the interpreter
that is wrong (docs/interpreters.md); a construct aws-local-stepfunctions lacks is skipped with its name.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import pytest
from deadlines import deadline as scaled

from npa_workflow.local.runtime import LocalRunOptions, run_local

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from traces import Trace, entered_in_event_log, entered_in_history, trace_of  # noqa: E402

REPO = HERE.parents[1]
SPECS = REPO / "specs"
PACKAGE = REPO / "node_modules" / "aws-local-stepfunctions" / "package.json"

pytestmark = [
    pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed: aws-local-stepfunctions needs it"),
    # Bounds, not goals: on a 2-core machine shared with other work the 50-member case took 70 s.
    pytest.mark.timeout(420),
]


@dataclass(frozen=True)
class Case:
    name: str
    spec: str  # a file under specs/, or the body of a synthetic spec (written to the case's folder)
    variables: dict[str, str] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)  # LocalRunOptions fields, the same on both sides
    objects: tuple[tuple[str, str], ...] = ()  # (uri, body) landed once the run's buckets exist
    alsf_compile: dict[str, Any] = field(default_factory=dict)  # CompileOptions for the second interpreter only
    # Trace fields where the interpreters are known to differ; `pinned(twin, alsf)` then asserts what AWS does
    # and which interpreter departs from it.
    differ: tuple[str, ...] = ()
    pinned: Callable[[Trace, Trace], None] | None = None
    unsupported: str = ""  # a construct aws-local-stepfunctions lacks: the case is skipped, naming it


def synthetic(name: str, body: str) -> str:
    return f"apiVersion: npa.workflow/v0.0.1\nkind: Workflow\nmetadata: {{name: {name}}}\n" + textwrap.dedent(body)


# A step that writes its decision artifact: loop_back in round 1, promote from round 2.
DECIDER = ("import boto3, os, sys; d = 'promote' if int(sys.argv[1]) >= 2 else 'loop_back'; "
           "boto3.client('s3').put_object(Bucket='npa-interp', Key=os.environ['NPA_WORKFLOW_RUN_ID'] + "
           "'/decision.json', Body=('{\"decision\": \"%s\"}' % d).encode())")

LOOP_THEN_TRANSITIONS = synthetic("loop-then-transitions", f"""
    config: {{bucket: npa-interp}}
    initial: tune
    states:
      tune:
        run: {{argv: [python, -c, {json.dumps(DECIDER)}, "{{{{loop.tune}}}}"]}}
        writesDecision: true
        outputs: [{{uri: "s3://npa-interp/{{{{run.id}}}}/decision.json", schema: decision}}]
        loop: {{max: 3, until: promote_checkpoint}}
        transitions:
          - when: promote_checkpoint
            goto: ship
          - when: loop_back
            goto: hold
        next: hold
      ship: {{terminal: true, run: {{argv: ["true"]}}}}
      hold: {{terminal: true, run: {{argv: ["true"]}}}}
""")

# A looped sequence (two rounds: the judge promotes in round 2), then a router whose transitions read the
# decision the last round left (its own decision output is the same artifact).
SEQUENCE_THEN_ROUTER = synthetic("sequence-then-router", f"""
    config: {{bucket: npa-interp}}
    initial: rounds
    states:
      rounds:
        sequence: [work, judge]
        loop: {{max: 3, until: promote_checkpoint}}
        next: route
      work: {{run: {{argv: ["true"]}}}}
      judge:
        run: {{argv: [python, -c, {json.dumps(DECIDER)}, "{{{{loop.rounds}}}}"]}}
        writesDecision: true
        outputs: [{{uri: "s3://npa-interp/{{{{run.id}}}}/decision.json", schema: decision}}]
      route:
        run: {{argv: ["true"]}}
        outputs: [{{uri: "s3://npa-interp/{{{{run.id}}}}/decision.json", schema: decision}}]
        transitions:
          - when: promote_checkpoint
            goto: ship
        next: hold
      ship: {{terminal: true, run: {{argv: ["true"]}}}}
      hold: {{terminal: true, run: {{argv: ["true"]}}}}
""")

RETRY = synthetic("retry-once", """
    initial: flaky
    states:
      flaky:
        run: {shell: '[ "$NPA_WORKFLOW_ATTEMPT" -ge 2 ]'}
        next: after
      after: {terminal: true, run: {argv: ["true"]}}
""")

MEMBER_FAILURE = synthetic("member-failure", """
    initial: group
    states:
      group:
        parallel: [m1, m2, m3]
        maxConcurrency: 1
        next: after
      m1: {run: {shell: "exit 3"}}
      m2: {run: {argv: ["true"]}}
      m3: {run: {argv: ["true"]}}
      after: {terminal: true, run: {argv: ["true"]}}
""")

TIMEOUT = synthetic("timeout", """
    initial: slow
    states:
      slow:
        run: {argv: [sleep, "30"]}
        next: after
      after: {terminal: true, run: {argv: ["true"]}}
""")

def fifty(failing: int | None = None) -> str:
    member = {i: '{run: {argv: ["true"]}}' for i in range(50)}
    if failing is not None:
        member[failing] = '{run: {shell: "exit 1"}}'
    return synthetic("fifty", "initial: group\nstates:\n  group:\n    parallel: ["
                     + ", ".join(f"m{i}" for i in range(50)) + "]\n    maxConcurrency: 40\n    next: after\n"
                     + '  after: {terminal: true, run: {argv: ["true"]}}\n'
                     + "".join(f"  m{i}: {body}\n" for i, body in member.items()))

def map_stops_after_a_failed_member(twin: Trace, alsf: Trace) -> None:
    """AWS: a Map whose iteration fails fails at once and starts no further iterations (with MaxConcurrency 1,
    the members after m1 never run). The twin does exactly that; aws-local-stepfunctions is wrong: its Map
    queues every iteration up front (p-limit) and keeps starting them after the failure, so m2 and m3 still
    launch jobs while the run is being cleaned up (the reap cancels what is left)."""
    assert twin.members == {"group.member": 1}
    assert twin.waves == (("m1", "group", 0, 1, "FAILED"),)
    assert alsf.members == {"group.member": 3}
    assert [w[0] for w in alsf.waves] == ["m1", "m2", "m3"] and alsf.waves[0] == twin.waves[0]


def timeout_error_name(twin: Trace, alsf: Trace) -> None:
    """The Task's TimeoutSeconds fires on both (`States.Timeout`, caught, cleanup, `run.failed`) and the run fails
    with the project's own name. Before `engine/cleanup.py` named it `Wave.TimedOut`, the two interpreters told
    apart what AWS forbids: `run.failed` re-raised `States.Timeout` through ErrorPath; moto refused it with
    `States.Runtime` ("Custom Error Names MUST NOT begin with the prefix 'States.'": the States Language reserves
    the prefix) and aws-local-stepfunctions let it through."""
    assert twin.error == alsf.error == "Wave.TimedOut"


def distributed_children_are_not_in_the_parent_history(twin: Trace, alsf: Trace) -> None:
    """The twin's 50-member group is a Distributed Map: its iterations are child executions whose states are
    not in the parent's history (as on AWS); the second interpreter's group is inline. The ledger shows every
    member ran once on both (compared in `waves`)."""
    assert twin.members == {} and alsf.members == {"group.member": 50}


CASES = [
    Case("fanout", "fanout.yaml", {"shard_sleep": "0"}),
    Case("gate-loop-promote", "gate-loop.yaml", {"gate_decision": "promote"}),
    Case("sweep", "sweep.yaml"),
    Case("trigger", "trigger.yaml",  # its default landing prefix for the run id `interp-trigger`
         objects=(("s3://npa-workflow-local/trigger/interp-trigger/landing/a.csv", "a\n"),
                  ("s3://npa-workflow-local/trigger/interp-trigger/landing/b.csv", "b\n"))),
    Case("loop-then-transitions", LOOP_THEN_TRANSITIONS),
    Case("sequence-then-router", SEQUENCE_THEN_ROUTER),
    Case("retry", RETRY, options={"retries": 1, "retry_interval_seconds": 1}),
    Case("member-failure", MEMBER_FAILURE, differ=("members", "waves"), pinned=map_stops_after_a_failed_member),
    Case("timeout", TIMEOUT, options={"max_wait_seconds": 2}, pinned=timeout_error_name),
    # 50 members compile to a Distributed Map, which aws-local-stepfunctions lacks: its machine keeps the group
    # inline (AWS allows any number of inline items, at most 40 at once), everything else equal.
    Case("fifty-members", fifty(), alsf_compile={"inline_map_limit": 64}, differ=("members",),
         pinned=distributed_children_are_not_in_the_parent_history),
    Case("fifty-members-distributed-failure", fifty(failing=7),
         unsupported="Distributed Map (ItemReader, ToleratedFailureCount): aws-local-stepfunctions has neither"),
    Case("heartbeat", TIMEOUT, unsupported="HeartbeatSeconds: aws-local-stepfunctions does not interpret it"),
]


# ------------------------------------------------------------------------------------------------- the twin
class HistoryProbe:
    """A `local.runtime.Progress` that lands the case's objects once the run's buckets exist and reads the
    execution's history and error when it has ended (while the twin's moto server still runs)."""

    def __init__(self, objects: tuple[tuple[str, str], ...]) -> None:
        self.objects = objects
        self.endpoint = ""
        self.execution_name = ""
        self.history: list[dict[str, Any]] = []
        self.error: str | None = None

    def client(self, service: str) -> Any:
        return boto3.client(service, endpoint_url=self.endpoint, region_name="us-east-1",
                            aws_access_key_id="testing", aws_secret_access_key="testing")

    def started(self, run_id: str, execution_name: str, endpoint_url: str) -> None:
        self.endpoint, self.execution_name = endpoint_url, execution_name
        s3 = self.client("s3")
        for uri, body in self.objects:
            bucket, _, key = uri[len("s3://"):].partition("/")
            s3.put_object(Bucket=bucket, Key=key, Body=body.encode())

    def update(self, waves: list[Any], execution_status: str) -> None:
        if execution_status != "RUNNING" and not self.history:
            self._capture()

    def finished(self) -> None:
        pass

    def _capture(self) -> None:
        sfn = self.client("stepfunctions")
        arn = next(e["executionArn"] for m in sfn.list_state_machines()["stateMachines"]
                   for e in sfn.list_executions(stateMachineArn=m["stateMachineArn"])["executions"]
                   if e["name"] == self.execution_name)
        deadline = time.monotonic() + scaled(3.0)
        while True:  # moto can report the end a moment before the history and the error are complete
            events = sfn.get_execution_history(executionArn=arn)["events"]
            desc = sfn.describe_execution(executionArn=arn)
            ended = any(e["type"].startswith("Execution") and e["type"] != "ExecutionStarted" for e in events)
            if (ended and (desc["status"] != "FAILED" or "error" in desc)) or time.monotonic() > deadline:
                self.history, self.error = events, desc.get("error")
                return
            time.sleep(0.05)


def spec_path(case: Case, folder: Path) -> Path:
    if case.spec.endswith(".yaml") and "\n" not in case.spec:
        return SPECS / case.spec
    path = folder / f"{case.name}.yaml"
    path.write_text(case.spec, encoding="utf-8")
    return path


def run_twin(case: Case, spec: Path, run_id: str, home: Path) -> dict[str, Any]:
    """The case on the twin, through `local.runtime.run_local` (what `npa-workflow run` does)."""
    probe = HistoryProbe(case.objects)
    report = run_local(LocalRunOptions(spec=spec, home=home, run_id=run_id, variables=case.variables,
                                       tick_seconds=0.1, **case.options), progress=probe)
    assert probe.history, "the twin's execution history was not captured"
    return {"entered": entered_in_history(probe.history), "status": report["status"], "error": probe.error,
            "report": report}


# ------------------------------------------------------------------------------- aws-local-stepfunctions
def start_alsf(case: Case, spec: Path, run_id: str, home: Path) -> tuple[subprocess.Popen[bytes], Path]:
    home.mkdir(parents=True)
    doc = {"spec": str(spec), "run_id": run_id, "home": str(home), "variables": case.variables,
           "options": case.options, "compile": case.alsf_compile,
           "objects": [{"uri": u, "body": b} for u, b in case.objects], "timeout_seconds": 240}
    (home / "case.json").write_text(json.dumps(doc), encoding="utf-8")
    result = home / "result.json"
    # This checkout's engine and handlers first, whatever else the interpreter running the tests has on its path.
    path = [str(REPO / "layers" / "engine"), str(REPO), *(p for p in sys.path if p)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(dict.fromkeys(path))}
    proc = subprocess.Popen([sys.executable, str(HERE / "alsf_bridge.py"), str(home / "case.json"), str(result)],
                            cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=open(home / "bridge.stderr", "wb"))  # noqa: SIM115
    return proc, result


def finish_alsf(proc: subprocess.Popen[bytes], result: Path, home: Path) -> dict[str, Any]:
    try:
        code = proc.wait(300)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    stderr = (home / "bridge.stderr").read_text(errors="replace")[-3000:]
    assert code == 0 and result.exists(), f"alsf bridge exited {code}:\n{stderr}"
    doc = json.loads(result.read_text())
    assert doc["status"] in ("SUCCEEDED", "FAILED"), f"{doc['status']}: {doc['cause']}\n{stderr}"
    return {**doc, "entered": entered_in_event_log(doc["events"])}


@pytest.fixture(scope="module", autouse=True)
def _installed() -> None:
    if not PACKAGE.is_file():
        pytest.fail("aws-local-stepfunctions is not installed: run `npm ci` (package-lock.json pins it)")


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_same_run_on_both_interpreters(case: Case, tmp_path: Path) -> None:
    if case.unsupported:
        pytest.skip(f"not comparable: {case.unsupported}")
    spec = spec_path(case, tmp_path)
    run_id = f"interp-{case.name}"
    t0 = time.monotonic()
    proc, result = start_alsf(case, spec, run_id, tmp_path / "alsf")
    try:
        twin_run = run_twin(case, spec, run_id, tmp_path / "twin")
        t1 = time.monotonic()
    finally:  # the bridge's run is bounded: wait for it even when the twin failed, so no process is left
        alsf_run = finish_alsf(proc, result, tmp_path / "alsf")
    twin, alsf = (trace_of(r["entered"], alsf_run["definition"], r["status"], r["error"], r["report"])
                  for r in (twin_run, alsf_run))
    print(f"\n{case.name}: twin {t1 - t0:.1f} s, both {time.monotonic() - t0:.1f} s\n  twin {twin}\n  alsf {alsf}")
    assert [d for d in twin.differences(alsf) if d.split(":")[0] not in case.differ] == []
    if case.pinned:
        case.pinned(twin, alsf)


def test_every_example_spec_has_a_case() -> None:
    """A new example in specs/ is compared on both interpreters too (the catalog is not a workflow)."""
    examples = {p.name for p in SPECS.glob("*.y*ml") if p.name != "tools.yaml"}
    assert examples <= {c.spec for c in CASES}, sorted(examples - {c.spec for c in CASES})
