"""The static planner (`build_plan`): control flow of docs/language.md ("States"), and `--assume-decision`."""

from __future__ import annotations

import json
import textwrap

import pytest

from npa_workflow.errors import SpecError
from npa_workflow.plan.planner import build_plan, run_context, step_limit
from npa_workflow.plan.steps import decision_uri
from npa_workflow.spec.catalog import EMPTY_CATALOG, Catalog, load_catalog_text
from npa_workflow.spec.load import load_spec_text
from npa_workflow.spec.model import Spec
from npa_workflow.spec.validate import LoadedSpec

HEADER = """\
apiVersion: npa.workflow/v0.0.1
kind: Workflow
metadata: {name: t}
"""

PROMOTE = "promote_checkpoint"
LOOP_BACK = "loop_back_to_inner_loop"


def load(body: str, *, catalog: Catalog = EMPTY_CATALOG, overrides: dict[str, str] | None = None):
    return load_spec_text(HEADER + textwrap.dedent(body), file="t.yaml", catalog=catalog, overrides=overrides)


def plan(body: str, *, catalog: Catalog = EMPTY_CATALOG, overrides: dict[str, str] | None = None, **kw):
    return build_plan(load(body, catalog=catalog, overrides=overrides), **kw)


def walk(p) -> list[tuple]:
    """(state, iteration, loop_label, group) per step."""
    return [(s.state, s.iteration, s.loop_label, s.group) for s in p.steps]


def names(p) -> list[str]:
    return [s.state for s in p.steps]


def shells(p) -> list[str]:
    return [s.shell for s in p.steps]


GATE_LOOP = """\
config:
  decision_uri: "s3://bk/{{run.prefix}}/route/decision.json"
initial: refine
states:
  refine:
    sequence: [caption-batch, score-batch, quality-gate]
    loop: {max: 3, until: promote_checkpoint}
    next: route
  caption-batch:
    run: {shell: "caption --round {{loop.refine}}"}
  score-batch:
    run: {shell: "score --round {{loop.refine}}"}
  quality-gate:
    run: {shell: "gate --round {{loop.refine}}"}
    writesDecision: true
    outputs:
      - {uri: "s3://bk/refine/{{loop.refine}}/decision.json", schema: decision}
  route:
    run: {shell: "route"}
    transitions:
      - {when: promote_checkpoint, goto: publish}
      - {when: loop_back, goto: escalate}
  publish:
    run: {shell: "publish after {{loop.refine}}"}
    terminal: true
  escalate:
    run: {shell: "escalate after {{loop.refine}}"}
    terminal: true
"""


# --- a gate loop under each assumed decision -------------------------------------------------------


def test_gate_loop_under_loop_back_unrolls_the_full_budget():
    p = plan(GATE_LOOP)
    assert p.assume_decision == LOOP_BACK  # the spec has transitions
    body = [("caption-batch", None, "refine", ""), ("score-batch", None, "refine", ""),
            ("quality-gate", None, "refine", "")]
    assert walk(p) == body * 3 + [("route", None, "", ""), ("escalate", None, "", "")]
    assert len(p.steps) == 11
    assert [s.shell for s in p.steps if s.state == "caption-batch"] == [
        "caption --round 1", "caption --round 2", "caption --round 3",
    ]
    assert p.steps[-1].shell == "escalate after 3"  # loop counters persist after the loop


def test_gate_loop_under_promote_stops_after_one_round():
    p = plan(GATE_LOOP, assume_decision="promote")
    assert p.assume_decision == PROMOTE
    assert names(p) == ["caption-batch", "score-batch", "quality-gate", "route", "publish"]
    assert [s.loop_label for s in p.steps] == ["refine"] * 3 + ["", ""]
    assert all(s.iteration is None for s in p.steps)
    assert p.steps[-1].shell == "publish after 1"


def test_plan_is_deterministic():
    a = plan(GATE_LOOP, run_id="r1").to_json()
    b = plan(GATE_LOOP, run_id="r1").to_json()
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


# --- assumption resolution ---------------------------------------------------------------------

ROUTER = """\
config: {plan_assume_decision: promote}
states:
  route:
    run: {shell: route}
    transitions:
      - {when: promote_checkpoint, goto: yes-branch}
      - {when: loop_back, goto: no-branch}
    next: other
  yes-branch: {run: {shell: y}, terminal: true}
  no-branch: {run: {shell: n}, terminal: true}
  other: {run: {shell: o}, terminal: true}
"""


def test_cli_assumption_wins_over_config():
    p = plan(ROUTER, assume_decision="loop_back")
    assert p.assume_decision == LOOP_BACK
    assert names(p) == ["route", "no-branch"]


