"""The compiled machines against AWS's limits and failure modes (docs/cloud.md): Lambda service errors
retried on their own budget, timeouts that say which deadline, and the limits checked at compile time."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_compile_asl import EXAMPLES, HEAD, all_states, compiled

from npa_workflow.compile.asl import CompileOptions, compile_spec, execution_input
from npa_workflow.protocol import errors
from npa_workflow.spec.load import load_spec, load_spec_text

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
        assert first["ErrorEquals"] == list(errors.LAMBDA_SERVICE_ERRORS), name
        # AWS's and aws-cdk-lib's default list (LambdaInvoke's retryOnServiceExceptions), and throttling.
        assert {"Lambda.ClientExecutionTimeoutException", "Lambda.ServiceException", "Lambda.AWSLambdaException",
                "Lambda.SdkClientException", "Lambda.TooManyRequestsException"} <= set(first["ErrorEquals"]), name
        assert first["BackoffRate"] > 1 and first["MaxAttempts"] >= 3 and first["IntervalSeconds"] >= 1
        for later in task["Retry"][1:]:
            assert not set(later["ErrorEquals"]) & set(errors.LAMBDA_SERVICE_ERRORS), name
            assert "States.ALL" not in later["ErrorEquals"], name
    launch = tasks["work"]
    # The wave budgets stay separate: Wave.Failed (workload) and Wave.InfrastructureFailed (capacity).
    assert [r["ErrorEquals"] for r in launch["Retry"][1:]] == [["Wave.Failed"], ["Wave.InfrastructureFailed",
                                                                                  "Wave.Lost"]]
    # Every error name the watch pass sends (engine/watch.py) is retried or deliberately not: Lost is infra.
    retried = {name for r in launch["Retry"] for name in r["ErrorEquals"]}
    assert {"Wave.Failed", "Wave.InfrastructureFailed", "Wave.Lost"} <= retried
    assert not {"Wave.ConfigurationFailed", "Wave.Cancelled"} & retried  # retrying cannot fix these


def test_a_throttled_ten_thousand_member_fan_out_is_delayed_not_failed():
    """Lambda answers TooManyRequestsException past the account's concurrency (1,000 by default); a Distributed Map
    (MaxConcurrency up to 10,000) asks for 10,000 launches at once. The launch retrier's window (its delays, capped
    at MaxDelaySeconds, summed over MaxAttempts) must outlast draining them through the unreserved pool with every
    launch taking 40 s (SkyPilot takes 10-40 s to accept a launch), even with full jitter halving the waits; the
    group's Map keeps ToleratedFailureCount 0 for real failures."""
    from npa_workflow.compile.asl import DISTRIBUTED_MAX_CONCURRENCY, LAMBDA_RETRY
    from npa_workflow.protocol import functions as table

    delays = [min(LAMBDA_RETRY["IntervalSeconds"] * LAMBDA_RETRY["BackoffRate"] ** n, LAMBDA_RETRY["MaxDelaySeconds"])
              for n in range(LAMBDA_RETRY["MaxAttempts"])]
    unreserved = table.ACCOUNT_CONCURRENCY - sum(slot.reserved_concurrency or 0 for slot in table.FUNCTIONS)
    drain_seconds = DISTRIBUTED_MAX_CONCURRENCY / unreserved * 40
    assert sum(delays) / 2 > drain_seconds, (sum(delays), drain_seconds)
    big = compiled(ALL_KINDS, inline_map_limit=1)  # its group as a Distributed Map
    maps = [s for s in all_states(big.definition).values() if s["Type"] == "Map"
            and s["ItemProcessor"]["ProcessorConfig"]["Mode"] == "DISTRIBUTED"]
    assert maps and all(m["ToleratedFailureCount"] == 0 for m in maps)
    for m in maps:
        launch = next(t for t in m["ItemProcessor"]["States"].values() if t.get("Type") == "Task"
                      and t["Parameters"]["FunctionName"] == "${LaunchFunctionArn}")
        assert launch["Retry"][0] == LAMBDA_RETRY


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_retry_lambda_service_errors_everywhere(path: Path):
    for name, task in lambda_tasks(compile_spec(load_spec(path), CompileOptions()).definition).items():
        assert task["Retry"][0]["ErrorEquals"] == list(errors.LAMBDA_SERVICE_ERRORS), (path.name, name)


def test_cleanup_learns_the_deadline_of_the_state_it_catches():
    m = compiled(ALL_KINDS, heartbeat_seconds=300)
    states = all_states(m.definition)
    # The run's deadline is read from the input the caught state still holds; the heartbeat is compiled in.
    assert states["work.cleanup"]["Parameters"]["Payload"]["deadline"] == {"timeoutSeconds.$": "$.run.deadline",
                                                                          "heartbeatSeconds": 300}
    assert states["fan.cleanup"]["Parameters"]["Payload"]["deadline"]["timeoutSeconds.$"] == "$.run.deadline"
    fixed = compiled(ALL_KINDS.replace("work: {run: {shell: w}}", "work: {run: {shell: w}, timeoutSeconds: 7200}"))
    assert all_states(fixed.definition)["work.cleanup"]["Parameters"]["Payload"]["deadline"] == {
        "timeoutSeconds": 7200, "heartbeatSeconds": 300}


