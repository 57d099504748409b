"""Waves: folding the flat plan into submit units (one per step, or per batch of a group), and batching groups."""

from __future__ import annotations

import textwrap

import pytest

from npa_workflow.plan.planner import build_plan, run_context
from npa_workflow.plan.waves import batches, build_waves, concurrency_limit
from npa_workflow.spec.load import load_spec_text

HEADER = """\
apiVersion: npa.workflow/v0.0.1
kind: Workflow
metadata: {name: w}
"""


def waves_of(body: str, *, cap: int = 0, overrides: dict[str, str] | None = None, **kw):
    loaded = load_spec_text(HEADER + textwrap.dedent(body), file="w.yaml", overrides=overrides)
    plan = build_plan(loaded, **kw)
    return build_waves(loaded, plan, run_context(loaded, plan.run_id), max_concurrency_cap=cap)


def shape(wp) -> list[tuple]:
    """(kind, name, [[task names per batch]]) per wave."""
    return [(w.kind, w.name, [[s.task_name for s in b] for b in w.batches]) for w in wp.waves]


FANOUT = """\
config: {mc: "2"}
states:
  prep: {run: {shell: p}, next: fan}
  fan: {parallel: [a, b, c], maxConcurrency: %s, next: join}
  a: {run: {shell: a}, outputs: [{uri: "s3://bk/a", schema: r}]}
  b: {run: {shell: b}}
  c: {run: {shell: c}}
  join: {run: {shell: j}, terminal: true}
"""


def test_ungrouped_steps_are_serial_waves_and_members_one_parallel_wave():
    wp = waves_of(FANOUT % "3")
    assert shape(wp) == [
        ("serial", "prep", [["prep"]]),
        ("parallel", "fan", [["a", "b", "c"]]),
        ("serial", "join", [["join"]]),
    ]
    assert [w.index for w in wp.waves] == [0, 1, 2]
    assert [w.group for w in wp.waves] == ["", "fan", ""]
    assert [w.max_concurrency for w in wp.waves] == [1, 3, 1]


def test_batches_follow_max_concurrency_in_declared_order():
    wp = waves_of(FANOUT % "2")
    fan = wp.waves[1]
    assert fan.max_concurrency == 2
    assert [[s.state for s in b] for b in fan.batches] == [["a", "b"], ["c"]]
    assert [s.state for s in fan.steps] == ["a", "b", "c"]


def test_max_concurrency_defaults_to_group_size():
    wp = waves_of(FANOUT.replace("maxConcurrency: %s, ", ""))
    assert wp.waves[1].max_concurrency == 3
    assert len(wp.waves[1].batches) == 1


@pytest.mark.parametrize("form", ["config.mc", "'{{config.mc}}'", "'2'", "2"])
def test_max_concurrency_from_config(form):
    fan = waves_of(FANOUT % form).waves[1]
    assert fan.max_concurrency == 2
    assert len(fan.batches) == 2


def test_max_concurrency_from_var_override():
    fan = waves_of(FANOUT % "config.mc", overrides={"mc": "1"}).waves[1]
    assert [[s.state for s in b] for b in fan.batches] == [["a"], ["b"], ["c"]]


def test_cap_only_lowers():
    assert waves_of(FANOUT % "2", cap=1).waves[1].max_concurrency == 1
    assert len(waves_of(FANOUT % "2", cap=1).waves[1].batches) == 3
    assert waves_of(FANOUT % "2", cap=5).waves[1].max_concurrency == 2  # a higher cap does not raise it
    assert waves_of(FANOUT % "2", cap=0).waves[1].max_concurrency == 2  # 0 = no cap
    serial = waves_of(FANOUT % "2", cap=1).waves[0]
    assert serial.kind == "serial" and serial.max_concurrency == 1


def test_concurrency_limit_and_batches():
    assert concurrency_limit(2, 3) == 2
    assert concurrency_limit(0, 3) == 3
    assert concurrency_limit(0, 3, cap=2) == 2
    assert concurrency_limit(5, 3, cap=10) == 5
    assert concurrency_limit(0, 0) == 1
    assert batches(list("abcde"), 2) == [["a", "b"], ["c", "d"], ["e"]]
    assert batches(list("abc"), 3) == [["a", "b", "c"]]
    assert batches(list("abc"), 10) == [["a", "b", "c"]]
    assert batches([], 2) == []


