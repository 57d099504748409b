"""State fields (docs/language.md, "States"): run, toolRef, sequence, parallel groups, params, trigger,
transitions, next and unknown keys. Loops are in test_validate_loops.py."""

from __future__ import annotations

import pytest

from npa_workflow.spec.catalog import EMPTY_CATALOG

DONE = "  done: {terminal: true}\n"


# --- run ------------------------------------------------------------------------------------


def test_run_must_be_a_mapping(spec_error):
    [problem] = spec_error("states:\n  a: {run: echo hi, next: done}\n" + DONE).problems
    assert (problem.path, problem.message) == ("states.a.run", "run must be a mapping, got string")
    assert problem.hint == "write 'run: {shell: \"...\"}' or 'run: {argv: [...]}'"


@pytest.mark.parametrize("run", ["{}", "{shell: '  '}", "{argv: []}", "{shell: '', argv: []}"])
def test_empty_run_block(errors, run):
    assert errors(f"states:\n  a: {{run: {run}, next: done}}\n" + DONE) == [("states.a.run", "empty run block")]


def test_empty_run_is_fine_next_to_a_tool_or_a_sequence(load):
    load("states:\n  a: {run: {}, toolRef: demo.shard, next: s}\n  s: {run: {}, sequence: [b], next: done}\n"
         "  b: {run: {shell: x}}\n" + DONE)


def test_run_argv_items_render_as_json_scalars(load):
    loaded = load("states:\n  a: {run: {argv: [echo, 1, 2.5, true, false]}, terminal: true}\n")
    assert loaded.spec.states["a"].run.argv == ["echo", "1", "2.5", "true", "false"]


def test_run_argv_must_hold_scalars(errors):
    assert errors("states:\n  a: {run: {argv: [echo, [1]]}, terminal: true}\n") == [
        ("states.a.run.argv[1]", "must be a string, got list")
    ]


# --- toolRef --------------------------------------------------------------------------------


def test_unknown_tool_ref_with_close_name(spec_error):
    [problem] = spec_error("states:\n  a: {toolRef: demo.captoin, terminal: true}\n").problems
    assert (problem.path, problem.message, problem.hint) == (
        "states.a.toolRef", "unknown toolRef 'demo.captoin'", "did you mean 'demo.caption'?"
    )


def test_unknown_tool_ref_lists_known_tools(spec_error):
    [problem] = spec_error("states:\n  a: {toolRef: zzz, terminal: true}\n").problems
    assert problem.hint == "known: demo.caption, demo.shard, demo.train"


def test_unknown_tool_ref_without_a_catalog(spec_error):
    [problem] = spec_error("states:\n  a: {toolRef: demo.caption, terminal: true}\n", catalog=EMPTY_CATALOG).problems
    assert problem.hint == "no tool catalog was loaded: pass --catalog FILE or put tools.yaml next to the spec"


def test_tool_ref_requires_the_config_keys_of_its_template(spec_error):
    err = spec_error("config: {images_uri: s3://b/i/}\nstates:\n  a: {toolRef: demo.caption, terminal: true}\n")
    [problem] = err.problems
    assert (problem.path, problem.message, problem.hint) == (
        "states.a.toolRef",
        "tool 'demo.caption': unknown config token: config.captions_uri",
        "add 'captions_uri' to config or params",
    )


def test_tool_ref_reports_every_missing_key_once(errors):
    assert errors("states:\n  a: {toolRef: demo.caption, terminal: true}\n") == [
        ("states.a.toolRef", "tool 'demo.caption': unknown config token: config.images_uri"),
        ("states.a.toolRef", "tool 'demo.caption': unknown config token: config.captions_uri"),
    ]


def test_tool_ref_keys_may_come_from_params_or_tool_defaults(load):
    loaded = load("""\
        states:
          a: {toolRef: demo.caption, params: {images_uri: s3://b/i/, captions_uri: s3://b/c/}, next: b}
          b: {toolRef: demo.train, terminal: true}
        """)
    assert loaded.spec.config == {"epochs": "3"}  # tool defaults are global config defaults