def test_the_default_deadline_is_a_week_and_each_run_may_carry_its_own():
    """A deployed machine is compiled once: the per-run deadline travels in the execution input."""
    loaded = load_spec_text(HEAD + ALL_KINDS)
    m = compile_spec(loaded)
    states = all_states(m.definition)
    assert states["work"]["TimeoutSecondsPath"] == "$.run.deadline" and "TimeoutSeconds" not in states["work"]
    assert states["work"]["HeartbeatSeconds"] == 300
    assert states["fan.member"]["TimeoutSecondsPath"] == "$.deadline"  # inside the Map: the item carries it
    assert states["fan"]["ItemSelector"]["deadline.$"] == "$.run.deadline"
    assert execution_input(m, loaded, run_id="r", bucket="b")["run"]["deadline"] == 7 * 24 * 3600
    assert execution_input(m, loaded, run_id="r", bucket="b", max_wait_seconds=7200)["run"]["deadline"] == 7200
    assert execution_input(m, loaded, run_id="r", bucket="b", max_wait_seconds=0)["run"]["deadline"] == 31_536_000
    # Step Functions requires HeartbeatSeconds < TimeoutSeconds: a shorter request is raised above the heartbeat.
    assert execution_input(m, loaded, run_id="r", bucket="b", max_wait_seconds=60)["run"]["deadline"] == 301


def test_a_states_own_timeout_and_retries_win_over_the_runs():
    m = compiled(ALL_KINDS.replace("work: {run: {shell: w}}", "work: {run: {shell: w}, timeoutSeconds: 172800, "
                                   "retries: 4}").replace("fan: {parallel: [m1, m2]",
                                                          "fan: {parallel: [m1, m2], timeoutSeconds: 60"),
                 retries=1)
    states = all_states(m.definition)
    assert states["work"]["TimeoutSeconds"] == 172800 and "TimeoutSecondsPath" not in states["work"]
    assert {r["ErrorEquals"][0]: r["MaxAttempts"] for r in states["work"]["Retry"]}["Wave.Failed"] == 4
    assert {r["ErrorEquals"][0]: r["MaxAttempts"] for r in states["done"]["Retry"]}["Wave.Failed"] == 1
    member = states["fan.member"]
    # A deadline shorter than the heartbeat notices a dead watch by itself: no HeartbeatSeconds then.
    assert member["TimeoutSeconds"] == 60 and "HeartbeatSeconds" not in member


def test_a_trigger_waits_max_polls_watch_intervals_at_least():
    """The watch pass polls a prefix once per tick: `pollSeconds: 10` on a 60 s schedule is 60 s per poll."""
    m = compiled(ALL_KINDS, watch_interval_seconds=60)
    assert all_states(m.definition)["ingest.trigger"]["TimeoutSeconds"] == 6 * 60
    local = compiled(ALL_KINDS)  # the local watch ticks faster than any pollSeconds
    assert all_states(local.definition)["ingest.trigger"]["TimeoutSeconds"] == 6 * 10
    unbounded = compiled(ALL_KINDS.replace("maxPolls: 6", "maxPolls: 0"))
    assert all_states(unbounded.definition)["ingest.trigger"]["TimeoutSecondsPath"] == "$.run.deadline"


def test_timeout_and_retries_are_checked_where_they_are_written(errors):
    assert errors("""
states:
  g: {parallel: [a], timeoutSeconds: 0, next: s}
  a: {run: {shell: x}, retries: 2}
  s: {sequence: [b], retries: 1, next: b}
  b: {run: {shell: y}, retries: 21, terminal: true}
""") == [
        ("states.g.timeoutSeconds", "timeoutSeconds must be >= 1, got 0"),
        ("states.a.retries", "retries on a parallel member: members share the group's"),
        ("states.s.retries", "retries applies to a state that runs a command, or to a group"),
        ("states.b.retries", "retries must be <= 20, got 21"),
    ]


def chain(n: int, name: str = "s{}") -> str:
    body = "".join(f"  {name.format(i)}: {{run: {{shell: x}}, next: {name.format(i + 1)}}}\n" for i in range(n - 1))
    return "states:\n" + body + f"  {name.format(n - 1)}: {{run: {{shell: x}}, terminal: true}}\n"


