"""Property: whatever the input, loading a spec returns a LoadedSpec or raises SpecError — never
any other exception — and does so quickly. Inputs are random YAML documents, random text, and
random mutations of a valid spec (dropped/renamed keys, changed types, tokens, state names)."""

from __future__ import annotations

import copy
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npa_workflow.errors import SpecError
from npa_workflow.spec.catalog import load_catalog_text
from npa_workflow.spec.load import load_spec_text
from npa_workflow.spec.validate import LoadedSpec

SETTINGS = settings(max_examples=120, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
CAT = load_catalog_text("""\
apiVersion: npa.workflow.tools/v1
tools:
  demo.caption: {argv: [caption, "{{config.images_uri}}", "{{config.captions_uri}}"]}
  demo.train: {argv: [train, "{{config.epochs}}"], configDefaults: {epochs: "3"}, multiNodeMode: sharded}
""", "tools.yaml")

VALID: dict[str, Any] = {
    "apiVersion": "npa.workflow/v0.0.1",
    "kind": "Workflow",
    "metadata": {"name": "p", "labels": {"team": "x"}},
    "config": {"bucket": "bkt", "prefix": "p/{{run.id}}", "root": "s3://{{config.bucket}}/{{config.prefix}}",
               "rounds": 2, "flag": "yes", "images_uri": "s3://b/i", "captions_uri": "s3://b/c"},
    "resources": {"default": {"cpus": 1}, "gpu": {"accelerators": "H100:1", "num_nodes": 1, "image": "i:{{run.id}}"}},
    "initial": "prep",
    "states": {
        "prep": {"toolRef": "demo.caption", "outputs": [{"uri": "{{config.root}}/d", "schema": "dataset"}],
                 "trigger": {"uri": "{{config.root}}/in/", "pollSeconds": 5}, "next": "rounds"},
        "rounds": {"sequence": ["fan", "gate"], "loop": {"max": "{{config.rounds}}", "until": "promote_checkpoint"},
                   "next": "route"},
        "fan": {"parallel": ["w1", "w2"], "parallelCount": 2, "maxConcurrency": 1},
        "w1": {"run": {"shell": "echo {{state.prep.uri}} {{loop.rounds}}"}, "resources": "gpu"},
        "w2": {"run": {"argv": ["echo", "{{config.p}}"]}, "params": {"p": "i-{{loop.rounds}}"}},
        "gate": {"toolRef": "demo.train", "writesDecision": True,
                 "outputs": [{"uri": "{{config.root}}/dec.json", "schema": "decision"}]},
        "route": {"transitions": [{"when": "promote_checkpoint", "goto": "done", "if": "config.flag"},
                                  {"goto": "done"}], "needs": ["prep"]},
        "done": {"terminal": True},
    },
}

TOKENS = ["{{config.bucket}}", "{{ config.root }}", "{{config.nope}}", "{{config.bucket|base64}}",
          "{{config.bucket|upper}}", "{{config.bucket | base64}}", "{{run.id}}", "{{run.prefix}}", "{{run.x}}",
          "{{state.prep.uri}}", "{{state.prep.output_9}}", "{{state.ghost.uri}}", "{{loop.rounds}}",
          "{{loop.nope}}", "{{params.p}}", "{{iteration}}", "{{", "}}", "config.rounds", "config.nope", "²",
          "H100", "H100:0", "-1", "0", "65", "33", "true", "yes", "off", "promote_checkpoint", "loop_back"]
NAMES = list(VALID["states"]) + ["ghost", "", "Prep"]

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20), st.sampled_from(TOKENS), st.sampled_from(NAMES),
)
values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.one_of(st.text(max_size=10), st.sampled_from(list(VALID) + NAMES)), children, max_size=4),
    ),
    max_leaves=20,
)


def check(text: str, **kwargs: Any) -> None:
    try:
        loaded = load_spec_text(text, file="p.yaml", catalog=CAT, **kwargs)
    except SpecError as exc:
        assert exc.problems and all(p.message and p.severity == "error" for p in exc.problems)
        assert all(p.format().startswith("p.yaml: ") for p in exc.problems)
        return
    assert isinstance(loaded, LoadedSpec)
    spec = loaded.spec
    names = set(spec.states)
    assert spec.initial in names and any(s.terminal for s in spec.states.values())
    for state in spec.states.values():
        refs = state.sequence + state.parallel + state.needs + [t.goto for t in state.transitions]
        assert set(refs) <= names and (not state.next or state.next in names)


def dump(document: Any) -> str:
    return yaml.safe_dump(document, sort_keys=False, allow_unicode=True)


@SETTINGS
@given(values)
def test_random_documents(document):
    check(dump(document))


@SETTINGS
@given(st.dictionaries(st.sampled_from(list(VALID)), values, max_size=8))
def test_random_documents_with_spec_keys(document):
    check(dump(document))


@SETTINGS
@given(st.text(max_size=300))
def test_random_text(text):
    check(text)


@SETTINGS
@given(st.integers(0, 2000), st.integers(0, 20), st.text(max_size=10))
def test_spliced_valid_text(at, cut, insert):
    text = dump(VALID)
    at %= len(text)
    check(text[:at] + insert + text[at + cut:])


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            out += _paths(value, prefix + (key,))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += _paths(value, prefix + (i,))
    return out


def _mutate(document: dict, data: st.DataObject) -> None:
    path = data.draw(st.sampled_from(_paths(document)[1:]))
    parent = document
    for part in path[:-1]:
        parent = parent[part]
    last = path[-1]
    action = data.draw(st.sampled_from(["drop", "rename", "replace", "token", "state"]))
    if action == "drop":
        del parent[last]
    elif action == "rename" and isinstance(parent, dict):
        new_key = data.draw(st.one_of(st.text(max_size=12), st.sampled_from(NAMES + list(VALID) + ["trasitions"])))
        parent[new_key] = parent.pop(last)
    elif action == "replace":
        parent[last] = data.draw(values)
    elif action == "token":
        old = parent[last]
        token = data.draw(st.sampled_from(TOKENS))
        parent[last] = f"{old}{token}" if isinstance(old, str) else token
    else:
        parent[last] = data.draw(st.sampled_from(NAMES))


@settings(max_examples=250, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.integers(1, 5), st.booleans(),
       st.dictionaries(st.sampled_from(["rounds", "bucket", "flag", "new"]), st.sampled_from(TOKENS), max_size=2))
def test_mutated_valid_spec(data, count, strict, overrides):
    document = copy.deepcopy(VALID)
    for _ in range(count):
        _mutate(document, data)
    check(dump(document), strict=strict, overrides=overrides)


def test_the_unmutated_spec_is_valid():
    loaded = load_spec_text(dump(VALID), catalog=CAT)
    assert loaded.warnings == []
