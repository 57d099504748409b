"""The compiler: one visible ASL state per spec state, helpers named after their owner,
Map for groups, loops as back edges, token waits only — and every example passes asl-validator."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from npa_workflow.compile.asl import CompileOptions, compile_spec, execution_input
from npa_workflow.compile.names import is_legal, sanitize
from npa_workflow.protocol import errors
from npa_workflow.spec.load import load_spec, load_spec_text

ROOT = Path(__file__).resolve().parents[2]
VALIDATOR = ROOT / "node_modules" / ".bin" / "asl-validator"
EXAMPLES = sorted(p for p in (ROOT / "specs").glob("*.yaml") if p.name != "tools.yaml")

HEAD = "apiVersion: npa.workflow/v0.0.1\nkind: Workflow\nmetadata: {name: t}\n"


def compiled(body: str, **options):
    return compile_spec(load_spec_text(HEAD + body), CompileOptions(**options))


def states_of(machine) -> dict:
    return machine.definition["States"]


def all_states(definition: dict) -> dict:
    """States of the machine and of every Map's processor."""
    out = {}
    for name, state in definition["States"].items():
        out[name] = state
        if state["Type"] == "Map":
            out.update(all_states(state["ItemProcessor"]))
    return out


def test_every_spec_state_is_one_visible_state_with_its_name():
    m = compiled(
        """
states:
  a: {run: {shell: "echo a"}, next: b}
  b: {run: {argv: [echo, b]}, terminal: true}
"""
    )
    s = states_of(m)
    assert m.definition["StartAt"] == "a"
    assert s["a"]["Resource"] == "arn:aws:states:::lambda:invoke.waitForTaskToken"
    assert s["a"]["Next"] == "b"
    assert s["b"]["End"] is True
    assert s["a"]["Parameters"]["Payload"]["state"] == "a"
    assert s["a"]["Parameters"]["Payload"]["token.$"] == "$$.Task.Token"
    # Helpers are named after their owner.
    assert {"a.cleanup", "b.cleanup", "run.failed"} <= set(s)
    assert s["a"]["Catch"][0]["Next"] == "a.cleanup"
    assert s["a.cleanup"]["Next"] == "run.failed"
    assert s["run.failed"] == {
        "Type": "Fail", "ErrorPath": "$.failure.Error", "CausePath": "$.failure.Cause",
        "Comment": s["run.failed"]["Comment"],
    }


def test_leaf_task_has_timeouts_and_separate_retry_budgets():
    m = compiled(
        "states:\n  a: {run: {shell: x}, terminal: true}\n",
        retries=2, max_infrastructure_recoveries=3, max_wait_seconds=900, heartbeat_seconds=120,
        deadline_from_input=False,
    )
    a = states_of(m)["a"]
    assert a["TimeoutSeconds"] == 900 and a["HeartbeatSeconds"] == 120
    budgets = {r["ErrorEquals"][0]: r["MaxAttempts"] for r in a["Retry"][1:]}
    assert budgets == {"Wave.Failed": 2, "Wave.InfrastructureFailed": 3}
    assert a["Retry"][0]["ErrorEquals"][0].startswith("Lambda.")  # the service retrier comes first
    assert a["ResultPath"] is None


def test_no_retry_block_and_no_timeout_when_disabled():
    m = compiled("states:\n  a: {run: {shell: x}, terminal: true}\n", max_infrastructure_recoveries=0,
                 max_wait_seconds=0)
    a = states_of(m)["a"]
    assert "TimeoutSeconds" not in a
    # no wave budget left: only the Lambda service's own errors are retried
    assert [r["ErrorEquals"] for r in a["Retry"]] == [list(errors.LAMBDA_SERVICE_ERRORS)]