def test_config_assumption_used_without_cli():
    p = plan(ROUTER)
    assert p.assume_decision == PROMOTE
    assert names(p) == ["route", "yes-branch"]


def test_config_assumption_comes_from_var_override():
    p = plan(ROUTER, overrides={"plan_assume_decision": "loop_back_to_inner_loop"})
    assert p.assume_decision == LOOP_BACK


def test_default_assumption_is_loop_back_when_any_state_branches():
    p = plan(ROUTER.replace("config: {plan_assume_decision: promote}\n", ""))
    assert p.assume_decision == LOOP_BACK
    assert names(p) == ["route", "no-branch"]


def test_default_assumption_is_empty_without_transitions():
    p = plan("""\
        states:
          refine: {sequence: [a], loop: {max: 2, until: promote_checkpoint}, next: done}
          a: {run: {shell: a}}
          done: {run: {shell: d}, terminal: true}
        """)
    assert p.assume_decision == ""
    assert names(p) == ["a", "a", "done"]  # empty matches no predicate: full budget


@pytest.mark.parametrize(
    ("given", "normalized"),
    [("promote", PROMOTE), (PROMOTE, PROMOTE), ("loop_back", LOOP_BACK), (LOOP_BACK, LOOP_BACK)],
)
def test_assumption_is_normalized(given, normalized):
    assert plan(ROUTER, assume_decision=given).assume_decision == normalized


def test_unknown_assumption_passes_through_and_matches_nothing():
    p = plan(ROUTER, assume_decision="foo")
    assert p.assume_decision == "foo"
    assert names(p) == ["route", "other"]  # no transition matched: next
    p = plan(ROUTER, assume_decision="PROMOTE")  # case-sensitive
    assert p.assume_decision == "PROMOTE"
    assert names(p) == ["route", "other"]


def test_unknown_assumption_without_next_ends_the_walk():
    p = plan(ROUTER.replace("    next: other\n", ""), assume_decision="reject")
    assert names(p) == ["route"]


def test_unknown_assumption_runs_looped_sequence_to_budget():
    p = plan(GATE_LOOP, assume_decision="reject")
    assert names(p) == ["caption-batch", "score-batch", "quality-gate"] * 3 + ["route"]


def test_until_loop_back_stops_under_loop_back():
    p = plan("""\
        states:
          refine: {sequence: [a], loop: {max: 3, until: loop_back}, next: done}
          a: {run: {shell: a}}
          done: {run: {shell: d}, terminal: true}
        """, assume_decision="loop_back")
    assert names(p) == ["a", "done"]


# --- leaf loops ----------------------------------------------------------------------------------


def test_leaf_loop_numbers_its_steps():
    p = plan("""\
        states:
          poll:
            run: {shell: "poll {{loop.poll}}"}
            loop: {max: 3}
            next: done
          done: {run: {shell: "done {{loop.poll}}"}, terminal: true}
        """)
    assert walk(p) == [("poll", 1, "", ""), ("poll", 2, "", ""), ("poll", 3, "", ""), ("done", None, "", "")]
    assert shells(p) == ["poll 1", "poll 2", "poll 3", "done 3"]
    assert [s.task_name for s in p.steps] == ["poll-1", "poll-2", "poll-3", "done"]


LEAF_UNTIL = """\
states:
  poll:
    run: {shell: poll}
    loop: {max: "{{config.n}}", until: promote_checkpoint}
    next: done
  done: {run: {shell: d}, terminal: true}
config: {n: "4"}
"""


def test_leaf_loop_until_under_promote_stops_after_one():
    assert walk(plan(LEAF_UNTIL, assume_decision="promote")) == [("poll", 1, "", ""), ("done", None, "", "")]


def test_leaf_loop_until_under_loop_back_runs_budget():
    assert [s.iteration for s in plan(LEAF_UNTIL, assume_decision="loop_back").steps] == [1, 2, 3, 4, None]


def test_leaf_loop_max_from_config_forms():
    for form in ("config.n", "'{{config.n}}'", "'2'", "2"):
        p = plan(f"""\
            config: {{n: 2}}
            states:
              poll: {{run: {{shell: p}}, loop: {{max: {form}}}, terminal: true}}
            """)
        assert [s.iteration for s in p.steps] == [1, 2], form


