"""Token grammar and substitution (docs/language.md, "Tokens": JSON-scalar rendering)."""

from __future__ import annotations

import base64

import pytest

from npa_workflow.spec.tokens import (
    TokenContext,
    TokenError,
    find_suspicious,
    references,
    render_scalar,
    resolve_deep,
    resolve_text,
)


def ctx(**config) -> TokenContext:
    return TokenContext(config=config, run={"id": "r1", "prefix": "t/r1"},
                        state_outputs={"a": ["s3://b/a1", "s3://b/a2"]}, loops={"outer-loop": 2})


@pytest.mark.parametrize(("text", "expected"), [
    ("{{config.x}}", "v"),
    ("{{ config.x }}", "v"),
    ("{{   config.x}}", "v"),
    ("{{config.x   }}", "v"),
    ("pre-{{config.x}}-post", "pre-v-post"),
    ("{{config.a.b}}", "dotted"),
    ("{{config.k-1_x}}", "odd"),
    ("{{run.id}}/{{run.prefix}}", "r1/t/r1"),
    ("{{loop.outer-loop}}", "2"),
    ("{{state.a.uri}} {{state.a.output_1}} {{state.a.output_2}}", "s3://b/a1 s3://b/a1 s3://b/a2"),
])
def test_grammar(text, expected):
    assert resolve_text(text, ctx(x="v", **{"a.b": "dotted", "k-1_x": "odd"})) == expected


def test_dotted_key_is_literal_never_nested():
    with pytest.raises(TokenError, match=r"unknown config token: config\.a\.b"):
        resolve_text("{{config.a.b}}", ctx(a={"b": "nested"}))


@pytest.mark.parametrize("text", ["{{iteration}}", "{{env.HOME}}", "{{config.x | base64}}",
                                  "{{Config.x}}", "{{.State}}", "{{config. x}}", "{x}", "{{config.x}"])
def test_non_tokens_are_left_verbatim_by_substitution(text):
    assert resolve_text(text, ctx(x="v")) == text


def test_substitution_is_single_pass():
    assert resolve_text("{{config.a}}", ctx(a="{{config.b}}", b="deep")) == "{{config.b}}"


def test_base64_transform():
    assert resolve_text("{{config.x|base64}}", ctx(x="hello")) == "aGVsbG8="
    assert resolve_text("{{ config.x|base64 }}", ctx(x="café")) == base64.b64encode("café".encode()).decode()
    assert resolve_text("{{config.n|base64}}", ctx(n=True)) == base64.b64encode(b"true").decode()


def test_unsupported_transform():
    with pytest.raises(TokenError) as info:
        resolve_text("{{config.x|upper}}", ctx(x="v"))
    assert (info.value.message, info.value.hint) == (
        "unsupported token transform 'upper'", "the transforms are |base64 and |raw"
    )


@pytest.mark.parametrize(("value", "text"), [
    (True, "true"), (False, "false"), (None, ""), (3, "3"), (0.5, "0.5"), (-2, "-2"), ("s", "s"), ("", ""),
])
def test_json_scalar_rendering(value, text):
    assert render_scalar(value, "config.v") == text
    assert resolve_text("[{{config.v}}]", ctx(v=value)) == f"[{text}]"


@pytest.mark.parametrize(("value", "kind"), [([1, 2], "list"), ({"k": 1}, "mapping")])
def test_lists_and_maps_cannot_be_rendered(value, kind):
    with pytest.raises(TokenError) as info:
        resolve_text("echo {{config.v}}", ctx(v=value))
    assert info.value.message == f"config.v is a {kind}, which cannot be put into text"


@pytest.mark.parametrize(("text", "message"), [
    ("{{config.nope}}", "unknown config token: config.nope"),
    ("{{run.nope}}", "unknown run token: run.nope"),
    ("{{loop.nope}}", "unknown loop token: loop.nope"),
    ("{{state.zz.uri}}", "unknown state token: state.zz.uri"),
    ("{{state.a.output_3}}", "unknown state token: state.a.output_3"),
    ("{{state.a.output_0}}", "unknown state token: state.a.output_0"),
    ("{{state.a.path}}", "unknown state token: state.a.path"),
])
def test_unknown_tokens(text, message):
    with pytest.raises(TokenError, match="^" + message.replace(".", r"\.") + "$"):
        resolve_text(text, ctx())


def test_unknown_state_tokens_can_be_tolerated():
    tolerant = TokenContext(config={}, run={}, tolerate_unknown_state=True)
    text = "{{state.zz.uri}} {{ state.zz.output_2 }}"
    assert resolve_text(text, tolerant) == text


def test_resolve_deep_walks_lists_and_maps():
    value = {"image": "repo:{{config.tag}}", "list": ["{{run.id}}", 3], "n": None}
    assert resolve_deep(value, ctx(tag="t1")) == {"image": "repo:t1", "list": ["r1", 3], "n": None}


def test_references():
    assert references("{{config.a}} {{ run.id }} {{params.x}} {{state.s.uri|base64}}") == [
        ("config", "a"), ("run", "id"), ("params", "x"), ("state", "s.uri"),
    ]


@pytest.mark.parametrize(("text", "found"), [
    ("{{iteration}}", [("{{iteration}}", "use {{loop.STATE}} with the name of the looped state")]),
    ("{{ loop }}", [("{{ loop }}", "use {{loop.STATE}} with the name of the looped state")]),
    ("{{config.x | base64}}", [("{{config.x | base64}}",
                                "write the transform without spaces around '|', e.g. {{config.x|base64}}")]),
    ("{{run}}", [("{{run}}", "write {{run.KEY}}")]),
    ("{{foo.bar}}", [("{{foo.bar}}", "scopes are config, run, state, loop and params")]),
    ("{{config.x}} {{.Go}} {{ }} {{a b}}", []),
])
def test_find_suspicious(text, found):
    assert find_suspicious(text) == found


def test_a_params_token_reads_the_sibling_params_never_config():
    both = TokenContext(config={"x": "from-config"}, run={}, params={"x": "from-param"})
    assert resolve_text("{{config.x}} {{params.x}}", both) == "from-config from-param"
    with pytest.raises(TokenError, match=r"params\.\* tokens are read only inside a state's params \(params\.x\)"):
        resolve_text("{{params.x}}", ctx(x="v"))  # a command's context has no params scope: config has them