def test_parallel_group_is_a_map_whose_size_does_not_grow_with_members():
    def group(n: int, bound: int):
        members = ", ".join(f"m{i}" for i in range(n))
        body = "".join(f"  m{i}: {{run: {{shell: 'echo {i}'}}}}\n" for i in range(n))
        loaded = load_spec_text(
            HEAD + f"states:\n  g: {{parallel: [{members}], maxConcurrency: {bound}, next: done}}\n{body}"
            "  done: {run: {shell: x}, terminal: true}\n"
        )
        return loaded, compile_spec(loaded)

    (small_spec, small), (_, large) = group(3, 2), group(30, 2)
    g = states_of(small)["g"]
    assert g["Type"] == "Map" and g["MaxConcurrency"] == 2
    assert g["ItemProcessor"]["ProcessorConfig"] == {"Mode": "INLINE"}
    assert g["ItemsPath"] == "$.groups.g1"
    assert g["Next"] == "done" and g["Catch"][0]["Next"] == "g.cleanup"
    member = g["ItemProcessor"]["States"]["g.member"]
    assert member["Parameters"]["Payload"]["state.$"] == "$.member"
    # No member is unrolled into the definition: 3 and 30 members give definitions of one size.
    assert len(json.dumps(small.definition)) == len(json.dumps(large.definition))
    assert not any(name.startswith("m") for name in states_of(large))
    start = execution_input(small, small_spec, run_id="r", bucket="b")
    assert start["run"] == {"run_id": "r", "bucket": "b", "deadline": 7 * 24 * 3600}
    assert start["groups"] == {"g1": ["m0", "m1", "m2"]}  # members travel in the input, not the definition


def test_groups_above_forty_become_a_distributed_map_reading_members_from_s3():
    members = ", ".join(f"m{i}" for i in range(41))
    body = "".join(f"  m{i}: {{run: {{shell: 'echo {i}'}}}}\n" for i in range(41))
    text = HEAD + f"states:\n  g: {{parallel: [{members}], terminal: true}}\n{body}"
    loaded = load_spec_text(text)
    m = compile_spec(loaded)
    g = states_of(m)["g"]
    assert g["ItemProcessor"]["ProcessorConfig"] == {"Mode": "DISTRIBUTED", "ExecutionType": "STANDARD"}
    assert g["ItemReader"]["Resource"] == "arn:aws:states:::s3:getObject"
    assert "ItemsPath" not in g
    assert execution_input(m, loaded, run_id="r", bucket="b")["groups"] == {"g1": []}


def test_max_concurrency_cap_only_lowers_the_bound():
    text = "states:\n  g: {parallel: [a, b, c], maxConcurrency: 2, terminal: true}\n" + "".join(
        f"  {x}: {{run: {{shell: x}}}}\n" for x in "abc")
    assert states_of(compiled(text, max_concurrency_cap=1))["g"]["MaxConcurrency"] == 1
    assert states_of(compiled(text, max_concurrency_cap=5))["g"]["MaxConcurrency"] == 2


def test_looped_sequence_is_a_loop_with_a_back_edge_not_an_unrolled_copy():
    m = compiled(
        """
states:
  refine: {sequence: [work, gate], loop: {max: 3, until: promote_checkpoint}, next: done}
  work: {run: {shell: w}}
  gate: {run: {shell: g}, writesDecision: true, outputs: [{uri: "s3://b/d.json", schema: decision}]}
  done: {run: {shell: d}, terminal: true}
"""
    )
    s = states_of(m)
    assert m.loop_keys == {"refine": "l1"}
    assert s["refine"]["Type"] == "Pass" and s["refine"]["Next"] == "work"
    assert s["refine"]["Parameters"]["loops"] == {"l1": 1}
    assert s["work"]["Next"] == "gate" and s["gate"]["Next"] == "refine.decide"
    assert s["refine.decide"]["Parameters"]["Payload"]["state"] == "gate"  # the decision writer
    until = s["refine.until"]
    assert until["Type"] == "Choice"
    assert {"Variable": "$.decision.value", "StringEquals": "promote_checkpoint", "Next": "done"} in until["Choices"]
    assert {"Variable": "$.loops.l1", "NumericGreaterThanEquals": 3, "Next": "done"} in until["Choices"]
    assert until["Default"] == "refine.next"
    back = s["refine.next"]
    assert back["Next"] == "work"  # the back edge
    assert back["Parameters"]["loops"] == {"l1.$": "States.MathAdd($.loops.l1, 1)"}
    assert back["Parameters"]["decision"] == {"value": ""}
    assert sorted(n for n in s if n.startswith("work")) == ["work", "work.cleanup"]  # once, not unrolled