def test_leaf_loop_inside_sequence_follows_its_next():
    p = plan("""\
        states:
          seq: {sequence: [a, poll, b], next: end}
          a: {run: {shell: a}}
          poll: {run: {shell: p}, loop: {max: 2}, next: side}
          side: {run: {shell: s}}
          b: {run: {shell: b}}
          end: {run: {shell: e}, terminal: true}
        """)
    assert walk(p) == [
        ("a", None, "seq", ""), ("poll", 1, "seq", ""), ("poll", 2, "seq", ""),
        ("side", None, "", ""), ("b", None, "seq", ""), ("end", None, "", ""),
    ]


def test_leaf_loop_inside_sequence_follows_its_transitions():
    p = plan("""\
        states:
          seq: {sequence: [poll, b], next: end}
          poll:
            run: {shell: p}
            loop: {max: 2}
            transitions: [{when: loop_back, goto: lb}, {when: promote_checkpoint, goto: pr}]
          lb: {run: {shell: lb}}
          pr: {run: {shell: pr}}
          b: {run: {shell: b}}
          end: {run: {shell: e}, terminal: true}
        """, assume_decision="promote")
    assert names(p) == ["poll", "poll", "pr", "b", "end"]  # no until: the full budget, then the edge


def test_terminal_leaf_loop_still_follows_next():
    p = plan("""\
        states:
          poll: {run: {shell: p}, loop: {max: 2}, terminal: true, next: after}
          after: {run: {shell: a}, terminal: true}
        """)
    assert walk(p) == [("poll", 1, "", ""), ("poll", 2, "", ""), ("after", None, "", "")]


def test_leaf_loop_inside_looped_sequence_restarts_numbering():
    p = plan("""\
        states:
          outer: {sequence: [poll], loop: {max: 2}, next: end}
          poll: {run: {shell: "p{{loop.outer}}.{{loop.poll}}"}, loop: {max: 2}}
          end: {run: {shell: e}, terminal: true}
        """)
    assert [(s.state, s.iteration, s.loop_label) for s in p.steps] == [
        ("poll", 1, "outer"), ("poll", 2, "outer"), ("poll", 1, "outer"), ("poll", 2, "outer"), ("end", None, ""),
    ]
    assert shells(p)[:4] == ["p1.1", "p1.2", "p2.1", "p2.2"]


# --- sequences -------------------------------------------------------------------------------------


def test_sequence_child_next_expands_inside_the_sequence():
    p = plan("""\
        states:
          seq: {sequence: [a, b], next: end}
          a: {run: {shell: a}, next: c}
          c: {run: {shell: c}, next: d}
          d: {run: {shell: d}}
          b: {run: {shell: b}}
          end: {run: {shell: e}, terminal: true}
        """)
    assert walk(p) == [
        ("a", None, "seq", ""), ("c", None, "", ""), ("d", None, "", ""),
        ("b", None, "seq", ""), ("end", None, "", ""),
    ]


def test_sequence_child_with_transitions_follows_neither_transitions_nor_next():
    p = plan("""\
        states:
          seq: {sequence: [a, b], next: end}
          a:
            run: {shell: a}
            transitions: [{goto: x}]
            next: y
          x: {run: {shell: x}, terminal: true}
          y: {run: {shell: y}, terminal: true}
          b: {run: {shell: b}}
          end: {run: {shell: e}, terminal: true}
        """)
    assert names(p) == ["a", "b", "end"]


def test_terminal_sequence_child_does_not_stop_the_sequence():
    p = plan("""\
        states:
          seq: {sequence: [a, b], next: end}
          a: {run: {shell: a}, terminal: true, next: x}
          x: {run: {shell: x}, terminal: true}
          b: {run: {shell: b}}
          end: {run: {shell: e}, terminal: true}
        """)
    assert names(p) == ["a", "b", "end"]


def test_transitions_on_a_sequence_are_ignored():
    p = plan("""\
        states:
          seq:
            sequence: [a]
            transitions: [{goto: x}]
            next: y
          a: {run: {shell: a}}
          x: {run: {shell: x}, terminal: true}
          y: {run: {shell: y}, terminal: true}
        """)
    assert names(p) == ["a", "y"]


def test_nested_sequences_label_with_the_innermost():
    p = plan("""\
        states:
          outer: {sequence: [a, inner, b], next: end}
          inner: {sequence: [c], next: d}
          a: {run: {shell: a}}
          b: {run: {shell: b}}
          c: {run: {shell: c}}
          d: {run: {shell: d}}
          end: {run: {shell: e}, terminal: true}
        """)
    assert walk(p) == [
        ("a", None, "outer", ""), ("c", None, "inner", ""), ("d", None, "", ""),
        ("b", None, "outer", ""), ("end", None, "", ""),
    ]