def test_tool_ref_wins_over_run(load):
    load("states:\n  a: {toolRef: demo.train, run: {shell: '{{config.nope}}'}, terminal: true}\n")


# --- sequence -------------------------------------------------------------------------------


def test_unknown_sequence_member(spec_error):
    [problem] = spec_error("states:\n  s: {sequence: [a, bb], next: done}\n  a: {run: {shell: x}}\n" + DONE).problems
    assert (problem.path, problem.message) == ("states.s.sequence[1]", "unknown sequence 'bb'")
    assert problem.hint == "name one of: s, a, done"


def test_sequence_must_be_a_list(errors):
    assert errors("states:\n  s: {sequence: a, next: done}\n  a: {run: {shell: x}}\n" + DONE) == [
        ("states.s.sequence", "must be a list, got 'a'")
    ]


def test_sequence_and_parallel_together(errors):
    assert errors("states:\n  s: {sequence: [a], parallel: [a], next: done}\n  a: {run: {shell: x}}\n" + DONE) == [
        ("states.s.sequence", "a parallel group may not have sequence")
    ]


# --- parallel -------------------------------------------------------------------------------

MEMBERS = "  a: {run: {shell: x}}\n  b: {run: {shell: x}}\n"


def group(spec: str) -> str:
    return f"states:\n  g: {{{spec}, next: done}}\n" + MEMBERS + DONE


def test_valid_group(load):
    loaded = load(group("parallel: [a, b], parallelCount: 2, maxConcurrency: 1"))
    assert loaded.spec.states["g"].parallel == ["a", "b"]


def test_parallel_must_be_a_list(errors):
    assert errors(group("parallel: a")) == [("states.g.parallel", "parallel must be a list of state names, got string")]


def test_parallel_member_must_be_a_name(errors):
    assert errors(group("parallel: [a, 3, {b: 1}]")) == [
        ("states.g.parallel[1]", "parallel members must be state names, got 3"),
        ("states.g.parallel[2]", "parallel members must be state names, got {'b': 1}"),
    ]


def test_parallel_member_rules(errors):
    body = """\
        states:
          g: {parallel: [a, zz, a, g, s, t, n, tr, sub], next: done}
          a: {run: {shell: x}}
          s: {sequence: [a]}
          t: {run: {shell: x}, terminal: true}
          n: {run: {shell: x}, next: done}
          tr: {run: {shell: x}, transitions: [{goto: done}]}
          sub: {parallel: [a]}
          done: {terminal: true}
        """
    assert errors(body) == [
        ("states.g.parallel[1]", "unknown parallel member 'zz'"),
        ("states.g.parallel[2]", "duplicate parallel member 'a'"),
        ("states.g.parallel[3]", "a parallel group cannot contain itself"),
        ("states.g.parallel[4]", "parallel member 's' must be a leaf state (no sequence or parallel)"),
        ("states.g.parallel[5]", "parallel member 't' must not be terminal"),
        ("states.g.parallel[6]", "parallel member 'n' must not declare next or transitions"),
        ("states.g.parallel[7]", "parallel member 'tr' must not declare next or transitions"),
        ("states.g.parallel[8]", "parallel member 'sub' must be a leaf state (no sequence or parallel)"),
    ]


def test_parallel_member_edge_hint(spec_error):
    [problem] = spec_error(group("parallel: [a]").replace("  a: {run: {shell: x}}", "  a: {run: {shell: x}, next: b}"))\
        .problems
    assert problem.hint == "the group owns the edge: set next on 'g'"


@pytest.mark.parametrize(("extra", "key"), [
    ("run: {shell: x}", "run"), ("toolRef: demo.shard", "toolRef"), ("sequence: [a]", "sequence"),
])
def test_group_may_not_have_work_of_its_own(errors, extra, key):
    assert errors(group(f"parallel: [a, b], {extra}")) == [
        (f"states.g.{key}", f"a parallel group may not have {key}")
    ]


