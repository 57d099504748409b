"""Resource profiles (docs/language.md): shape, lookup by state, accelerators, num_nodes, tokens."""

from __future__ import annotations

import pytest

DONE = "  done: {terminal: true}\n"


def with_profile(profile: str, state: str = "{run: {shell: x}, resources: p, terminal: true}", config: str = "{}"):
    return f"config: {config}\nresources:\n  p: {profile}\nstates:\n  a: {state}\n"


def test_profile_must_be_a_mapping(spec_error):
    [problem] = spec_error("resources: {gpu: H100}\nstates:\n  a: {run: {shell: x}, terminal: true}\n").problems
    assert (problem.path, problem.message) == ("resources.gpu", "resource profile 'gpu' must be a mapping, got string")


def test_unknown_profile_on_an_executable_state(spec_error):
    body = "resources: {gpu: {cpus: 4}}\nstates:\n  a: {run: {shell: x}, resources: gpuu, terminal: true}\n"
    [problem] = spec_error(body).problems
    assert (problem.path, problem.message, problem.hint) == (
        "states.a.resources", "unknown resource profile 'gpuu'", "did you mean 'gpu'?"
    )


def test_unknown_profile_on_a_tool_state(errors):
    assert errors("states:\n  a: {toolRef: demo.shard, resources: big, terminal: true}\n") == [
        ("states.a.resources", "unknown resource profile 'big'")
    ]


def test_implicit_default_may_be_undefined(load):
    load("states:\n  a: {run: {shell: x}, next: b}\n  b: {run: {shell: x}, resources: default, terminal: true}\n")


def test_non_executable_states_may_name_any_profile(load):
    load("states:\n  s: {sequence: [a], resources: whatever, next: g}\n  a: {run: {shell: x}}\n"
         "  g: {parallel: [b], resources: nope, next: done}\n  b: {run: {shell: x}}\n" + DONE)


@pytest.mark.parametrize("acc", ["H100:1", "'B200:4'", "H100", "'RTXPRO-6000-BLACKWELL-SERVER-EDITION:2'",
                                 "'{{config.gpu}}:1'", "'{{config.gpu}}:{{config.n}}'", "{H100: 2}"])
def test_accelerators_accepted(load, acc):
    load(with_profile(f"{{accelerators: {acc}}}", config="{gpu: L40S, n: '2'}"))


@pytest.mark.parametrize(("acc", "path", "message"), [
    ("'H100:0'", "", "accelerator count must be a positive integer, got 'H100:0'"),
    ("'H100:x'", "", "accelerator count must be a positive integer, got 'H100:x'"),
    ("'{{config.gpu}}'", "", "accelerators must use '<type>:<positive-count>', got 'H100'"),
    ("'{{config.gpu}}:{{config.zero}}'", "", "accelerator count must be a positive integer, got 'H100:0'"),
    ("4", "", "accelerators must be 'TYPE:COUNT' or a mapping, got int"),
    ("{H100: 0}", ".H100", "accelerator count must be an integer >= 1, got 0"),
    ("{H100: true}", ".H100", "accelerator count must be an integer >= 1, got True"),
    ("{H100: '1'}", ".H100", "accelerator count must be an integer >= 1, got '1'"),
])
def test_accelerator_errors(errors, acc, path, message):
    body = with_profile(f"{{accelerators: {acc}}}", config="{gpu: H100, zero: 0}")
    assert errors(body) == [(f"resources.p.accelerators{path}", message)]


def test_accelerator_without_count_from_a_token_hint(spec_error):
    body = with_profile("{accelerators: '{{config.gpu}}'}", config="{gpu: H100}")
    assert spec_error(body).problems[0].hint == "add the count, e.g. '{{config.gpu}}:1'"


@pytest.mark.parametrize(("nodes", "message"), [
    ("true", "num_nodes must be an integer, not a bool"),
    ("33", "num_nodes must be <= 32, got 33"),
    ("0", "num_nodes must be >= 1, got 0"),
    ("2.5", "num_nodes must be an integer, got 2.5"),
    ("'{{config.many}}'", "num_nodes must be <= 32, got 64"),
    ("'{{config.nope}}'", "unknown config token: config.nope"),
])
def test_num_nodes_errors(errors, nodes, message):
    state = "{run: {shell: x}, resources: p, multiNodeMode: sharded, terminal: true}"
    assert errors(with_profile(f"{{num_nodes: {nodes}}}", state, config="{many: 64}")) == [
        ("resources.p.num_nodes", message)
    ]


