"""The per-run cost estimate (`npa_workflow.cost`, `npa-workflow plan --cost`): state transitions walked on
the compiled machine, Lambda invocations counted by hand for a tiny spec, prices, and the printed table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from npa_workflow.aws_prices import PRICES
from npa_workflow.cli.app import app
from npa_workflow.compile.asl import CompileOptions, compile_spec
from npa_workflow.cost import (
    ASSUMPTIONS,
    TRIGGER_EVENTS,
    CostError,
    Pricing,
    estimate_assumption,
    estimate_cost,
    monthly_cost,
)
from npa_workflow.plan.planner import build_plan
from npa_workflow.spec.load import load_spec, load_spec_text

ROOT = Path(__file__).resolve().parents[2]
SPECS = ROOT / "specs"
EXAMPLES = ("gate-loop", "fanout", "sweep", "trigger")

# t (trigger) → g (group of two, one at a time) → r (branches: promote → done, else next → l)
#   → l (leaf loop, max 2, until promote) → done (terminal)
TINY = """\
apiVersion: npa.workflow/v0.0.1
kind: Workflow
metadata: {name: tiny}
initial: t
states:
  t:
    trigger: {uri: "s3://bk/in/", pollSeconds: 1, maxPolls: 5}
    run: {shell: t}
    next: g
  g: {parallel: [m1, m2], maxConcurrency: 1, next: r}
  m1: {run: {shell: m1}}
  m2: {run: {shell: m2}}
  r:
    run: {shell: r}
    transitions: [{when: promote_checkpoint, goto: done}]
    next: l
  l: {run: {shell: l}, loop: {max: 2, until: promote_checkpoint}, next: done}
  done: {run: {shell: d}, terminal: true}