def test_loop_on_a_group(errors):
    assert errors(group("parallel: [a, b], loop: {max: 2}")) == [
        ("states.g.loop", "loop is not allowed on a parallel group")
    ]


def test_loop_on_a_member(errors):
    body = "states:\n  g: {parallel: [a], next: done}\n  a: {run: {shell: x}, loop: {max: 2}}\n" + DONE
    assert errors(body) == [("states.a.loop", "loop is not allowed on a parallel member (of 'g')")]


@pytest.mark.parametrize("key", ["parallelCount", "maxConcurrency", "parallel_count", "max_concurrency"])
def test_group_counts_require_a_group(errors, key):
    camel = {"parallel_count": "parallelCount", "max_concurrency": "maxConcurrency"}.get(key, key)
    assert errors(f"states:\n  a: {{run: {{shell: x}}, {key}: 2, terminal: true}}\n") == [
        (f"states.a.{camel}", f"{camel} requires a parallel group")
    ]


def test_parallel_count_mismatch(spec_error):
    [problem] = spec_error(group("parallel: [a, b], parallelCount: 3")).problems
    assert (problem.path, problem.message, problem.hint) == (
        "states.g.parallelCount", "parallelCount resolves to 3, but the group declares 2 members",
        "make the count and the member list agree",
    )


def test_parallel_count_from_config(load, errors):
    load("config: {n: 2}\n" + group("parallel: [a, b], parallelCount: '{{config.n}}'"))
    load("config: {n: '2'}\n" + group("parallel: [a, b], parallelCount: config.n"))
    assert errors("config: {n: 3}\n" + group("parallel: [a, b], parallelCount: config.n")) == [
        ("states.g.parallelCount", "parallelCount resolves to 3, but the group declares 2 members")
    ]


@pytest.mark.parametrize(("value", "message"), [
    ("0", "maxConcurrency must be >= 1, got 0"),
    ("65", "maxConcurrency must be <= 64, got 65"),
    ("true", "maxConcurrency must be an integer, not a bool"),
    ("1.5", "maxConcurrency must be an integer, got 1.5"),
    ("'{{config.nope}}'", "maxConcurrency names config.nope, which is not in config"),
    ("'{{config.cap}}'", "maxConcurrency must be <= 64, got 100"),
    ("'a lot'", "cannot resolve maxConcurrency from 'a lot'"),
])
def test_max_concurrency_bounds(errors, value, message):
    body = "config: {cap: 100}\n" + group(f"parallel: [a, b], maxConcurrency: {value}")
    assert errors(body) == [("states.g.maxConcurrency", message)]


def test_max_concurrency_from_config(load):
    load("config: {cap: 64}\n" + group("parallel: [a, b], maxConcurrency: '{{config.cap}}'"))


# --- params ---------------------------------------------------------------------------------


def test_params_must_be_a_mapping(errors):
    assert errors("states:\n  a: {run: {shell: x}, params: [1], terminal: true}\n") == [
        ("states.a.params", "params must be a mapping, got list")
    ]


def test_params_values_must_be_scalars(spec_error):
    err = spec_error("states:\n  a: {run: {shell: x}, params: {ok: 1, l: [1], m: {k: v}, n: null}, terminal: true}\n")
    assert [(p.path, p.message) for p in err.problems] == [
        ("states.a.params.l", "params.l must be a string, number or bool, got list"),
        ("states.a.params.m", "params.m must be a string, number or bool, got mapping"),
        ("states.a.params.n", "params.n must be a string, number or bool, got null"),
    ]
    assert err.problems[0].hint == "quote the value, or pass structured data through a file"


def test_params_may_not_use_state_tokens(spec_error):
    body = ("states:\n  a: {run: {shell: x}, outputs: [{uri: s3://b/a}], next: b}\n"
            "  b: {run: {shell: x}, params: {src: '{{state.a.uri}}'}, terminal: true}\n")
    [problem] = spec_error(body).problems
    assert (problem.path, problem.message) == (
        "states.b.params.src", "state.* tokens are not allowed in params (state.a.uri)"
    )


