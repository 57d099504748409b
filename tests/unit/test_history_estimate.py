"""The 25,000-event history limit, estimated at compile time (compile/history.py). The per-construct counts
are pinned against moto's real history of the same machines in tests/e2e/test_e2e_cloud.py; here the formula
meets the issue's examples and the compiler rejects a spec above the limit with the estimate and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_compile_asl import EXAMPLES, HEAD

from npa_workflow.compile.asl import CompileOptions, compile_spec
from npa_workflow.compile.history import FAILURE_TAIL, HISTORY_LIMIT, estimate_history_events
from npa_workflow.errors import SpecError
from npa_workflow.spec.load import load_spec, load_spec_text

NO_RETRIES = CompileOptions(retries=0, max_infrastructure_recoveries=0)
GATE = '  gate: {run: {shell: g}, writesDecision: true, outputs: [{uri: "s3://b/d.json", schema: decision}]}\n'


def group(n: int, name: str = "g") -> tuple[str, str]:
    members = ", ".join(f"m{i}" for i in range(n))
    return f"{name}: {{parallel: [{members}]}}", "".join(f"  m{i}: {{run: {{shell: x}}}}\n" for i in range(n))


def looped_group(members: int, rounds: int) -> str:
    g, body = group(members)
    return (f"states:\n  refine: {{sequence: [g, gate], loop: {{max: {rounds}, until: promote_checkpoint}}, "
            f"terminal: true}}\n  {g}\n{body}{GATE}")


def success_path(text: str, options: CompileOptions = NO_RETRIES) -> int:
    return estimate_history_events(load_spec_text(HEAD + text), options).events - FAILURE_TAIL


def test_a_forty_member_group_in_a_loop_passes_the_limit_around_round_73():
    """The issue's example: the members' events count in the parent's history (inline Map)."""
    per_round = success_path(looped_group(40, 2)) - success_path(looped_group(40, 1))
    crossing = HISTORY_LIMIT // per_round
    assert 70 <= crossing <= 76, (per_round, crossing)
    assert success_path(looped_group(40, crossing + 2)) > HISTORY_LIMIT > success_path(looped_group(40, crossing - 2))


def test_nested_forty_by_forty_loops_are_about_twenty_six_thousand_events():
    text = ("states:\n  outer: {sequence: [inner], loop: {max: 40, until: promote_checkpoint}, terminal: true}\n"
            "  inner: {run: {shell: x}, writesDecision: true, loop: {max: 40, until: promote_checkpoint},"
            ' outputs: [{uri: "s3://b/d.json", schema: decision}]}\n')
    assert abs(success_path(text) - 26_008) / 26_008 < 0.10


def test_a_distributed_group_keeps_its_members_out_of_the_parents_history():
    assert success_path(looped_group(41, 100)) < success_path(looped_group(40, 100)) / 10


def test_a_spec_over_the_limit_is_rejected_with_the_estimate_and_the_fix():
    """A one-member loop of 1,100 rounds: the issue counts 36,308 events."""
    g, body = group(1)
    text = (f"states:\n  refine: {{sequence: [g, gate], loop: {{max: 1100, until: promote_checkpoint}}, "
            f"terminal: true}}\n  {g}\n{body}{GATE}")
    with pytest.raises(SpecError) as info:
        compile_spec(load_spec_text(HEAD + text))
    [problem] = info.value.problems
    assert problem.path == "states.refine.loop.max"
    assert "history events" in problem.message and "25,000" in problem.message
    estimate = estimate_history_events(load_spec_text(HEAD + text))
    assert f"{estimate.events:,}" in problem.message and estimate.events > 30_000
    assert "lower loop.max of 'refine' to" in problem.hint and "Distributed Map" in problem.hint
    # The hint's number of rounds does fit.
    fits = int(problem.hint.split(" to ")[1].split()[0])
    compile_spec(load_spec_text(HEAD + text.replace("max: 1100", f"max: {fits}")))


def test_the_check_can_be_turned_off_for_tooling():
    g, body = group(1)
    text = f"states:\n  refine: {{sequence: [g], loop: {{max: 5000}}, terminal: true}}\n  {g}\n{body}"
    compile_spec(load_spec_text(HEAD + text), CompileOptions(history_limit=0))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_the_examples_are_far_below_the_limit(path: Path):
    assert estimate_history_events(load_spec(path)).events < HISTORY_LIMIT / 50


def test_plan_cost_shows_the_worst_case_history():
    from npa_workflow.cost import estimate_cost

    loaded = load_spec(EXAMPLES[0])
    estimate = estimate_cost(loaded)
    assert estimate.history_events == estimate_history_events(loaded).events > 0
    assert estimate.to_json()["history_events"] == estimate.history_events
    assert any(n.startswith(f"history: at most {estimate.history_events:,} events") for n in estimate.notes)
