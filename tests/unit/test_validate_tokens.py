"""Token checks at validation (docs/language.md, "Tokens", and where we are stricter): unknown scopes,
transforms, unknown config/run/loop/state tokens, and non-scalar values in commands."""

from __future__ import annotations

import pytest


def shell(command: str, config: str = "{x: v}") -> str:
    return f"config: {config}\nstates:\n  a: {{run: {{shell: '{command}'}}, terminal: true}}\n"


@pytest.mark.parametrize(("command", "token", "hint"), [
    ("echo {{iteration}}", "{{iteration}}", "use {{loop.STATE}} with the name of the looped state"),
    ("echo {{config.x | base64}}", "{{config.x | base64}}",
     "write the transform without spaces around '|', e.g. {{config.x|base64}}"),
    ("echo {{env.HOME}}", "{{env.HOME}}", "scopes are config, run, state, loop and params"),
    ("echo {{Config.x}}", "{{Config.x}}", "scopes are config, run, state, loop and params"),
    ("echo {{config}}", "{{config}}", "write {{config.KEY}}"),
])
def test_unknown_scope_is_an_error_with_a_hint(spec_error, command, token, hint):
    [problem] = spec_error(shell(command)).problems
    assert (problem.path, problem.message, problem.hint) == ("states.a.run.shell", f"unrecognised token {token}", hint)


def test_text_that_is_not_token_shaped_is_left_alone(load):
    load(shell("docker inspect -f {{.State.Running}} c; echo {{ }}; echo {{a b}}"))


def test_unsupported_transform(spec_error):
    [problem] = spec_error(shell("echo {{config.x|upper}}")).problems
    assert (problem.path, problem.message, problem.hint) == (
        "states.a.run.shell", "unsupported token transform 'upper'", "the transforms are |base64 and |raw"
    )


def test_valid_tokens_pass(load):
    load(shell("echo {{ config.x }} {{config.x|base64}} {{run.id}} {{run.prefix}} {{config.a.b}}",
               config="{x: v, a.b: w}"))


@pytest.mark.parametrize(("command", "message", "hint"), [
    ("echo {{config.nope}}", "unknown config token: config.nope", "add 'nope' to config or params"),
    ("echo {{run.nope}}", "unknown run token: run.nope", "known run keys: bucket, id, prefix"),
    ("echo {{loop.nope}}", "unknown loop token: loop.nope",
     "name a state that has a loop, and use the token inside or after that loop"),
])
def test_unknown_tokens(spec_error, command, message, hint):
    [problem] = spec_error(shell(command)).problems
    assert (problem.path, problem.message, problem.hint) == ("states.a.run.shell", message, hint)


def test_every_failing_token_of_a_text_is_reported(errors):
    assert errors(shell("{{config.p}} {{params.q}} {{run.r}}")) == [
        ("states.a.run.shell", "unknown config token: config.p"),
        ("states.a.run.shell", "params.* tokens are read only inside a state's params (params.q)"),
        ("states.a.run.shell", "unknown run token: run.r"),
    ]


def test_run_block_keys_are_run_tokens(load):
    load("run: {team: vision}\n" + shell("echo {{run.team}}"))


def test_argv_and_artifact_paths(errors):
    body = ("states:\n  a: {run: {argv: [echo, '{{config.nope}}']}, inputs: [{uri: '{{config.in}}'}],"
            " outputs: [{uri: 's3://b/{{run.nope}}'}], terminal: true}\n")
    assert errors(body) == [
        ("states.a.run.argv[1]", "unknown config token: config.nope"),
        ("states.a.inputs[0].uri", "unknown config token: config.in"),
        ("states.a.outputs[0].uri", "unknown run token: run.nope"),
    ]


def test_shell_is_ignored_when_argv_is_set(load):
    load("states:\n  a: {run: {argv: [echo], shell: '{{config.nope}}'}, terminal: true}\n")


def test_description_is_never_resolved(load):
    load("states:\n  a: {run: {shell: x}, description: 'uses {{params.x}}', terminal: true}\n")


def test_state_tokens(load, spec_error):
    producer = "  a: {run: {shell: x}, outputs: [{uri: 's3://b/a1'}, {uri: 's3://b/a2'}], next: b}\n"
    load("states:\n" + producer + "  b: {run: {shell: 'cat {{state.a.uri}} {{state.a.output_2}}'}, terminal: true}\n")
    # a state that runs later is tolerated at validation (its outputs exist by plan time or not at all)
    load("states:\n  b: {run: {shell: 'cat {{state.a.uri}}'}, next: a}\n"
         "  a: {run: {shell: x}, outputs: [{uri: 's3://b/a'}], terminal: true}\n")

    def problem(command: str) -> tuple[str, str, str]:
        [p] = spec_error("states:\n" + producer + f"  b: {{run: {{shell: '{command}'}}, terminal: true}}\n").problems
        return p.path, p.message, p.hint

    assert problem("cat {{state.nope.uri}}") == (
        "states.b.run.shell", "unknown state token: state.nope.uri (no state named 'nope')", "name one of: a, b"
    )
    assert problem("cat {{state.a.output_3}}") == (
        "states.b.run.shell", "unknown state token: state.a.output_3", "state 'a' declares 2 output(s)"
    )
    assert problem("cat {{state.a.path}}") == (
        "states.b.run.shell", "unknown state token: state.a.path", "use state.NAME.uri or state.NAME.output_N"
    )
    assert problem("cat {{state.a.output_0}}")[1] == "unknown state token: state.a.output_0"


def test_state_token_to_a_state_without_outputs(errors):
    body = "states:\n  a: {run: {shell: x}, next: b}\n  b: {run: {shell: 'cat {{state.a.uri}}'}, terminal: true}\n"
    assert errors(body) == [("states.b.run.shell", "unknown state token: state.a.uri")]


@pytest.mark.parametrize(("value", "kind"), [("[1, 2]", "list"), ("{k: v}", "mapping")])
def test_list_or_map_in_a_command_is_an_error(spec_error, value, kind):
    [problem] = spec_error(shell("echo {{config.v}}", config=f"{{v: {value}}}")).problems
    assert (problem.path, problem.message, problem.hint) == (
        "states.a.run.shell", f"config.v is a {kind}, which cannot be put into text",
        "use a string, number or bool value",
    )


def test_param_list_is_rejected_before_it_reaches_a_command(errors):
    body = "states:\n  a: {run: {shell: 'echo {{config.p}}'}, params: {p: [1]}, terminal: true}\n"
    assert errors(body) == [
        ("states.a.params.p", "params.p must be a string, number or bool, got list"),
    ]


def test_tool_argv_with_a_bad_param(errors):
    body = ("states:\n  a: {toolRef: demo.caption, params: {images_uri: '{{params.x}}', captions_uri: c},"
            " terminal: true}\n")
    assert errors(body) == [("states.a.params.images_uri", "unknown params token: params.x")]


def test_unknown_tokens_suggest_the_closest_name(spec_error):
    err = spec_error("config: {bucket: bkt}\nstates:\n  rounds: {sequence: [a], loop: {max: 2}, next: done}\n"
                     "  a: {run: {shell: 'x s3://{{config.buckt}}/{{loop.round}}/{{run.idd}}'}}\n"
                     "  done: {terminal: true}\n")
    assert [(p.message, p.hint) for p in err.problems] == [
        ("unknown config token: config.buckt", "did you mean 'config.bucket'?"),
        ("unknown loop token: loop.round", "did you mean 'loop.rounds'?"),
        ("unknown run token: run.idd", "did you mean 'run.id'?"),
    ]