def test_params_resolve_against_base_config_and_each_other(errors, load):
    loaded = load("config: {root: s3://b}\nstates:\n  a: {run: {shell: 'echo {{config.out}}'}, "
                  "params: {out: '{{config.root}}/x'}, terminal: true}\n")
    assert loaded.spec.states["a"].params == {"out": "{{config.root}}/x"}
    # A sibling param is read as params.K, in dependency order, whatever order the params are written in.
    load("states:\n  a: {run: {shell: 'echo {{config.q}}'}, params: {q: '{{params.p}}/q', p: v}, terminal: true}\n")
    assert errors("states:\n  a: {run: {shell: x}, params: {p: '{{params.q}}', q: '{{params.p}}'}, "
                  "terminal: true}\n") == [
        ("states.a.params.p", "params reference each other in a cycle: params.p -> params.q -> params.p"),
        ("states.a.params.q", "params reference each other in a cycle: params.p -> params.q -> params.p"),
    ]
    # The root cause is reported once: a param reading a broken sibling, and the command reading it, are not.
    assert errors("states:\n  a: {run: {shell: 'x {{config.q}}'}, params: {p: '{{config.nope}}', "
                  "q: '{{params.p}}'}, terminal: true}\n") == [
        ("states.a.params.p", "unknown config token: config.nope"),
    ]


def test_config_in_a_param_is_the_base_config_never_a_sibling_param(errors, load):
    # The existing engine's rule: a param reads the base config. A sibling param named like a config key does
    # not shadow it; only params.K reads the sibling.
    assert errors("states:\n  a: {run: {shell: x}, params: {p: v, q: '{{config.p}}'}, terminal: true}\n") == [
        ("states.a.params.q", "unknown config token: config.p"),
    ]
    assert errors("states:\n  a: {run: {shell: x}, params: {q: '{{params.nope}}'}, terminal: true}\n") == [
        ("states.a.params.q", "unknown params token: params.nope"),
    ]


def test_params_tokens_are_read_only_inside_params(spec_error):
    problems = spec_error("config: {k: '{{params.p}}'}\nstates:\n  a: {run: {shell: 'x {{params.p}}'}, "
                          "params: {p: v}, terminal: true}\n").problems
    assert [(p.path, p.message) for p in problems] == [
        ("config.k", "params.* tokens are not allowed in config (params.p)"),
        ("states.a.run.shell", "params.* tokens are read only inside a state's params (params.p)"),
    ]
    assert problems[1].hint == "read the state's param here as {{config.p}}"


def test_params_may_use_loop_tokens(load):
    load("states:\n  l: {sequence: [a], loop: {max: 2}, next: done}\n"
         "  a: {run: {shell: 'x {{config.p}}'}, params: {p: 'i-{{loop.l}}'}}\n" + DONE)


# --- trigger --------------------------------------------------------------------------------


def test_trigger_must_be_a_mapping(errors):
    assert errors("states:\n  a: {run: {shell: x}, trigger: s3://b/in/, terminal: true}\n") == [
        ("states.a.trigger", "trigger must be a mapping, got string")
    ]


def test_trigger_uri_required(spec_error):
    [problem] = spec_error("states:\n  a: {run: {shell: x}, trigger: {pollSeconds: 5}, terminal: true}\n").problems
    assert (problem.path, problem.message) == ("states.a.trigger.uri", "trigger.uri is required")


def test_trigger_requires_work(errors):
    body = "states:\n  s: {sequence: [a], trigger: {uri: 's3://b/in/'}, next: done}\n  a: {run: {shell: x}}\n" + DONE
    assert errors(body) == [("states.s.trigger", "trigger requires run or toolRef on the same state")]


