"""Nothing is silently ignored (issue 21): keys the walk does not follow where they stand, and states no path
reaches, are warnings naming where to put them (errors under --strict); `graph` draws the same edges "(ignored)"."""

from __future__ import annotations

from npa_workflow.compile.asl import compile_spec
from npa_workflow.graph.model import build_graph

LOOPED = """\
initial: shard
states:
  shard: {run: {shell: x}, next: refine}
  refine:
    sequence: [fit, gate]
    loop: {max: 4, until: promote_checkpoint}
    transitions: [{when: promote_checkpoint, goto: publish}]
    next: escalate
  fit: {run: {shell: x}}
  gate: {run: {shell: x}, writesDecision: true, outputs: [{uri: "s3://b/gate.json", schema: decision}]}
  publish: {run: {shell: x}, terminal: true}
  escalate: {run: {shell: x}, terminal: true}
"""


def test_transitions_on_a_looped_sequence_are_a_warning_naming_where_they_go(load):
    loaded = load(LOOPED)
    found = {(w.path, w.message): w.hint for w in loaded.warnings}
    hint = found[("states.refine.transitions",
                  "transitions on a looped sequence are never followed (after its body, only its next is)")]
    assert "move them to 'escalate' that 'refine' goes next to" in hint
    # publish was reached only through the ignored transition: no path runs it
    assert found[("states.publish", "no path from the initial state 'shard' reaches 'publish': it never runs")]
    # the graph draws the same edge as ignored
    graph = build_graph(loaded, compile_spec(loaded))
    [edge] = [e for e in graph.edges if e.src == "refine" and e.dst == "publish"]
    assert edge.ignored


def test_under_strict_they_are_errors(spec_error):
    problems = spec_error(LOOPED, strict=True).problems
    assert {(p.path, p.severity) for p in problems} == {("states.refine.transitions", "error"),
                                                        ("states.publish", "error")}


def test_a_router_after_the_loop_is_what_the_hint_says_and_passes_clean(load):
    fixed = LOOPED.replace("""    transitions: [{when: promote_checkpoint, goto: publish}]
    next: escalate
""", """    next: route
  route: {transitions: [{when: promote_checkpoint, goto: publish}], next: escalate}
""")
    assert load(fixed).warnings == []


def test_a_terminal_states_next_and_transitions_and_a_groups_transitions_are_warnings(load):
    loaded = load("""\
        states:
          a: {run: {shell: x}, next: g}
          g: {parallel: [m1, m2], transitions: [{goto: z}], next: z}
          m1: {run: {shell: x}}
          m2: {run: {shell: x}}
          z: {run: {shell: x}, terminal: true, next: a2, transitions: [{goto: a2}]}
          a2: {run: {shell: x}, terminal: true}
        """)
    paths = [(w.path, w.message) for w in loaded.warnings]
    assert paths == [
        ("states.g.transitions", "transitions on a parallel group are never followed (after its body, only its "
                                 "next is)"),
        ("states.z.next", "'z' is terminal: its next is never followed"),
        ("states.z.transitions", "'z' is terminal: its transitions are never followed"),
        ("states.a2", "no path from the initial state 'a' reaches 'a2': it never runs"),
    ]


def test_every_shipped_spec_passes_without_these_warnings() -> None:
    from pathlib import Path

    from npa_workflow.spec.load import load_spec

    specs = Path(__file__).resolve().parents[2] / "specs"
    for path in sorted(specs.glob("*.yaml")):
        if path.name == "tools.yaml":
            continue
        loaded = load_spec(path, catalog=specs / "tools.yaml")
        assert [w for w in loaded.warnings if "never" in w.message] == [], path