def test_nested_loops_restart_at_one():
    p = plan("""\
        states:
          outer: {sequence: [inner, tail], loop: {max: 2}, next: end}
          inner: {sequence: [work], loop: {max: 3}}
          work: {run: {shell: "w{{loop.outer}}.{{loop.inner}}"}}
          tail: {run: {shell: "t{{loop.outer}}.{{loop.inner}}"}}
          end: {run: {shell: "e{{loop.outer}}.{{loop.inner}}"}, terminal: true}
        """)
    assert shells(p) == ["w1.1", "w1.2", "w1.3", "t1.3", "w2.1", "w2.2", "w2.3", "t2.3", "e2.3"]
    assert all(s.iteration is None for s in p.steps)


def test_loop_counter_usable_after_the_loop_in_params_and_outputs():
    p = plan("""\
        config: {base: "s3://bk/out"}
        states:
          refine: {sequence: [a], loop: {max: 2}, next: report}
          a: {run: {shell: a}}
          report:
            run: {shell: "report {{config.where}}"}
            params: {where: "{{config.base}}/round-{{loop.refine}}"}
            outputs: [{uri: "{{config.where}}/r.json", schema: report}]
            terminal: true
        """)
    assert p.steps[-1].shell == "report s3://bk/out/round-2"
    assert p.steps[-1].outputs == [{"uri": "s3://bk/out/round-2/r.json", "schema": "report"}]


def test_loop_token_before_its_loop_ran_fails_at_plan_time():
    with pytest.raises(SpecError) as err:
        plan("""\
            states:
              first: {run: {shell: "x {{loop.refine}}"}, next: refine}
              refine: {sequence: [a], loop: {max: 2}, next: end}
              a: {run: {shell: a}}
              end: {run: {shell: e}, terminal: true}
            """)
    problem = err.value.problems[0]
    assert problem.path == "states.first"
    assert "loop.refine" in problem.message
    assert problem.file == "t.yaml"


# --- parallel groups ------------------------------------------------------------------------------


def test_group_members_in_declared_order_then_next():
    p = plan("""\
        states:
          start: {run: {shell: s}, next: fan}
          fan: {parallel: [c, a, b], next: join}
          a: {run: {shell: a}}
          b: {run: {shell: b}}
          c: {run: {shell: c}}
          join: {run: {shell: j}, terminal: true}
        """)
    assert walk(p) == [
        ("start", None, "", ""), ("c", None, "fan", "fan"), ("a", None, "fan", "fan"),
        ("b", None, "fan", "fan"), ("join", None, "", ""),
    ]


def test_transitions_on_a_group_are_ignored():
    p = plan("""\
        states:
          fan: {parallel: [a], transitions: [{goto: x}], next: y}
          a: {run: {shell: a}}
          x: {run: {shell: x}, terminal: true}
          y: {run: {shell: y}, terminal: true}
        """)
    assert names(p) == ["a", "y"]


def test_group_inside_looped_sequence_repeats_per_iteration():
    p = plan("""\
        states:
          rounds: {sequence: [fan, check], loop: {max: 2}, next: end}
          fan: {parallel: [a, b]}
          a: {run: {shell: "a{{loop.rounds}}"}}
          b: {run: {shell: "b{{loop.rounds}}"}}
          check: {run: {shell: c}}
          end: {run: {shell: e}, terminal: true}
        """)
    assert walk(p) == [
        ("a", None, "fan", "fan"), ("b", None, "fan", "fan"), ("check", None, "rounds", ""),
        ("a", None, "fan", "fan"), ("b", None, "fan", "fan"), ("check", None, "rounds", ""),
        ("end", None, "", ""),
    ]
    assert shells(p)[:2] == ["a1", "b1"]
    assert shells(p)[3:5] == ["a2", "b2"]


# --- state-output tokens -------------------------------------------------------------------------

OUTPUTS = """\
initial: {initial}
states:
  make:
    run: {{shell: make}}
    outputs:
      - {{uri: "s3://bk/{{{{run.id}}}}/one", schema: a}}
      - {{uri: "s3://bk/{{{{run.id}}}}/two", schema: b}}
    next: {after_make}
  use:
    run: {{argv: [use, "{{{{state.make.uri}}}}", "{{{{state.make.output_2}}}}"]}}
    next: {after_use}
  end: {{run: {{shell: e}}, terminal: true}}
"""


def test_state_output_tokens_resolve_after_the_state_ran():
    p = plan(OUTPUTS.format(initial="make", after_make="use", after_use="end"), run_id="r9")
    assert p.steps[1].argv == ["use", "s3://bk/r9/one", "s3://bk/r9/two"]