"""

# Counted by hand from the compiled machine.
# promote: t.trigger, t, g (Map), m1's and m2's `g.member`, r, r.decide, r.branch → done               = 9 states
# loop_back: … r.branch → l.loop, (l, l.decide, l.until) ×2 with l.next between, done                = 17 states
# The reap once (its rule sends it the SUCCEEDED end too); the trigger function once per object created in the
# engine bucket: the upload and the frozen run's three (TINY declares no output, its group is an inline Map).
TINY_EXPECTED = {
    "promote_checkpoint": (9, {"launch": 5, "decide": 1, "trigger": 1, "cleanup": 0, "inbox": 1, "watch": 0,
                               "reap": 1, TRIGGER_EVENTS: 4}),
    "loop_back": (17, {"launch": 7, "decide": 3, "trigger": 1, "cleanup": 0, "inbox": 1, "watch": 0,
                       "reap": 1, TRIGGER_EVENTS: 4}),
}


def example(name: str, **overrides: str):
    return load_spec(SPECS / f"{name}.yaml", overrides=overrides or None)


def test_tiny_spec_matches_the_hand_count() -> None:
    estimate = estimate_cost(load_spec_text(TINY))
    assert [a.assumption for a in estimate.assumptions] == list(ASSUMPTIONS)
    for a in estimate.assumptions:
        transitions, invocations = TINY_EXPECTED[a.assumption]
        assert a.state_transitions == transitions, a.assumption
        assert a.lambda_invocations == invocations, a.assumption
        assert a.consistent
    promote = estimate.by_assumption("promote_checkpoint")
    assert promote.transitions_by_kind == {"wave": 5, "helper": 3, "map": 1}
    assert (promote.waves, promote.jobs) == (4, 5)  # t, the group's wave, r, done; the group runs two jobs
    assert estimate.by_assumption("loop_back").decision == "loop_back_to_inner_loop"


def test_watch_invocations_follow_the_runs_duration() -> None:
    loaded = load_spec_text(TINY)
    # promote: t, m1 then m2 (one at a time), r, done = 5 steps of 10 min; loop_back adds l twice = 70 min.
    promote = estimate_cost(loaded, assume_minutes=10).assumptions[0]
    assert (promote.compute.run_minutes, promote.lambda_invocations["watch"]) == (50, 50)
    assert estimate_cost(loaded, assume_minutes=10, watch_interval_minutes=3).assumptions[1].lambda_invocations[
        "watch"] == 24  # ceil(70 / 3)
    without = estimate_cost(loaded)
    assert without.assume_minutes == 0 and without.assumptions[0].lambda_invocations["watch"] == 0
    assert any("compute and watch: not included" in note and "--assume-minutes" in note for note in without.notes)
    with pytest.raises(ValueError):
        estimate_cost(loaded, assume_minutes=-1)


def usd(key: str, quantity: float) -> float:
    return quantity * PRICES[key].usd / PRICES[key].per


def test_every_item_of_a_run_priced_by_hand() -> None:
    """TINY under loop_back, every step 2 min, the watch every minute: 7 jobs, 3 decisions, 1 trigger, 14 ticks."""
    a = estimate_cost(load_spec_text(TINY), assume_minutes=2).by_assumption("loop_back")
    got = {i.name: i for i in a.items}
    # Lambda: memory from the function table (inbox 1024 MB, the others 512), the assumed durations (ms).
    gb_seconds = {"launch": 7 * 0.5 * 2, "decide": 3 * 0.5 * 1, "trigger": 0.5 * 1, "inbox": 1 * 3,
                  "watch": 14 * 0.5 * 5, "reap": 0.5 * 1, TRIGGER_EVENTS: 4 * 0.5 * 0.2}
    # history: 2 + 2 per state entered (17) + 4 more per callback Task (8) + 3 per decide (3) + the Map's 2 + 2 × 2
    events = 2 + 17 * 2 + 8 * 4 + 3 * 3 + 2 + 2 * 2
    expected = {
        "transitions": usd("sfn_transition", 17),
        "requests": usd("lambda_request", 7 + 3 + 1 + 1 + 14 + 1 + 4),
        **{f"{name} GB-s": usd("lambda_gb_second", gbs) for name, gbs in gb_seconds.items()},
        # 7 jobs × 4 writes × 2 KB × 2 (the `active` index); the run item's 3 + 14 notes, × 2 (`runs`); 3; 4
        "ledger writes": usd("dynamodb_write", 7 * 4 * 2 * 2 + (3 + 14) * 2 + 3 + 4),
        # 2 per launch; 1 per decide and trigger; 14 job-ticks × 0.25; 7 CANCEL reads; 4 events × 0.5; inbox, reap
        "ledger reads": usd("dynamodb_read", 7 * 2 + 3 + 1 + 14 * 0.25 + 7 + 4 * 0.5 + 2),
        "PUT and LIST requests": usd("s3_put", 4 + 1),
        "GET and HEAD requests": usd("s3_get", 3 + (7 + 3 + 1) * 3 + 3),
        "S3 events": usd("eventbridge_event", 4 * 2),
        "machine logs": usd("logs_ingestion_gb", events / 1024 / 1024),
        "API calls": usd("secret_api_call", 7),
    }
    assert a.history_events == events == 83
    assert sorted(got) == sorted(expected)
    for name, value in expected.items():
        assert got[name].usd == pytest.approx(value), name
        assert got[name].assumption, name
    assert a.orchestration_usd == pytest.approx(sum(expected.values()))
    assert a.step_functions_usd == pytest.approx(expected["transitions"])
    assert a.total_usd == pytest.approx(a.orchestration_usd + 7 * 2 / 60 * 0.04)  # one vCPU per step, 7 steps
    doc = estimate_cost(load_spec_text(TINY), assume_minutes=2).to_json()
    assert json.loads(json.dumps(doc)) == doc
    assert doc["pricing"]["lambda_memory_mb"]["inbox"] == 1024
    assert {i["item"] for i in doc["assumptions"][1]["items"]} == set(expected)


def test_the_stacks_fixed_cost_a_month_by_hand() -> None:
    month = monthly_cost(4, "the specs in specs", watch_interval_minutes=1)
    got = {i.name: i.usd for i in month.items}
    ticks = 30 * 24 * 60
    assert got == pytest.approx({
        "watch requests": usd("lambda_request", ticks),
        "watch GB-s": usd("lambda_gb_second", ticks * 0.5 * 1.0),  # 512 MB, 1 s an idle tick
        "watch index reads": usd("dynamodb_read", ticks * 2 * 0.5),
        "alarms": usd("alarm_month", 4 + 7 + 2),  # per spec, per function, event delivery
        "secrets": usd("secret_month", 1),
    })
    assert month.usd == pytest.approx(2.00204144)
    assert monthly_cost(4, "x", watch_interval_minutes=5).items[0].quantity == ticks / 5


def test_every_price_names_its_source_page() -> None:
    for price in PRICES.values():
        assert price.usd > 0 and price.per >= 1
        assert "pricing" in price.source  # "AWS Lambda pricing: …": the page it was read from
        assert price.source.split(":")[0] in PRICE_PAGES, price.source


PRICE_PAGES = {"AWS Step Functions pricing", "AWS Lambda pricing", "Amazon DynamoDB pricing", "Amazon S3 pricing",
               "Amazon EventBridge pricing", "Amazon CloudWatch pricing", "AWS Secrets Manager pricing"}


def test_loop_back_costs_more_than_promote_for_gate_loop() -> None:
    estimate = estimate_cost(example("gate-loop"))
    promote, loop_back = estimate.by_assumption("promote_checkpoint"), estimate.by_assumption("loop_back")
    # promote: refine, prepare, train, gate, refine.decide, refine.until, route, route.decide, route.branch, publish
    assert promote.state_transitions == 10
    # loop_back: refine + 3 rounds of 5 + 2 refine.next + route, route.decide, route.branch, escalate
    assert loop_back.state_transitions == 22
    assert loop_back.state_transitions > promote.state_transitions
    assert loop_back.total_usd > promote.total_usd
    assert (promote.lambda_invocations["launch"], loop_back.lambda_invocations["launch"]) == (5, 11)
    assert (promote.lambda_invocations["decide"], loop_back.lambda_invocations["decide"]) == (2, 4)


@pytest.mark.parametrize("name", EXAMPLES)
def test_transitions_equal_for_equal_plans(name: str) -> None:
    loaded = example(name)
    options = CompileOptions()
    machine = compile_spec(loaded, options)

    def cost(assumption: str):
        return estimate_assumption(loaded, machine, assumption, options=options, pricing=Pricing(),
                                   watch_invocations=0)

    # An alias is the same assumption: the same plan, the same count.
    assert cost("promote").state_transitions == cost("promote_checkpoint").state_transitions
    plans = {a: build_plan(loaded, assume_decision=a).to_json()["steps"] for a in ASSUMPTIONS}
    costs = {a: cost(a) for a in ASSUMPTIONS}
    if plans["promote_checkpoint"] == plans["loop_back"]:
        assert costs["promote_checkpoint"].state_transitions == costs["loop_back"].state_transitions
        assert costs["promote_checkpoint"].lambda_invocations == costs["loop_back"].lambda_invocations
    else:
        assert name == "gate-loop"
    for a in costs.values():
        assert a.consistent  # the walk launches exactly the plan's jobs


def test_examples_hand_counts() -> None:
    fanout = estimate_cost(example("fanout")).assumptions[0]
    # prepare, shards (Map), 3 × shards.member, join, done
    assert fanout.state_transitions == 7
    assert (fanout.transitions_by_kind["map"], fanout.lambda_invocations["launch"]) == (1, 6)
    trigger = estimate_cost(example("trigger")).assumptions[0]
    # ingest.trigger, ingest, publish
    assert (trigger.state_transitions, trigger.lambda_invocations["trigger"]) == (3, 1)
    sweep = estimate_cost(example("sweep", max_concurrency="4")).assumptions[0]
    assert (sweep.state_transitions, sweep.waves, sweep.jobs) == (8, 4, 7)


def test_unknown_machine_shapes_are_refused() -> None:
    from npa_workflow.cost import _Walk

    loaded = load_spec_text(TINY)
    machine = compile_spec(loaded)
    odd = type(machine)(definition={"StartAt": "p", "States": {"p": {"Type": "Parallel", "End": True}}},
                        loop_keys={}, group_keys={})
    with pytest.raises(CostError, match="type 'Parallel'"):
        _Walk(odd, loaded, {}, "").run()


# -- the CLI ------------------------------------------------------------------------------------------


def test_plan_cost_table_lists_both_assumptions() -> None:
    result = CliRunner().invoke(app, ["plan", str(SPECS / "gate-loop.yaml"), "--waves", "--cost",
                                      "--assume-minutes", "30"])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "11 waves" not in out  # the cost alone: `plan` without --cost prints the plan
    assert "gate-loop — estimated cost per run" in out
    assert "assume promote_checkpoint" in out and "assume loop_back" in out
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:4]]
            for line in out.splitlines() if line.startswith("│")}
    assert rows["state transitions"] == ["10", "22"]
    assert rows["launch"] == ["5", "11"] and rows["watch"] == ["150", "330"] and rows["cleanup"] == ["0", "0"]
    assert rows["H100-hours"] == ["0.50", "1.50"]  # train: one H100, 30 min a round
    assert rows["Step Functions: transitions"] == ["$0.000250", "$0.000550"]
    assert rows["launch"] == ["5", "11"] and rows["reap"] == ["1", "1"]
    # Every item of the run is in the table and, below it, with its price, the price's page and its assumption.
    estimate = estimate_cost(example("gate-loop"), assume_minutes=30)
    for item in estimate.assumptions[0].items:
        assert f"{item.service}: {item.name}" in rows, item.name
        line = next(x for x in out.splitlines() if x.startswith(f"  • {item.service}: {item.name}:"))
        assert PRICES[item.price_key].source in line and item.assumption in line
    assert "5 × 512 MB (protocol.functions) × 2,000 ms assumed per invocation" in out  # promote's 5 launches
    assert "ALL-projected `active` index" in out and "one log event per history event" in out
    assert "$0.025 per 1,000 state transitions (AWS Step Functions pricing: Standard workflows" in out
    assert "each assumed to run 30 min" in out and "every 1 min over the run's duration" in out


def test_plan_cost_json() -> None:
    result = CliRunner().invoke(app, ["plan", str(SPECS / "fanout.yaml"), "--cost", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["workflow"] == "fanout" and len(doc["steps"]) == 6  # the plan document, plus its cost
    cost = doc["cost"]
    assert [a["assumption"] for a in cost["assumptions"]] == ["promote_checkpoint", "loop_back"]
    first = cost["assumptions"][0]
    assert first["state_transitions"] == 7 and first["lambda_invocations"]["launch"] == 6
    assert first["consistent_with_plan"] is True and cost["assume_minutes"] == 0


def test_plan_cost_monthly_counts_the_specs_folder(tmp_path) -> None:
    result = CliRunner().invoke(app, ["plan", str(SPECS / "fanout.yaml"), "--cost", "--monthly", "--json"])
    assert result.exit_code == 0, result.output
    month = json.loads(result.stdout)["cost"]["monthly"]
    assert month["specs"] == 4 and month["specs_source"] == f"the specs in {SPECS}"  # tools.yaml is no spec
    assert month["usd"] == pytest.approx(2.00204144)
    text = CliRunner().invoke(app, ["plan", str(SPECS / "fanout.yaml"), "--cost", "--monthly", "--specs",
                                    str(tmp_path), "--watch-interval", "5"]).stdout
    assert "stack fixed cost:" in text and "0 spec(s)" in text and "watch every 5 min" in text
    assert "one per spec (0, the specs in" in text and "8,640 ticks in 30 days" in text


def test_plan_without_cost_is_unchanged() -> None:
    result = CliRunner().invoke(app, ["plan", str(SPECS / "fanout.yaml"), "--json"])
    assert result.exit_code == 0, result.output
    assert "cost" not in json.loads(result.stdout)
    result = CliRunner().invoke(app, ["plan", str(SPECS / "fanout.yaml")])
    assert "estimated AWS cost" not in result.stdout


# -- compute ------------------------------------------------------------------------------------------


def test_compute_hours_per_accelerator_with_per_state_minutes_and_a_prices_file(tmp_path) -> None:
    prices = tmp_path / "prices.yaml"
    prices.write_text("accelerators: {H100: 2.0}\nvcpu_hour: 0.1\n")
    result = CliRunner().invoke(app, ["plan", str(SPECS / "gate-loop.yaml"), "--cost", "--json",
                                      "--assume-minutes", "6", "--assume-minutes", "train=60", "--prices", str(prices)])
    assert result.exit_code == 0, result.output
    promote, loop_back = json.loads(result.stdout)["cost"]["assumptions"]
    # promote: one round (prepare, train, gate) then route, publish; train is the GPU step (H100:1).
    assert promote["compute"]["hours"] == {"vCPU": pytest.approx(4 * 6 / 60), "H100": 1.0}
    assert promote["compute_usd"] == pytest.approx(1.0 * 2.0 + 0.4 * 0.1)
    assert loop_back["compute"]["hours"]["H100"] == 3.0  # three rounds
    assert promote["compute"]["run_minutes"] == 4 * 6 + 60


def test_a_group_runs_max_concurrency_members_at_a_time() -> None:
    from npa_workflow.compute_cost import StepMinutes, run_minutes
    from npa_workflow.plan.planner import run_context
    from npa_workflow.plan.waves import build_waves

    loaded = example("sweep")  # four members, at most max_concurrency (2) at a time
    plan = build_plan(loaded)
    waves = build_waves(loaded, plan, run_context(loaded, plan.run_id))
    group = next(w for w in waves.waves if w.kind == "parallel")
    slow = group.steps[0].state
    others = sum(1 for w in waves.waves if w.kind != "parallel")
    # members 10, 1, 1, 1 minutes over two slots: the slow one alone fills one slot → 10 minutes.
    assert run_minutes(waves, StepMinutes(1.0, {slow: 10.0})) == others + 10


def test_bad_minutes_and_prices_are_usage_errors(tmp_path) -> None:
    spec = str(SPECS / "fanout.yaml")
    typo = CliRunner().invoke(app, ["plan", spec, "--cost", "--assume-minutes", "jion=5"])
    assert typo.exit_code == 2 and "jion" in typo.output
    bad = tmp_path / "p.yaml"
    bad.write_text("accelerators: {H100: -1}\n")
    assert CliRunner().invoke(app, ["plan", spec, "--cost", "--prices", str(bad)]).exit_code == 2
    assert CliRunner().invoke(app, ["plan", spec, "--cost", "--assume-minutes", "x=y"]).exit_code == 2


def test_the_cost_table_shows_the_worst_case_history_events() -> None:
    result = CliRunner().invoke(app, ["plan", str(SPECS / "gate-loop.yaml"), "--cost"])
    assert result.exit_code == 0, result.output
    estimate = estimate_cost(example("gate-loop"))
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:4]]
            for line in result.stdout.splitlines() if line.startswith("│")}
    assert rows["history events (max)"] == [f"{estimate.history_events:,}"] * 2


def test_plan_cost_monthly_counts_a_deployed_stacks_specs(monkeypatch) -> None:
    """--stack: the stack's CloudFormation outputs name its bucket; the deploy's catalog/machines.json its specs."""
    import boto3
    from moto import mock_aws

    dummy = {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x", "AWS_DEFAULT_REGION": "us-east-1"}
    for key, value in dummy.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    spec = str(SPECS / "fanout.yaml")
    with mock_aws():
        template = {"Resources": {"Bucket": {"Type": "AWS::S3::Bucket", "Properties": {"BucketName": "engine"}}},
                    "Outputs": {"BucketName": {"Value": "engine"}, "LedgerTableName": {"Value": "ledger"}}}
        boto3.client("cloudformation").create_stack(StackName="eng", TemplateBody=json.dumps(template))
        missing = CliRunner().invoke(app, ["plan", spec, "--cost", "--monthly", "--stack", "eng"])
        assert missing.exit_code == 1 and "catalog/machines.json (is it deployed?)" in missing.output
        boto3.client("s3").put_object(Bucket="engine", Key="catalog/machines.json",
                                      Body=json.dumps({"machines": {"a": "eng-a", "b": "eng-b"}}))
        result = CliRunner().invoke(app, ["plan", spec, "--cost", "--monthly", "--stack", "eng", "--json"])
    assert result.exit_code == 0, result.output
    month = json.loads(result.stdout)["cost"]["monthly"]
    assert (month["specs"], month["specs_source"]) == (2, "deployed in stack eng")
    alarms = next(i for i in month["items"] if i["item"] == "alarms")
    assert alarms["quantity"] == 2 + 7 + 2