@pytest.mark.parametrize(("field", "value", "message"), [
    ("pollSeconds", "0", "pollSeconds must be >= 1, got 0"),
    ("pollSeconds", "true", "pollSeconds must be an integer, not a bool"),
    ("maxPolls", "-1", "maxPolls must be >= 0, got -1"),
    ("minObjects", "0", "minObjects must be >= 1, got 0"),
    ("minObjects", "abc", "cannot resolve minObjects from 'abc'"),
    ("poll_seconds", "'{{config.nope}}'", "pollSeconds names config.nope, which is not in config"),
])
def test_trigger_ints(errors, field, value, message):
    path = {"poll_seconds": "pollSeconds"}.get(field, field)
    body = f"states:\n  a: {{run: {{shell: x}}, trigger: {{uri: 's3://b/in/', {field}: {value}}}, terminal: true}}\n"
    assert errors(body) == [(f"states.a.trigger.{path}", message)]


def test_trigger_ints_accept_config_and_digit_strings(load):
    load("config: {poll: '10'}\nstates:\n  a: {run: {shell: x}, terminal: true, trigger: "
         "{uri: 's3://b/in/', pollSeconds: '{{config.poll}}', maxPolls: '0', minObjects: 2}}\n")


def test_trigger_uri_may_not_use_state_tokens(errors):
    body = ("states:\n  a: {run: {shell: x}, outputs: [{uri: 's3://b/a/'}], next: b}\n"
            "  b: {run: {shell: x}, trigger: {uri: '{{state.a.uri}}'}, terminal: true}\n")
    assert errors(body) == [("states.b.trigger.uri", "state.* tokens are not allowed in trigger.uri (state.a.uri)")]


def test_trigger_uri_sees_params_and_must_be_s3(load, errors):
    load("states:\n  a: {run: {shell: x}, params: {in: 's3://b/in/'}, trigger: {uri: '{{config.in}}'}, "
         "terminal: true}\n")
    assert errors("states:\n  a: {run: {shell: x}, trigger: {uri: /tmp/in}, terminal: true}\n") == [
        ("states.a.trigger.uri", "trigger.uri must be an s3:// prefix, got '/tmp/in'")
    ]


# --- transitions and next -------------------------------------------------------------------


def test_transition_needs_goto(errors):
    body = "states:\n  a: {run: {shell: x}, transitions: [{when: loop_back}, x, {goto: ''}], next: done}\n" + DONE
    assert errors(body) == [
        ("states.a.transitions[0]", "transition needs goto"),
        ("states.a.transitions[1]", "transition needs goto"),
        ("states.a.transitions[2]", "transition needs goto"),
    ]


def test_transitions_must_be_a_list(errors):
    assert errors("states:\n  a: {run: {shell: x}, transitions: {goto: done}}\n" + DONE) == [
        ("states.a.transitions", "transitions must be a list, got mapping")
    ]


def test_unknown_goto_and_when(spec_error):
    body = "states:\n  a: {run: {shell: x}, transitions: [{when: promote, goto: dnoe}]}\n" + DONE
    err = spec_error(body)
    assert [(p.path, p.message, p.hint) for p in err.problems] == [
        ("states.a.transitions[0].goto", "goto state 'dnoe' is not defined", "did you mean 'done'?"),
        ("states.a.transitions[0].when", "unknown transition.when 'promote'", "use promote_checkpoint or loop_back"),
    ]


def test_next_must_exist(spec_error):
    [problem] = spec_error("states:\n  a: {run: {shell: x}, next: dome}\n" + DONE).problems
    assert (problem.path, problem.message, problem.hint) == (
        "states.a.next", "next state 'dome' is not defined", "did you mean 'done'?"
    )


@pytest.mark.parametrize("value", ["'false'", "'no'", "'off'", "'0'", "''", "false", "0", "null", "'False'"])
def test_if_false_values(load, value):
    load(f"config: {{flag: {value}}}\nstates:\n  a: {{run: {{shell: x}}, "
         "transitions: [{if: config.flag, goto: done}], next: done}\n" + DONE)


@pytest.mark.parametrize("value", ["'true'", "'yes'", "'on'", "'1'", "true", "1", "'TRUE'"])
def test_if_true_values(load, value):
    load(f"config: {{flag: {value}}}\nstates:\n  a: {{run: {{shell: x}}, "
         "transitions: [{if: config.flag, goto: done}], next: done}\n" + DONE)