def test_state_output_tokens_before_the_state_ran_fail_naming_it():
    with pytest.raises(SpecError) as err:
        plan(OUTPUTS.format(initial="use", after_make="end", after_use="make"))
    problem = err.value.problems[0]
    assert problem.path == "states.use"
    assert "state.make.uri" in problem.message
    assert "make" in problem.hint


# --- params overlay, tool catalog ----------------------------------------------------------------


def test_params_overlay_used_for_command_outputs_and_profile():
    p = plan("""\
        config: {flavor: base, tag: "1.0"}
        resources:
          default: {image: "img:{{config.tag}}", cpus: 2}
        states:
          over:
            run: {shell: "go {{config.flavor}}"}
            params: {flavor: special, tag: "{{config.tag}}-gpu"}
            outputs: [{uri: "s3://bk/{{config.flavor}}/x", schema: s}]
            inputs: [{uri: "s3://bk/in/{{config.flavor}}", schema: s}]
            next: plain
          plain:
            run: {shell: "go {{config.flavor}}"}
            outputs: [{uri: "s3://bk/{{config.flavor}}/x", schema: s}]
            terminal: true
        """)
    over, plain = p.steps
    assert over.shell == "go special"
    assert over.outputs == [{"uri": "s3://bk/special/x", "schema": "s"}]
    assert over.inputs == [{"uri": "s3://bk/in/special", "schema": "s"}]
    assert over.resources_profile == {"image": "img:1.0-gpu", "cpus": 2}
    assert over.image == "img:1.0-gpu"
    assert plain.shell == "go base"
    assert plain.resources_profile == {"image": "img:1.0", "cpus": 2}


TOOLS = load_catalog_text(
    """\
apiVersion: npa.workflow.tools/v1
tools:
  t.run:
    argv: [prog, --a, "{{config.a}}", --b, "{{config.b}}", --c, "{{config.c}}"]
    image: tool-image:2
    env: {WHO: "{{run.id}}"}
    configDefaults: {b: "", c: ""}
    omitFlagsWhenEmpty: [--b]
""",
    "tools.yaml",
)


def test_tool_ref_argv_with_omitted_empty_flags():
    p = plan("""\
        config: {a: "1"}
        states:
          one: {toolRef: t.run, next: two}
          two: {toolRef: t.run, params: {b: "x y", a: ""}, terminal: true}
        """, catalog=TOOLS, run_id="r")
    one, two = p.steps
    assert one.argv == ["prog", "--a", "1", "--c", ""]  # --b dropped with its empty value; --c kept
    assert two.argv == ["prog", "--a", "", "--b", "x y", "--c", ""]
    assert one.tool_ref == "t.run"
    assert one.image == "tool-image:2"
    assert one.env == {"WHO": "r"}
    assert one.shell == ""


def test_omit_flags_only_for_exactly_empty_values():
    p = plan("""\
        config: {a: "1", b: " "}
        states:
          one: {toolRef: t.run, terminal: true}
        """, catalog=TOOLS)
    assert p.steps[0].argv == ["prog", "--a", "1", "--b", " ", "--c", ""]


def test_tool_ref_wins_over_run():
    p = plan("""\
        config: {a: "1"}
        states:
          one: {toolRef: t.run, run: {shell: ignored}, terminal: true}
        """, catalog=TOOLS)
    assert p.steps[0].argv[0] == "prog"
    assert p.steps[0].shell == ""


def test_run_argv_wins_over_shell():
    p = plan("""\
        states:
          one: {run: {shell: ignored, argv: [echo, 1, true]}, terminal: true}
        """)
    assert p.steps[0].argv == ["echo", "1", "true"]
    assert p.steps[0].shell == ""


def test_undefined_profile_falls_back_to_default_but_defined_empty_profile_is_used():
    p = plan("""\
        resources:
          default: {cpus: 4}
          bare: {}
        states:
          seq: {sequence: [a, b], resources: nothing-here, next: end}
          a: {run: {shell: a}, resources: bare}
          b: {run: {shell: b}}
          end: {run: {shell: e}, terminal: true}
        """)
    assert [(s.resources, s.resources_profile) for s in p.steps] == [
        ("bare", {}), ("default", {"cpus": 4}), ("default", {"cpus": 4}),
    ]


def test_num_nodes_from_params_is_checked_at_plan_time():
    body = """\
        config: {nodes: "2"}
        resources:
          multi: {num_nodes: "{{config.nodes}}"}
        states:
          a: {run: {shell: a}, resources: multi, multiNodeMode: sharded, params: {nodes: "%s"}, terminal: true}
        """
    assert plan(body % "4").steps[0].num_nodes == 4
    for bad in ("many", "40", "0"):
        with pytest.raises(SpecError) as err:
            plan(body % bad)
        assert err.value.problems[0].path == "states.a"
        assert "num_nodes" in err.value.problems[0].message


