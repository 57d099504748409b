"""Config resolution (docs/language.md, "The document", "Tokens", `--var`): dependency order, cycles, the run mapping,
tool defaults and `--var` overrides."""

from __future__ import annotations

import pytest

from npa_workflow.spec.config import resolve_config

STATES = "states:\n  a: {run: {shell: x}, terminal: true}\n"


def resolved(config: dict, run_id: str = "r1", workflow: str = "t", run_block: dict | None = None):
    ctx, problems = resolve_config(config, workflow, run_id, run_block or {})
    assert problems == []
    return ctx


@pytest.mark.parametrize("order", [["a", "b", "c", "d"], ["d", "c", "b", "a"], ["b", "d", "a", "c"]])
def test_chains_resolve_in_any_key_order(order):
    values = {"a": "{{config.b}}/a", "b": "{{config.c}}/b", "c": "{{config.d}}/c", "d": "root"}
    ctx = resolved({k: values[k] for k in order})
    assert ctx.config["a"] == "root/c/b/a"


def test_long_chain_resolves_without_recursion():
    config = {f"k{i}": f"{{{{config.k{i + 1}}}}}" for i in range(1500)} | {"k1500": "end"}
    assert resolved(config).config["k0"] == "end"


def test_reference_cycle_is_named(errors):
    body = "config: {a: '{{config.b}}', b: 'x{{config.c}}', c: '{{config.a}}', d: '{{config.a}}/d'}\n" + STATES
    assert errors(body) == [("config.a", "config values reference each other in a cycle: a -> b -> c -> a")]


def test_self_reference_and_two_cycles(spec_error):
    err = spec_error("config: {s: '{{config.s}}+', p: '{{config.q}}', q: '{{config.p}}'}\n" + STATES)
    assert [(p.path, p.message, p.hint) for p in err.problems] == [
        ("config.s", "config values reference each other in a cycle: s -> s", "make one of them a literal value"),
        ("config.p", "config values reference each other in a cycle: p -> q -> p", "make one of them a literal value"),
    ]


def test_state_and_loop_tokens_are_not_allowed_in_config(spec_error):
    err = spec_error("config: {a: '{{state.a.uri}}', b: 'i{{loop.a}}'}\n" + STATES)
    assert [(p.path, p.message, p.hint) for p in err.problems] == [
        ("config.a", "state.* tokens are not allowed in config (state.a.uri)",
         "move the value into the state's params or command"),
        ("config.b", "loop.* tokens are not allowed in config (loop.a)",
         "move the value into the state's params or command"),
    ]


def test_unknown_config_and_run_tokens_in_config(spec_error):
    err = spec_error("config: {a: '{{config.nope}}', b: '{{run.nope}}', c: '{{params.x}}'}\n" + STATES)
    assert [(p.path, p.message, p.hint) for p in err.problems] == [
        ("config.a", "unknown config token: config.nope", "add 'nope' to config"),
        ("config.b", "unknown run token: run.nope", "known run keys: bucket, id, prefix"),
        ("config.c", "params.* tokens are not allowed in config (params.x)",
         "move the value into the state's params or command"),
    ]


def test_dependents_of_a_broken_key_are_not_reported_again(errors):
    assert errors("config: {a: '{{config.nope}}', b: '{{config.a}}/b'}\n" + STATES) == [
        ("config.a", "unknown config token: config.nope")
    ]


def test_run_prefix_in_config_is_the_default_prefix():
    ctx = resolved({"x": "{{run.prefix}}/foo", "prefix": "pp/{{run.id}}"})
    assert ctx.config["x"] == "t/r1/foo"
    assert ctx.config["prefix"] == "pp/r1"
    assert ctx.run == {"id": "r1", "prefix": "pp/r1", "bucket": "npa-workflow-local"}


def test_run_prefix_defaults_to_workflow_and_run_id():
    assert resolved({}).run == {"id": "r1", "prefix": "t/r1", "bucket": "npa-workflow-local"}


def test_run_bucket_is_the_deployments_bucket_and_wins_over_the_run_block():
    """`{{run.bucket}}`: the stack's own bucket (examples must not name a globally named bucket they do not own)."""
    text = {"out": "s3://{{run.bucket}}/{{run.prefix}}/x.json"}
    assert resolved(text).config["out"] == "s3://npa-workflow-local/t/r1/x.json"  # no deployment known: local
    ctx, problems = resolve_config(text, "t", "r1", {"bucket": "mine"}, "stack-bucket-123")
    assert not problems and ctx.config["out"] == "s3://stack-bucket-123/t/r1/x.json"


def test_run_block_extends_the_run_mapping_but_not_its_id():
    ctx = resolved({"x": "{{run.team}}:{{run.id}}:{{run.prefix}}"},
                   run_block={"team": "vision", "id": "forced", "prefix": "custom"})
    assert ctx.config["x"] == "vision:r1:custom"
    assert ctx.run["id"] == "r1"