@pytest.mark.parametrize(("value", "shown"), [("maybe", "'maybe'"), ("2", "2"), ("[1]", "[1]"), ("0.5", "0.5")])
def test_if_non_boolean_value(spec_error, value, shown):
    body = (f"config: {{flag: {value}}}\nstates:\n  a: {{run: {{shell: x}}, "
            "transitions: [{if: config.flag, goto: done}], next: done}\n" + DONE)
    [problem] = spec_error(body).problems
    assert (problem.path, problem.message, problem.hint) == (
        "states.a.transitions[0].if", f"config.flag is {shown}, which is not a boolean",
        "use true/false, yes/no, on/off or 1/0",
    )


@pytest.mark.parametrize(("expr", "message"), [
    ("flag", "if must be 'config.KEY', got 'flag'"),
    ("'{{config.flag}}'", "if must be 'config.KEY', got '{{config.flag}}'"),
    ("config.", "if must be 'config.KEY', got 'config.'"),
    ("config.nope", "if names config.nope, which is not in config"),
])
def test_if_form(errors, expr, message):
    body = ("config: {flag: 'yes'}\nstates:\n  a: {run: {shell: x}, "
            f"transitions: [{{if: {expr}, goto: done}}], next: done}}\n" + DONE)
    assert errors(body) == [("states.a.transitions[0].if", message)]


def test_if_reads_overridden_config(errors, load):
    body = ("config: {flag: 'yes'}\nstates:\n  a: {run: {shell: x}, "
            "transitions: [{if: config.flag, goto: done}], next: done}\n" + DONE)
    load(body, overrides={"flag": "off"})
    assert errors(body, overrides={"flag": "sometimes"}) == [
        ("states.a.transitions[0].if", "config.flag is 'sometimes', which is not a boolean")
    ]


# --- unknown keys and endings ---------------------------------------------------------------


def test_unknown_state_key_is_an_error_with_a_suggestion(spec_error):
    body = "states:\n  a: {run: {shell: x}, toolRf: demo.train, trasitions: [{goto: done}], image: python}\n" + DONE
    err = spec_error(body)
    assert [(p.path, p.message, p.hint) for p in err.problems] == [
        ("states.a.toolRf", "unknown state key 'toolRf' in state 'a'", "did you mean 'toolRef'?"),
        ("states.a.trasitions", "unknown state key 'trasitions' in state 'a'", "did you mean 'transitions'?"),
        ("states.a.image", "unknown state key 'image' in state 'a'",
         "remove it (a legacy spec: --allow-unknown-keys accepts it with a warning)"),
    ]


def test_allow_unknown_keys_makes_them_warnings(load, spec_error):
    body = "states:\n  a: {run: {shell: x}, trasitions: [{goto: done}], image: python}\n" + DONE
    loaded = load(body, allow_unknown_keys=True)
    assert [(w.path, w.message, w.hint, w.severity) for w in loaded.warnings] == [
        ("states.a.trasitions", "unknown state key 'trasitions' in state 'a' is ignored",
         "did you mean 'transitions'?", "warning"),
        ("states.a.image", "unknown state key 'image' in state 'a' is ignored", "", "warning"),
        ("states.a", "the run can end at 'a', which is not terminal",
         "add 'next', an unconditional transition, or 'terminal: true'", "warning"),
        ("states.done", "no path from the initial state 'a' reaches 'done': it never runs",
         "reach it with a next, a transition's goto or a sequence/parallel list (an edge that is followed), or "
         "remove it", "warning"),
    ]
    err = spec_error(body, strict=True, allow_unknown_keys=True)
    assert [(p.path, p.severity) for p in err.problems] == [
        ("states.a.trasitions", "error"), ("states.a.image", "error"), ("states.a", "error"),
        ("states.done", "error"),
    ]


