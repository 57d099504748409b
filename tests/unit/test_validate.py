"""Cross-cutting behaviour of validation: every problem at once, the message format, warnings
and --strict, and that a valid spec yields the typed model."""

from __future__ import annotations

import pytest

from npa_workflow.errors import Problem, SpecError

BROKEN = """\
config: {a: '{{config.b}}', b: '{{config.a}}'}
resources: {gpu: {accelerators: 'H100:0'}}
initial: start
states:
  first: {run: {shell: 'echo {{params.x}}'}, resources: gpu, next: nowhere, trasitions: []}
  g: {parallel: [first, ghost], maxConcurrency: 65, next: done}
  l: {sequence: [first], loop: {max: 1.5, until: never}, next: done}
  done: {terminal: true}
"""


def test_every_problem_is_reported_at_once(spec_error):
    err = spec_error(BROKEN)
    assert [(p.path, p.message) for p in err.problems] == [
        ("states.first.trasitions", "unknown state key 'trasitions' in state 'first'"),
        ("initial", "initial state 'start' is not defined"),
        ("config.a", "config values reference each other in a cycle: a -> b -> a"),
        ("resources.gpu.accelerators", "accelerator count must be a positive integer, got 'H100:0'"),
        ("states.first.next", "next state 'nowhere' is not defined"),
        ("states.first.run.shell", "params.* tokens are read only inside a state's params (params.x)"),
        ("states.g.parallel[0]", "parallel member 'first' must not declare next or transitions"),
        ("states.g.parallel[1]", "unknown parallel member 'ghost'"),
        ("states.g.maxConcurrency", "maxConcurrency must be <= 64, got 65"),
        ("states.l.loop.max", "loop.max must be an integer, got 1.5"),
        ("states.l.loop.until", "unknown loop.until 'never'"),
    ]
    assert err.warnings == []
    assert all(p.file == "spec.yaml" for p in err.problems)
    legacy = spec_error(BROKEN, allow_unknown_keys=True)
    assert [(w.path, w.message) for w in legacy.warnings] == [
        ("states.first.trasitions", "unknown state key 'trasitions' in state 'first' is ignored"),
    ]
    assert len(legacy.problems) == len(err.problems) - 1


def test_error_text_lists_every_problem(spec_error):
    text = str(spec_error(BROKEN))
    assert text.splitlines()[0] == (
        "spec.yaml: states.first.trasitions: unknown state key 'trasitions' in state 'first' "
        "(fix: did you mean 'transitions'?)"
    )
    assert text.splitlines()[1] == (
        "spec.yaml: initial: initial state 'start' is not defined (fix: name one of: first, g, l, done)"
    )
    assert len(text.splitlines()) == 11


def test_problem_format_and_json():
    problem = Problem("states.a.next", "next state 'b' is not defined", "did you mean 'c'?", file="w.yaml")
    assert problem.format() == "w.yaml: states.a.next: next state 'b' is not defined (fix: did you mean 'c'?)"
    warning = Problem("states.a.image", "unknown state key", severity="warning")
    assert warning.format() == "states.a.image: unknown state key [warning]"
    assert Problem("", "bad").format() == "$: bad"
    assert problem.to_json() == {"file": "w.yaml", "path": "states.a.next", "severity": "error",
                                 "message": "next state 'b' is not defined", "hint": "did you mean 'c'?"}


def test_spec_error_needs_an_error():
    with pytest.raises(ValueError):
        SpecError([Problem("x", "only a warning", severity="warning")])


def test_with_file_stamps_problems_without_one():
    err = SpecError([Problem("a", "m"), Problem("b", "n", file="other.yaml")]).with_file("spec.yaml")
    assert [p.file for p in err.problems] == ["spec.yaml", "other.yaml"]


def test_strict_turns_warnings_into_errors(load, spec_error):
    body = "states:\n  a: {run: {shell: x}, transitions: [{when: loop_back, goto: done}]}\n  done: {terminal: true}\n"
    assert [w.message for w in load(body).warnings] == ["the run can end at 'a', which is not terminal"]
    err = spec_error(body, strict=True)
    assert [(p.path, p.severity) for p in err.problems] == [("states.a", "error")]


def test_valid_spec_model(load):
    loaded = load("""\
        config: {bucket: bkt}
        resources: {gpu: {accelerators: 'H100:1', num_nodes: 1}}
        states:
          prep:
            run: {argv: [echo, hi]}
            outputs: [{uri: 's3://{{config.bucket}}/d', schema: dataset}, {uri: 's3://b/dec', schema: Decision}]
            next: loop
          loop: {sequence: [train, gate], loop: {max: 2, until: promote_checkpoint}, next: route}
          train: {run: {shell: 'train {{state.prep.uri}} {{loop.loop}}'}, resources: gpu}
          gate: {tool_ref: demo.train, writes_decision: true, params: {decision_uri: 's3://b/{{loop.loop}}'}}
          route: {transitions: [{when: promote_checkpoint, goto: done}, {goto: done}]}
          done: {terminal: true}
        """)
    spec = loaded.spec
    assert spec.initial == "prep" and spec.name == "t" and spec.has_transitions
    assert spec.states["prep"].decision_output.uri == "s3://b/dec"
    assert spec.states["gate"].tool_ref == "demo.train" and spec.states["gate"].writes_decision
    assert spec.states["loop"].loop.max == 2
    assert spec.resources == {"gpu": {"accelerators": "H100:1", "num_nodes": 1}}
    assert loaded.warnings == [] and loaded.file == "spec.yaml"