def test_loop_reentry_of_a_group_is_a_new_wave():
    wp = waves_of("""\
        states:
          rounds: {sequence: [fan], loop: {max: 3}, next: end}
          fan: {parallel: [a, b]}
          a: {run: {shell: a}}
          b: {run: {shell: b}}
          end: {run: {shell: e}, terminal: true}
        """)
    assert shape(wp) == [
        ("parallel", "fan", [["a", "b"]]),
        ("parallel", "fan", [["a", "b"]]),
        ("parallel", "fan", [["a", "b"]]),
        ("serial", "end", [["end"]]),
    ]
    assert wp.to_json()["parallel_waves"] == 3


def test_consecutive_different_groups_are_separate_waves():
    wp = waves_of("""\
        states:
          g1: {parallel: [a, b], next: g2}
          g2: {parallel: [c, d], next: end}
          a: {run: {shell: a}}
          b: {run: {shell: b}}
          c: {run: {shell: c}}
          d: {run: {shell: d}}
          end: {run: {shell: e}, terminal: true}
        """)
    assert shape(wp) == [
        ("parallel", "g1", [["a", "b"]]),
        ("parallel", "g2", [["c", "d"]]),
        ("serial", "end", [["end"]]),
    ]


def test_single_member_group_is_a_parallel_wave_with_one_batch():
    wp = waves_of("""\
        states:
          g: {parallel: [a], next: end}
          a: {run: {shell: a}}
          end: {run: {shell: e}, terminal: true}
        """)
    assert shape(wp)[0] == ("parallel", "g", [["a"]])
    assert wp.waves[0].max_concurrency == 1


def test_leaf_loop_steps_are_serial_waves():
    wp = waves_of("""\
        states:
          poll: {run: {shell: p}, loop: {max: 2}, next: end}
          end: {run: {shell: e}, terminal: true}
        """)
    assert shape(wp) == [("serial", "poll", [["poll-1"]]), ("serial", "poll", [["poll-2"]]),
                         ("serial", "end", [["end"]])]


def test_waves_json_contract():
    doc = waves_of(FANOUT % "2", assume_decision="promote", run_id="r7").to_json()
    assert list(doc) == ["workflow", "run_id", "assume_decision", "wave_count", "parallel_waves", "waves"]
    assert doc["workflow"] == "w"
    assert doc["run_id"] == "r7"
    assert doc["assume_decision"] == "promote_checkpoint"
    assert doc["wave_count"] == 3
    assert doc["parallel_waves"] == 1
    for wave in doc["waves"]:
        assert list(wave) == ["index", "kind", "group", "name", "max_concurrency", "batches", "steps"]
        for step in wave["steps"]:
            assert list(step) == ["state", "iteration", "tool_ref", "resources", "outputs", "round"]
    fan = doc["waves"][1]
    assert fan == {
        "index": 1, "kind": "parallel", "group": "fan", "name": "fan", "max_concurrency": 2, "batches": 2,
        "steps": [
            {"state": "a", "iteration": None, "tool_ref": "", "resources": "default",
             "outputs": ["s3://bk/a"], "round": None},
            {"state": "b", "iteration": None, "tool_ref": "", "resources": "default", "outputs": [], "round": None},
            {"state": "c", "iteration": None, "tool_ref": "", "resources": "default", "outputs": [], "round": None},
        ],
    }
    assert doc["waves"][0]["group"] == ""


def test_default_run_id_in_waves():
    assert waves_of(FANOUT % "2").run_id == "w-plan"


def test_large_group_batches():
    n = 300
    members = ", ".join(f"m{i}" for i in range(n))
    body = f"states:\n  g: {{parallel: [{members}], maxConcurrency: 64, next: end}}\n"
    body += "".join(f"  m{i}: {{run: {{shell: x}}}}\n" for i in range(n))
    body += "  end: {run: {shell: e}, terminal: true}\n"
    wp = waves_of(body)
    assert [len(b) for b in wp.waves[0].batches] == [64] * (n // 64) + [n % 64]
    assert len(wp.waves) == 2