# --- transitions[].if ------------------------------------------------------------------------------

IF_SPEC = """\
config: {fast: "%s"}
states:
  route:
    run: {shell: r}
    transitions:
      - {if: config.fast, goto: fast}
      - {goto: slow}
  fast: {run: {shell: f}, terminal: true}
  slow: {run: {shell: s}, terminal: true}
"""


@pytest.mark.parametrize(
    ("value", "taken"),
    [("true", "fast"), ("yes", "fast"), ("on", "fast"), ("1", "fast"), ("TRUE", "fast"),
     ("false", "slow"), ("no", "slow"), ("off", "slow"), ("0", "slow"), ("", "slow")],
)
def test_transition_if_is_yaml_boolean(value, taken):
    assert names(plan(IF_SPEC % value)) == ["route", taken]


def test_transition_if_reads_yaml_bool_and_var_overrides():
    assert names(plan(IF_SPEC.replace('"%s"', "false"))) == ["route", "slow"]
    assert names(plan(IF_SPEC.replace('"%s"', "true"))) == ["route", "fast"]
    assert names(plan(IF_SPEC % "false", overrides={"fast": "on"})) == ["route", "fast"]


def test_transition_if_ignores_params():
    body = IF_SPEC.replace("    run: {shell: r}\n", '    run: {shell: r}\n    params: {fast: "true"}\n')
    assert names(plan(body % "false")) == ["route", "slow"]


def test_transition_if_non_boolean_is_an_error():
    with pytest.raises(SpecError) as err:
        plan(IF_SPEC % "maybe")
    assert any(p.path == "states.route.transitions[0].if" for p in err.value.problems)


# --- limits, reachability, routers ----------------------------------------------------------------


def test_step_limit_formula():
    assert step_limit(1) == 256
    assert step_limit(4) == 256
    assert step_limit(5) == 320


def test_plan_exceeding_step_limit_fails():
    body = """\
        states:
          poll: {run: {shell: p}, loop: {max: %d}, next: done}
          done: {run: {shell: d}, terminal: true}
        """
    assert len(plan(body % 255).steps) == 256  # exactly at the limit is fine
    with pytest.raises(SpecError) as err:
        plan(body % 256)
    assert "plan exceeded step limit" in err.value.problems[0].message
    with pytest.raises(SpecError, match="plan exceeded step limit"):
        plan(body % 300)


def test_step_limit_counts_nested_loop_unrolling():
    with pytest.raises(SpecError, match="plan exceeded step limit"):
        plan("""\
            states:
              outer: {sequence: [inner], loop: {max: 20}, terminal: true}
              inner: {sequence: [a, b], loop: {max: 10}}
              a: {run: {shell: a}}
              b: {run: {shell: b}}
            """)


def test_unreachable_states_are_not_planned():
    p = plan("""\
        states:
          a: {run: {shell: a}, next: b}
          b: {run: {shell: b}, terminal: true}
          orphan: {run: {shell: o}, terminal: true}
          orphan-group: {parallel: [m]}
          m: {run: {shell: m}}
        """)
    assert names(p) == ["a", "b"]


def test_initial_defaults_to_first_state():
    p = plan("""\
        states:
          z: {run: {shell: z}, next: a}
          a: {run: {shell: a}, terminal: true}
        """)
    assert p.initial == "z"
    assert names(p) == ["z", "a"]


def test_router_state_produces_a_step_without_command():
    p = plan("""\
        states:
          route:
            transitions: [{when: loop_back, goto: a}]
            next: b
          a: {run: {shell: a}, terminal: true}
          b: {run: {shell: b}, terminal: true}
        """)
    assert names(p) == ["route", "a"]
    router = p.steps[0]
    assert (router.argv, router.shell, router.tool_ref, router.command) == ([], "", "", [])


def test_terminal_state_without_command_is_an_empty_step():
    p = plan("""\
        states:
          a: {run: {shell: a}, next: done}
          done: {terminal: true}
        """)
    assert names(p) == ["a", "done"]
    assert p.steps[1].command == []


def test_walk_may_end_on_a_non_terminal_state():
    p = plan("""\
        states:
          a: {run: {shell: a}, next: b}
          b: {run: {shell: b}}
          c: {run: {shell: c}, terminal: true}
        """)
    assert names(p) == ["a", "b"]