def test_transitions_read_the_decision_then_choose_with_next_as_default():
    m = compiled(
        """
states:
  route:
    run: {shell: r}
    transitions: [{when: promote_checkpoint, goto: publish}, {when: loop_back, goto: escalate}]
    next: other
  publish: {run: {shell: p}, terminal: true}
  escalate: {run: {shell: e}, terminal: true}
  other: {run: {shell: o}, terminal: true}
"""
    )
    s = states_of(m)
    assert s["route"]["Next"] == "route.decide"
    assert s["route.decide"]["Resource"] == "arn:aws:states:::lambda:invoke"
    assert s["route.decide"]["Next"] == "route.branch"
    branch = s["route.branch"]
    assert branch["Default"] == "other"
    assert [(c["StringEquals"], c["Next"]) for c in branch["Choices"]] == [
        ("promote_checkpoint", "publish"), ("loop_back_to_inner_loop", "escalate")]


def test_transition_if_false_drops_the_edge_at_compile_time():
    m = compiled(
        """
config: {enabled: "false"}
states:
  route: {run: {shell: r}, transitions: [{when: promote_checkpoint, goto: a, if: config.enabled}], next: b}
  a: {run: {shell: a}, terminal: true}
  b: {run: {shell: b}, terminal: true}
"""
    )
    s = states_of(m)
    assert "a" not in s  # unreachable once the edge is off
    assert s["route.decide"]["Next"] == "b"


def test_trigger_waits_on_a_token_before_the_work_bounded_by_polls():
    m = compiled(
        """
states:
  ingest:
    trigger: {uri: "s3://b/landing/", pollSeconds: 10, maxPolls: 6, minObjects: 2}
    run: {shell: i}
    terminal: true
""",
        max_wait_seconds=3600,
    )
    s = states_of(m)
    assert m.definition["StartAt"] == "ingest.trigger"
    t = s["ingest.trigger"]
    assert t["Resource"].endswith("waitForTaskToken") and t["Next"] == "ingest"
    assert t["TimeoutSeconds"] == 60


def test_no_poll_loops_anywhere():
    for path in EXAMPLES:
        definition = compile_spec(load_spec(path)).definition
        for name, state in all_states(definition).items():
            assert state["Type"] != "Wait", f"{path.name}: {name} is a Wait (poll loop)"


def test_illegal_state_names_are_mapped_and_the_original_kept_in_the_comment():
    long = "x" * 90
    m = compiled(
        f"states:\n  'a b:c': {{run: {{shell: x}}, next: {long}}}\n  {long}: {{run: {{shell: y}}, terminal: true}}\n"
    )
    s = states_of(m)
    names = list(s)
    assert all(is_legal(n) for n in names)
    first = m.definition["StartAt"]
    assert first != "a b:c" and "a b:c" in s[first]["Comment"]
    assert sanitize("a b:c") == sanitize("a b:c")  # deterministic


def test_a_state_reached_in_two_contexts_gets_a_copy():
    m = compiled(
        """
states:
  s1: {sequence: [shared], next: s2}
  s2: {sequence: [shared], next: end}
  shared: {run: {shell: x}}
  end: {run: {shell: e}, terminal: true}
"""
    )
    s = states_of(m)
    assert s["shared"]["Next"] != s["shared.copy2"]["Next"]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_pass_asl_validator(path: Path, tmp_path: Path):
    assert VALIDATOR.exists(), "asl-validator is missing: run `npm ci` (scripts/test.sh does)"
    text = json.dumps(compile_spec(load_spec(path), CompileOptions(retries=1)).definition)
    for placeholder, fn in (("${LaunchFunctionArn}", "launch"), ("${DecideFunctionArn}", "decide"),
                            ("${TriggerFunctionArn}", "trigger"), ("${CleanupFunctionArn}", "cleanup")):
        text = text.replace(placeholder, f"arn:aws:lambda:us-east-1:123456789012:function:{fn}")
    out = tmp_path / "machine.json"
    out.write_text(text)
    result = subprocess.run([str(VALIDATOR), "--json-path", str(out)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_asl_validator_rejects_a_broken_definition(tmp_path: Path):
    """The check above can fail: a definition with a dangling Next is rejected."""
    out = tmp_path / "broken.json"
    out.write_text(json.dumps({"StartAt": "a", "States": {"a": {"Type": "Pass", "Next": "missing"}}}))
    result = subprocess.run([str(VALIDATOR), "--json-path", str(out)], capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