@pytest.mark.parametrize(("snippet", "path", "message", "hint"), [
    ("loop: {max: 2, untill: promote_checkpoint}", "states.a.loop.untill", "unknown loop key 'untill' is ignored",
     "did you mean 'until'?"),
    ("run: {shell: x, env: {A: b}}", "states.a.run.env", "unknown run key 'env' is ignored", ""),
    ("trigger: {uri: 's3://b/', pollSecond: 3}", "states.a.trigger.pollSecond",
     "unknown trigger key 'pollSecond' is ignored", "did you mean 'pollSeconds'?"),
    ("transitions: [{goto: done, whne: loop_back}]", "states.a.transitions[0].whne",
     "unknown transition key 'whne' is ignored", "did you mean 'when'?"),
    ("outputs: [{uri: 's3://b/o', shema: x}]", "states.a.outputs[0].shema", "unknown output key 'shema' is ignored",
     "did you mean 'schema'?"),
])
def test_unknown_nested_keys_are_errors(load, spec_error, snippet, path, message, hint):
    base = "run: {shell: x}, " if not snippet.startswith("run") else ""
    body = f"states:\n  a: {{{base}{snippet}, next: done}}\n" + DONE
    [problem] = spec_error(body).problems
    assert (problem.path, problem.message) == (path, message.removesuffix(" is ignored"))
    assert problem.hint == (hint or "remove it (a legacy spec: --allow-unknown-keys accepts it with a warning)")
    loaded = load(body, allow_unknown_keys=True)
    assert [(w.path, w.message, w.hint) for w in loaded.warnings] == [(path, message, hint)]


def test_null_nested_values_mean_not_set(errors):
    assert errors("states:\n  a: {run: {shell: null}, trigger: {uri: null}, next: done}\n" + DONE) == [
        ("states.a.run", "empty run block"),
        ("states.a.trigger.uri", "trigger.uri is required"),
    ]


def test_null_values_mean_not_set(load):
    loaded = load("states:\n  a: {run: {shell: x}, next: done, description: null, params: null, loop: null}\n" + DONE)
    assert loaded.spec.states["a"].params == {} and loaded.spec.states["a"].loop is None


def test_artifact_without_uri_is_ignored_with_a_warning(load):
    loaded = load("states:\n  a: {run: {shell: x}, outputs: [{schema: s}, x, {uri: 's3://b/o'}], terminal: true}\n")
    assert [o.uri for o in loaded.spec.states["a"].outputs] == ["s3://b/o"]
    assert [(w.path, w.message) for w in loaded.warnings] == [
        ("states.a.outputs[0]", "outputs item without a uri is ignored"),
        ("states.a.outputs[1]", "outputs item without a uri is ignored"),
    ]


def test_run_ending_on_a_non_terminal_state_is_a_warning(load):
    loaded = load("""\
        states:
          a: {run: {shell: x}, transitions: [{when: promote_checkpoint, goto: done}]}
          done: {terminal: true}
        """)
    assert [(w.path, w.message) for w in loaded.warnings] == [
        ("states.a", "the run can end at 'a', which is not terminal")
    ]


def test_no_ending_warning_with_an_unconditional_way_on(load):
    assert load("states:\n  a: {run: {shell: x}, transitions: [{when: loop_back, goto: done}, {goto: done}]}\n"
                + DONE).warnings == []


def test_multi_node_mode_values(errors):
    assert errors("states:\n  a: {run: {shell: x}, multiNodeMode: ranked, terminal: true}\n") == [
        ("states.a.multiNodeMode", "multiNodeMode must be 'forbidden' or 'sharded', got 'ranked'")
    ]


def test_writes_decision_without_a_location_warns(load):
    loaded = load("states:\n  a: {run: {shell: x}, writesDecision: true, terminal: true}\n")
    assert [(w.path, w.message) for w in loaded.warnings] == [
        ("states.a.writesDecision", "no decision location: the decision cannot be read")
    ]
    assert load("config: {decision_uri: 's3://b/d.json'}\n"
                "states:\n  a: {run: {shell: x}, writesDecision: true, terminal: true}\n").warnings == []