def test_non_string_values_render_as_json_scalars():
    ctx = resolved({"n": 3, "f": 0.5, "yes": True, "no": False, "none": None,
                    "s": "{{config.n}} {{config.f}} {{config.yes}} {{config.no}} [{{config.none}}]"})
    assert ctx.config["s"] == "3 0.5 true false []"
    assert ctx.config["n"] == 3  # values that need no resolving keep their type


def test_list_value_referenced_from_config(errors):
    assert errors("config: {l: [1, 2], s: 'x{{config.l}}'}\n" + STATES) == [
        ("config.s", "config.l is a list, which cannot be put into text")
    ]


def test_substitution_is_single_pass(load):
    ctx = resolved({"open": "{{", "t": "{{config.open}}config.x}}", "x": "boom"})
    assert ctx.config["t"] == "{{config.x}}"  # built by substitution, never re-scanned
    load("config: {open: '{{', t: '{{config.open}}config.nope}}'}\n"
         "states:\n  a: {run: {shell: 'echo {{config.t}}'}, terminal: true}\n")


def test_config_prefix_must_be_a_scalar(errors):
    assert errors("config: {prefix: [a]}\n" + STATES) == [
        ("config.prefix", "config.prefix is a list, which cannot be put into text")
    ]


def test_validation_uses_the_validate_run_id(load):
    loaded = load("config: {p: '{{run.id}}'}\nstates:\n  a: {run: {shell: 'echo {{config.p}}'}, terminal: true}\n")
    assert loaded.spec.config == {"p": "{{run.id}}"}  # the spec keeps raw config; resolution is per run


def test_tool_defaults_fill_only_missing_keys(load):
    assert load("states:\n  a: {toolRef: demo.train, terminal: true}\n").spec.config == {"epochs": "3"}
    loaded = load("config: {epochs: '9'}\nstates:\n  a: {toolRef: demo.train, terminal: true}\n")
    assert loaded.spec.config == {"epochs": "9"}


READS = "states:\n  a: {run: {shell: 'x {{config.n}} {{config.flag}} {{config.new}} {{config.k}}'}, terminal: true}\n"


def test_overrides_replace_config_as_strings(load):
    loaded = load("config: {n: 3, flag: true, new: o, k: o}\n" + READS,
                  overrides={"n": "7", "flag": "false", "new": "x"})
    assert loaded.spec.config == {"n": "7", "flag": "false", "new": "x", "k": "o"}
    assert loaded.raw["config"] == loaded.spec.config


def test_overrides_create_config_when_absent(load):
    body = "states:\n  a: {run: {shell: 'x {{config.k}}'}, terminal: true}\n"
    assert load("config: {}\n" + body, overrides={"k": "v"}).spec.config == {"k": "v"}


def test_an_override_nothing_reads_is_an_error_with_a_suggestion(spec_error, load):
    body = ("config: {thresh: '0.8', rounds: 2}\nstates:\n  l: {sequence: [a], loop: {max: config.rounds}, next: b}\n"
            "  a: {run: {shell: 'gate --threshold {{config.thresh}}'}}\n"
            "  b: {toolRef: demo.train, terminal: true}\n")
    [problem] = spec_error(body, overrides={"tresh": "0.5"}).problems
    assert (problem.path, problem.hint) == ("--var tresh", "did you mean '--var thresh'?")
    assert "no token of the spec or its tools reads config.tresh" in problem.message
    # Read by a command, by a bare `config.KEY` integer field, by a tool's argv, or by the engine itself.
    load(body, overrides={"thresh": "0.5", "rounds": "3", "epochs": "4", "bucket": "bkt"})


def test_an_override_of_a_config_key_nothing_reads_never_suggests_itself(spec_error):
    """`config: {tresh: …}` that no token reads: `--var tresh` must not answer "did you mean '--var tresh'?"."""
    body = "config: {tresh: '0.8'}\nstates:\n  a: {run: {shell: 'gate {{config.threshold}}'}, terminal: true}\n"
    problems = spec_error(body, overrides={"tresh": "0.5"}).problems
    [var] = [p for p in problems if p.path == "--var tresh"]
    assert "'--var tresh'" not in var.hint
    assert var.hint == "did you mean '--var threshold'?"


def test_overrides_are_revalidated(errors):
    body = "config: {root: s3://b, out: '{{config.root}}/o'}\n" + STATES
    assert errors(body, overrides={"root": "{{config.out}}"}) == [
        ("config.root", "config values reference each other in a cycle: root -> out -> root")
    ]


def test_overrides_can_break_group_counts(errors, load):
    body = ("config: {n: 2}\nstates:\n  g: {parallel: [a, b], parallelCount: config.n, next: done}\n"
            "  a: {run: {shell: x}}\n  b: {run: {shell: x}}\n  done: {terminal: true}\n")
    load(body, overrides={"n": "2"})
    assert errors(body, overrides={"n": "3"}) == [
        ("states.g.parallelCount", "parallelCount resolves to 3, but the group declares 2 members")
    ]