def test_terminal_state_ignores_its_edges():
    p = plan("""\
        states:
          a: {run: {shell: a}, terminal: true, next: b, transitions: [{goto: b}]}
          b: {run: {shell: b}, terminal: true}
        """)
    assert names(p) == ["a"]


def test_long_chain_plans_without_recursion():
    # Built directly (not through validation) to test the planner alone on a 3,000-hop chain.
    n = 3000
    states = {f"s{i}": {"run": {"shell": f"echo {i}"}, "next": f"s{i + 1}"} for i in range(n - 1)}
    states[f"s{n - 1}"] = {"run": {"shell": "end"}, "terminal": True}
    spec = Spec.model_validate(
        {"apiVersion": "npa.workflow/v0.0.1", "metadata": {"name": "chain"}, "initial": "s0", "states": states}
    )
    p = build_plan(LoadedSpec(spec=spec, catalog=EMPTY_CATALOG, file="chain.yaml"))
    assert len(p.steps) == n
    assert p.steps[-1].shell == "end"


def test_deep_sequence_nesting_plans_without_recursion():
    depth = 1500
    states: dict = {f"q{i}": {"sequence": [f"q{i + 1}"]} for i in range(depth)}
    states[f"q{depth}"] = {"run": {"shell": "leaf"}}
    states["q0"]["terminal"] = True
    spec = Spec.model_validate(
        {"apiVersion": "npa.workflow/v0.0.1", "metadata": {"name": "deep"}, "initial": "q0", "states": states}
    )
    p = build_plan(LoadedSpec(spec=spec, catalog=EMPTY_CATALOG))
    assert [(s.state, s.loop_label) for s in p.steps] == [(f"q{depth}", f"q{depth - 1}")]


# --- run id and run tokens -----------------------------------------------------------------------

RUN_TOKENS = """\
config: {%s}
states:
  a:
    run: {shell: "{{run.id}} {{run.prefix}} {{config.where}}"}
    terminal: true
"""


def test_default_run_id_and_prefix():
    p = plan(RUN_TOKENS % 'where: "{{run.prefix}}/x"')
    assert p.run_id == "t-plan"
    assert p.steps[0].shell == "t-plan t/t-plan t/t-plan/x"


def test_explicit_run_id():
    p = plan(RUN_TOKENS % 'where: "w"', run_id="r1")
    assert p.run_id == "r1"
    assert p.steps[0].shell == "r1 t/r1 w"


def test_config_prefix_becomes_run_prefix():
    p = plan(RUN_TOKENS % 'prefix: "pp/{{run.id}}", where: "{{run.prefix}}/x"', run_id="r1")
    # Inside config, run.prefix is still the default <name>/<id>; afterwards it is config.prefix.
    assert p.steps[0].shell == "r1 pp/r1 t/r1/x"


def test_run_block_keys_and_unnamed_workflow():
    loaded = load_spec_text(
        """\
apiVersion: npa.workflow/v0.0.1
kind: Workflow
run: {team: vision, id: ignored}
states:
  a: {run: {shell: "{{run.team}} {{run.id}}"}, terminal: true}
""",
        file="u.yaml",
    )
    p = build_plan(loaded)
    assert p.workflow == "unnamed"
    assert p.run_id == "unnamed-plan"
    assert p.steps[0].shell == "vision unnamed-plan"


# --- the plan document ----------------------------------------------------------------------------


def test_plan_json_shape():
    doc = plan(GATE_LOOP, run_id="r1").to_json()
    assert list(doc) == ["workflow", "api_version", "initial", "assume_decision", "steps"]
    assert doc["workflow"] == "t"
    assert doc["api_version"] == "npa.workflow/v0.0.1"
    assert doc["initial"] == "refine"
    assert doc["assume_decision"] == LOOP_BACK
    for step in doc["steps"]:
        assert list(step) == [
            "state", "iteration", "loop_label", "argv", "shell", "tool_ref", "resources",
            "resources_profile", "outputs", "inputs", "group", "loop", "round",
        ]
    gate = doc["steps"][2]
    assert gate["outputs"] == [{"uri": "s3://bk/refine/1/decision.json", "schema": "decision"}]
    assert gate["iteration"] is None
    json.dumps(doc)  # serializable as is


def test_plan_json_is_a_copy():
    p = plan(GATE_LOOP)
    doc = p.to_json()
    doc["steps"][2]["outputs"][0]["uri"] = "changed"
    doc["steps"][2]["argv"].append("x")
    assert p.steps[2].outputs[0]["uri"] != "changed"
    assert p.steps[2].argv == []


