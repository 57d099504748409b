"""`loop` (docs/language.md, "States"): shape, `max` integer forms, `until`, and `--var` overrides."""

from __future__ import annotations

import pytest

DONE = "  done: {terminal: true}\n"


def looped(max_value: str, config: str = "{}") -> str:
    return (f"config: {config}\nstates:\n  l: {{sequence: [a], loop: {{max: {max_value}}}, next: done}}\n"
            "  a: {run: {shell: 'echo {{loop.l}}'}}\n" + DONE)


def test_loop_must_be_a_mapping(spec_error):
    [problem] = spec_error("states:\n  a: {run: {shell: x}, loop: 3, terminal: true}\n").problems
    assert (problem.path, problem.message, problem.hint) == (
        "states.a.loop", "loop must be a mapping, got int", "write 'loop: {max: 3}'"
    )


@pytest.mark.parametrize(("value", "config"), [
    ("3", "{}"),
    ("'3'", "{}"),
    ("' 3 '", "{}"),
    ("config.n", "{n: 2}"),
    ("'{{config.n}}'", "{n: 2}"),
    ("'{{config.n  }}'", "{n: 2}"),
    ("'{{config.n}}'", "{n: '4'}"),
    ("'{{config.n}}'", "{n: 2.7}"),
    ("'{{config.a.b}}'", "{a.b: 2}"),
    ("'{{config.n}}'", "{m: '5', n: '{{config.m}}'}"),  # resolved config (the existing engine reads it raw)
    ("null", "{}"),
])
def test_loop_max_accepted_forms(load, value, config):
    load(looped(value, config))


def test_loop_without_max_runs_once(load):
    load("states:\n  a: {run: {shell: x}, loop: {until: promote_checkpoint}, terminal: true}\n")


@pytest.mark.parametrize(("value", "config", "message"), [
    ("true", "{}", "loop.max must be an integer, not a bool"),
    ("2.0", "{}", "loop.max must be an integer, got 2.0"),
    ("2.5", "{}", "loop.max must be an integer, got 2.5"),
    ("[2]", "{}", "loop.max must be an integer, got list"),
    ("0", "{}", "loop.max must be >= 1, got 0"),
    ("-2", "{}", "loop.max must be >= 1, got -2"),
    ("'{{ config.n }}'", "{n: 2}", "cannot resolve loop.max from '{{ config.n }}'"),
    ("'{{config.n}} rounds'", "{n: 2}", "cannot resolve loop.max from '{{config.n}} rounds'"),
    ("three", "{}", "cannot resolve loop.max from 'three'"),
    ("'²'", "{}", "cannot resolve loop.max from '²'"),
    ("'{{config.nope}}'", "{n: 2}", "loop.max names config.nope, which is not in config"),
    ("config.nope", "{n: 2}", "loop.max names config.nope, which is not in config"),
    ("'{{config.n}}'", "{n: '2.5'}", "loop.max reads config.n = '2.5', which is not an integer"),
    ("'{{config.n}}'", "{n: abc}", "loop.max reads config.n = 'abc', which is not an integer"),
    ("'{{config.n}}'", "{n: true}", "loop.max reads config.n = True, which is not an integer"),
    ("'{{config.n}}'", "{n: '0'}", "loop.max must be >= 1, got 0"),
])
def test_loop_max_errors(spec_error, value, config, message):
    [problem] = spec_error(looped(value, config)).problems
    assert (problem.path, problem.message) == ("states.l.loop.max", message)


def test_loop_max_hints(spec_error):
    assert spec_error(looped("'{{ config.n }}'", "{n: 2}")).problems[0].hint == (
        "use an integer, 'config.KEY' or '{{config.KEY}}'"
    )
    assert spec_error(looped("config.nope")).problems[0].hint == "add 'nope' to config"
    assert spec_error(looped("config.n", "{n: x}")).problems[0].hint == "set config.n to a whole number"


def test_unknown_loop_until(spec_error):
    [problem] = spec_error("states:\n  a: {run: {shell: x}, loop: {max: 2, until: done}, terminal: true}\n").problems
    assert (problem.path, problem.message, problem.hint) == (
        "states.a.loop.until", "unknown loop.until 'done'", "use promote_checkpoint or loop_back"
    )


def test_loop_tokens_name_a_looped_state(spec_error, load):
    load("states:\n  a: {run: {shell: 'echo {{loop.a}}'}, loop: {max: 2}, next: b}\n"
         "  b: {run: {shell: 'echo after {{loop.a}}'}, terminal: true}\n")
    [problem] = spec_error("states:\n  a: {run: {shell: 'echo {{loop.b}}'}, terminal: true}\n").problems
    assert (problem.path, problem.message, problem.hint) == (
        "states.a.run.shell", "unknown loop token: loop.b",
        "name a state that has a loop, and use the token inside or after that loop",
    )


def test_hyphenated_loop_names(load):
    load("states:\n  outer-loop: {sequence: [a], loop: {max: 2}, next: done}\n"
         "  a: {run: {shell: 'echo {{loop.outer-loop}}'}}\n" + DONE)


def test_override_can_break_a_loop_bound(load, spec_error):
    body = looped("'{{config.rounds}}'", "{rounds: 3}")
    load(body, overrides={"rounds": "5"})
    err = spec_error(body, overrides={"rounds": "many"})
    assert [(p.path, p.message) for p in err.problems] == [
        ("states.l.loop.max",
         "loop.max reads config.rounds = 'many', which is not an integer (from --var rounds=many)")
    ]
    assert [(p.path, p.message) for p in spec_error(body, overrides={"rounds": "0"}).problems] == [
        ("states.l.loop.max", "loop.max must be >= 1, got 0 (from --var rounds=0)")  # the var is the fix
    ]