def test_a_definition_over_one_mib_is_refused_at_compile_time_with_the_fix():
    """Step Functions refuses a definition over 1 MiB (compact JSON, with the ARNs CloudFormation puts in)."""
    from npa_workflow.compile.size import MAX_DEFINITION_BYTES, deployed_definition_bytes, serialize_definition
    from npa_workflow.errors import SpecError

    fits = compile_spec(load_spec_text(HEAD + chain(300)))
    text = serialize_definition(fits.definition)
    assert "\n" not in text and ": " not in text  # compact
    assert deployed_definition_bytes(text) < MAX_DEFINITION_BYTES
    with pytest.raises(SpecError) as info:
        compile_spec(load_spec_text(HEAD + chain(1000)))
    [problem] = info.value.problems
    assert "state machine definition" in problem.message and "1,048,576" in problem.message
    assert "1,000 spec states" in problem.message and "split the spec" in problem.hint


def test_the_documented_states_per_spec_are_what_fits_in_one_mib():
    """README / docs/deploy.md: about 530 plain states per spec (529 with 15-character state names; 551 with names
    of 2-4 characters). Measured with the stack's compile options and every function ARN at its longest."""
    from npa_workflow.compile.size import MAX_DEFINITION_BYTES, deployed_definition_bytes, serialize_definition
    from npa_workflow.errors import SpecError

    options = CompileOptions(heartbeat_seconds=300, max_wait_seconds=7 * 86400, watch_interval_seconds=60)

    named = "step-{:04d}-train"
    fits = compile_spec(load_spec_text(HEAD + chain(529, named)), options)
    assert deployed_definition_bytes(serialize_definition(fits.definition)) <= MAX_DEFINITION_BYTES
    with pytest.raises(SpecError, match="1,048,576"):
        compile_spec(load_spec_text(HEAD + chain(540, named)), options)
    short = compile_spec(load_spec_text(HEAD + chain(551)), options)
    assert deployed_definition_bytes(serialize_definition(short.definition)) <= MAX_DEFINITION_BYTES


def test_the_largest_groups_result_stays_far_under_the_payload_limit():
    """Issue 11 item 6, without ResultWriter: a Map's result is the array of its children's outputs, and a state's
    payload may not exceed 256 KiB (Step Functions quotas). Every way out of a member's processor sets
    `OutputPath: null`, so each child execution returns `{}`: the largest group validation accepts
    (`MAX_GROUP_MEMBERS`, 2,000) gives a 6,001-byte array, and even a Distributed Map's 10,000 would give 30,001."""
    import json

    from npa_workflow.spec.validate import MAX_GROUP_MEMBERS

    n = MAX_GROUP_MEMBERS
    members = ", ".join(f"m{i}" for i in range(n))
    body = "".join(f"  m{i}: {{run: {{shell: x}}}}\n" for i in range(n))
    big = compiled(f"states:\n  big: {{parallel: [{members}], terminal: true}}\n{body}").definition["States"]["big"]
    assert big["ItemProcessor"]["ProcessorConfig"]["Mode"] == "DISTRIBUTED" and big["ResultPath"] is None
    assert "ResultWriter" not in big and "ResultSelector" not in big
    ends = [st for st in big["ItemProcessor"]["States"].values() if st.get("End") or st["Type"] == "Succeed"]
    assert ends and all("OutputPath" in st and st["OutputPath"] is None for st in ends), ends
    result = json.dumps([{} for _ in range(n)], separators=(",", ":"))
    assert len(result) == 3 * n + 1 and len(json.dumps([{}] * 10_000, separators=(",", ":"))) < 256 * 1024 / 8


def test_large_groups_keep_their_members_results_out_of_the_state_and_have_a_legal_label():
    """A Map's result is every member's output (256 KiB state limit); each member's is {} (OutputPath null).
    A Distributed Map's Label names its child executions (≤ 40 characters of the state-name alphabet)."""
    from npa_workflow.compile.names import is_legal

    members = ", ".join(f"m{i}" for i in range(41))
    body = "".join(f"  m{i}: {{run: {{shell: x}}}}\n" for i in range(41))
    m = compiled(f"states:\n  big: {{parallel: [{members}], terminal: true}}\n{body}")
    big = m.definition["States"]["big"]
    assert big["ItemProcessor"]["ProcessorConfig"]["Mode"] == "DISTRIBUTED"
    assert big["Label"] == "g1" and len(big["Label"]) <= 40 and is_legal(big["Label"])
    assert big["ResultPath"] is None
    assert big["ItemProcessor"]["States"]["big.member"]["OutputPath"] is None
    small = compiled("states:\n  g: {parallel: [a], terminal: true}\n  a: {run: {shell: x}}\n")
    assert small.definition["States"]["g"]["ItemProcessor"]["States"]["g.member"]["OutputPath"] is None


def test_the_json_schema_offers_the_per_state_deadline_and_retries():
    from npa_workflow.spec.schema import spec_json_schema

    state = spec_json_schema()["$defs"]["State"]["properties"]
    assert {"timeoutSeconds", "retries"} <= set(state)