def test_num_nodes_checked_on_unused_profiles(errors):
    assert errors("resources: {unused: {num_nodes: 40}}\nstates:\n  a: {run: {shell: x}, terminal: true}\n") == [
        ("resources.unused.num_nodes", "num_nodes must be <= 32, got 40")
    ]


def test_num_nodes_from_config(load):
    load(with_profile("{num_nodes: '{{config.n}}'}", "{run: {shell: x}, resources: p, multiNodeMode: sharded, "
                      "terminal: true}", config="{n: '4'}"))


def test_multi_node_needs_a_sharded_command(spec_error, load):
    err = spec_error(with_profile("{num_nodes: 2}"))
    [problem] = err.problems
    assert (problem.path, problem.message, problem.hint) == (
        "states.a.resources", "profile 'p' asks for 2 nodes but the command is not rank-aware",
        "set multiNodeMode: sharded on the state (or the tool) if every node runs its shard",
    )
    load(with_profile("{num_nodes: 2}", "{run: {shell: x}, resources: p, multiNodeMode: sharded, terminal: true}"))
    load(with_profile("{num_nodes: 2}", "{toolRef: demo.shard, resources: p, terminal: true}"))


def test_tool_mode_wins_over_the_state_field(errors):
    body = with_profile("{num_nodes: 2}", "{toolRef: demo.train, resources: p, multiNodeMode: sharded, terminal: true}")
    assert errors(body) == [("states.a.resources", "profile 'p' asks for 2 nodes but the command is not rank-aware")]


def test_default_profile_applies_to_states_without_resources(errors):
    body = "resources: {default: {num_nodes: 3}}\nstates:\n  a: {run: {shell: x}, terminal: true}\n"
    assert errors(body) == [
        ("states.a.resources", "profile 'default' asks for 3 nodes but the command is not rank-aware")
    ]


def test_a_defined_empty_profile_does_not_fall_back_to_default(load):
    load("resources: {default: {num_nodes: 3}, small: {}}\n"
         "states:\n  a: {run: {shell: x}, resources: small, terminal: true}\n  b: {run: {shell: x}, "
         "multiNodeMode: sharded, terminal: true}\n")


@pytest.mark.parametrize(("value", "message"), [
    ("'{{loop.a}}'", "loop.* tokens are not allowed in resource profiles (loop.a)"),
    ("'{{state.a.uri}}'", "state.* tokens are not allowed in resource profiles (state.a.uri)"),
    ("'{{config.nope}}'", "unknown config token: config.nope"),
    ("'{{params.image}}'", "params.* tokens are not allowed in resource profiles (params.image)"),
])
def test_profile_tokens(errors, value, message):
    body = with_profile(f"{{kubernetes: {{pod_config: {{spec: {{containers: [{{image: {value}}}]}}}}}}}}",
                        "{run: {shell: x}, loop: {max: 2}, outputs: [{uri: 's3://b/o'}], terminal: true}")
    assert errors(body) == [("resources.p.kubernetes.pod_config.spec.containers[0].image", message)]


def test_profiles_resolve_config_and_run_tokens(load):
    load(with_profile("{image: 'repo/{{config.tag}}:{{run.id}}', cloud: kubernetes, memory: 16Gi}", config="{tag: t}"))


def test_a_tool_image_resolves_from_the_catalog_or_is_rejected():
    from npa_workflow.errors import SpecError
    from npa_workflow.plan.planner import build_plan
    from npa_workflow.spec.catalog import load_catalog_text
    from npa_workflow.spec.load import load_spec_text

    catalog = load_catalog_text("apiVersion: npa.workflow.tools/v1\nimages: {ltx2: reg.example/ltx2:1.4}\n"
                                "tools:\n  wan.gen: {argv: [gen], image: reg.example/wan:2}\n", "tools.yaml")
    head = "apiVersion: npa.workflow/v0.0.1\nkind: Workflow\nmetadata: {name: t}\n"
    body = "resources: {default: {image: 'tool://%s'}}\nstates:\n  a: {run: {shell: x}, terminal: true}\n"
    for ref, image in (("ltx2", "reg.example/ltx2:1.4"), ("wan.gen", "reg.example/wan:2")):
        step = build_plan(load_spec_text(head + body % ref, catalog=catalog)).steps[0]
        assert step.image == image
    with pytest.raises(SpecError) as info:
        load_spec_text(head + body % "ltx", catalog=catalog)
    [problem] = info.value.problems
    assert (problem.path, problem.message, problem.hint) == (
        "resources.default.image", "image tool://ltx names no image in the tool catalog", "did you mean 'tool://ltx2'?")