def test_plan_json_profile_is_a_copy():
    p = plan("""\
        resources:
          default: {kubernetes: {pod_config: {labels: {a: b}}}}
        states:
          a: {run: {shell: a}, terminal: true}
        """)
    doc = p.to_json()
    doc["steps"][0]["resources_profile"]["kubernetes"]["pod_config"]["labels"]["a"] = "changed"
    assert p.steps[0].resources_profile == {"kubernetes": {"pod_config": {"labels": {"a": "b"}}}}


# --- where a state's decision is read (docs/decisions.md) -------------------------------------------

DECISIONS = """\
config:
  decision_uri: "s3://bk/{{run.id}}/global.json"
states:
  refine: {sequence: [gate, scoped, blank, plain], loop: {max: 2}, terminal: true}
  gate:
    run: {shell: g}
    writesDecision: true
    outputs:
      - {uri: "s3://bk/metrics-{{loop.refine}}.json", schema: metrics}
      - {uri: "s3://bk/gate-{{loop.refine}}.json", schema: Decision}
  scoped:
    run: {shell: s}
    params: {decision_uri: "s3://bk/round-{{loop.refine}}/decision.json"}
  blank:
    run: {shell: b}
    params: {decision_uri: ""}
  plain: {run: {shell: p}}
"""


def test_decision_uri_precedence():
    loaded = load(DECISIONS)
    ctx = run_context(loaded, "r1")

    def where(name: str) -> str:
        return decision_uri(loaded, name, ctx, loops={"refine": 2}, state_outputs={})

    assert where("gate") == "s3://bk/gate-2.json"  # the first output whose schema mentions decision
    assert where("scoped") == "s3://bk/round-2/decision.json"  # state-scoped via params
    assert where("blank") == "s3://bk/r1/global.json"  # blanked in params: the global one
    assert where("plain") == "s3://bk/r1/global.json"


def test_decision_uri_absent():
    loaded = load("""\
        states:
          a: {run: {shell: a}, terminal: true}
        """)
    assert decision_uri(loaded, "a", run_context(loaded, "r"), loops={}, state_outputs={}) == ""


def test_self_containing_sequence_stops_at_the_limit_instead_of_hanging():
    # Validation rejects this; the planner still must not loop forever on an unvalidated spec.
    spec = Spec.model_validate(
        {"apiVersion": "npa.workflow/v0.0.1", "initial": "s", "states": {"s": {"sequence": ["s"]}}}
    )
    with pytest.raises(SpecError, match="plan exceeded step limit"):
        build_plan(LoadedSpec(spec=spec, catalog=EMPTY_CATALOG))


def test_a_param_reads_its_sibling_params_in_dependency_order():
    from npa_workflow.plan.planner import build_plan
    from npa_workflow.spec.load import load_spec_text

    loaded = load_spec_text(
        "apiVersion: npa.workflow/v0.0.1\nkind: Workflow\nmetadata: {name: t}\n"
        "config: {root: s3://b, prefix: p}\n"
        "states:\n  train: {sequence: [fit], loop: {max: 2}, terminal: true}\n"
        "  fit:\n    run: {argv: [fit, '{{config.ckpt}}', '{{config.prefix}}']}\n"
        "    params: {ckpt: '{{params.round_uri}}/ckpt', round_uri: '{{config.root}}/r{{loop.train}}',"
        " prefix: '{{config.prefix}}/fit'}\n")
    plan = build_plan(loaded)
    assert [s.argv for s in plan.steps] == [["fit", "s3://b/r1/ckpt", "p/fit"], ["fit", "s3://b/r2/ckpt", "p/fit"]]


def test_every_step_keeps_its_loop_round_and_the_loop_counters_launch_keys_it_by():
    p = plan("""\
        states:
          refine: {sequence: [fan, gate], loop: {max: 2}, next: done}
          fan: {parallel: [a, b]}
          a: {run: {shell: a}}
          b: {run: {shell: b}}
          gate: {run: {shell: g}}
          done: {run: {shell: d}, terminal: true}
        """)
    assert [(s.state, s.loop_label, s.loop, s.round) for s in p.steps] == [
        ("a", "fan", "refine", 1), ("b", "fan", "refine", 1), ("gate", "refine", "refine", 1),
        ("a", "fan", "refine", 2), ("b", "fan", "refine", 2), ("gate", "refine", "refine", 2),
        ("done", "", "", None),
    ]
    assert [s.loops for s in p.steps][-1] == {"refine": 2}  # counters persist after the loop
    assert all(s.iteration is None for s in p.steps)  # the contract's iteration numbers leaf loops only
