"""Top-level rules (docs/language.md, "The document"): apiVersion, kind, metadata, config/run/resources shape,
states, initial, the terminal requirement and the graph checks (needs, next/goto, sequence)."""

from __future__ import annotations

import pytest

OK_STATES = "states:\n  a: {run: {shell: echo}, terminal: true}\n"


@pytest.mark.parametrize("version", ["npa.workflow/v0.0.1", "npa.workflow/v0.0.1-beta"])
def test_supported_api_versions_load(load, version):
    loaded = load(f"apiVersion: {version}\nkind: Workflow\n" + OK_STATES, header=False)
    assert loaded.spec.api_version == version
    assert loaded.spec.name == "unnamed"


def test_missing_api_version(spec_error):
    err = spec_error("kind: Workflow\n" + OK_STATES, header=False)
    [problem] = err.problems
    assert (problem.path, problem.message) == ("apiVersion", "missing required field 'apiVersion'")
    assert problem.hint == "add 'apiVersion: npa.workflow/v0.0.1'"
    assert problem.format() == (
        "spec.yaml: apiVersion: missing required field 'apiVersion' (fix: add 'apiVersion: npa.workflow/v0.0.1')"
    )


@pytest.mark.parametrize("version", ["npa.workflow/v1", "npa.workflow/v0.0.2", "v0.0.1"])
def test_unsupported_api_version(errors, version):
    assert errors(f"apiVersion: {version}\nkind: Workflow\n" + OK_STATES, header=False) == [
        ("apiVersion", f"unsupported apiVersion '{version}'")
    ]


def test_kind_missing_and_wrong(errors):
    assert errors("apiVersion: npa.workflow/v0.0.1\n" + OK_STATES, header=False) == [
        ("kind", "missing required field 'kind'")
    ]
    assert errors("apiVersion: npa.workflow/v0.0.1\nkind: Pipeline\n" + OK_STATES, header=False) == [
        ("kind", "kind must be 'Workflow', got 'Pipeline'")
    ]


def test_root_must_be_a_mapping(spec_error):
    err = spec_error("- a\n- b\n", header=False)
    assert [(p.path, p.message) for p in err.problems] == [("$", "spec must be a mapping, got list")]


def test_empty_file_is_an_empty_mapping(errors):
    assert errors("", header=False) == [
        ("apiVersion", "missing required field 'apiVersion'"),
        ("kind", "missing required field 'kind'"),
        ("states", "missing required field 'states'"),
    ]


HEAD = "apiVersion: npa.workflow/v0.0.1\nkind: Workflow\n"


def test_metadata_fields(load, errors):
    loaded = load(HEAD + "metadata: {name: w, description: d, namespace: n, labels: {a: b}}\n" + OK_STATES,
                  header=False)
    assert loaded.spec.name == "w" and loaded.spec.metadata.labels == {"a": "b"}
    assert errors(HEAD + "metadata: {description: d}\n" + OK_STATES, header=False) == [
        ("metadata.name", "missing required field 'name'")
    ]
    assert errors(HEAD + "metadata: [w]\n" + OK_STATES, header=False) == [
        ("metadata", "metadata must be a mapping, got list")
    ]
    assert errors(HEAD + "metadata: {name: w, owner: me, lables: {}}\n" + OK_STATES, header=False) == [
        ("metadata", "unknown field(s): owner, lables")
    ]
    assert errors(HEAD + "metadata: {name: 5, namespace: [x], labels: x}\n" + OK_STATES, header=False) == [
        ("metadata.name", "must be a string, got 5"),
        ("metadata.namespace", "must be a string, got list"),
        ("metadata.labels", "must be a mapping, got 'x'"),
    ]


def test_metadata_unknown_field_hint(spec_error):
    [problem] = spec_error(HEAD + "metadata: {name: w, lables: {}}\n" + OK_STATES, header=False).problems
    assert problem.hint == "did you mean 'labels'?"


def test_execution_mode(load, errors):
    loaded = load(HEAD + "metadata: {name: w, executionMode: runtime}\n" + OK_STATES, header=False)
    assert loaded.spec.runtime_only
    assert errors(HEAD + "metadata: {name: w, executionMode: local}\n" + OK_STATES, header=False) == [
        ("metadata.executionMode", "executionMode must be 'runtime' or absent, got 'local'")
    ]


@pytest.mark.parametrize("key", ["config", "run", "resources"])
def test_top_level_mappings(errors, key):
    assert errors(f"{key}: [1]\n" + OK_STATES) == [(key, f"{key} must be a mapping, got list")]


def test_states_list_form_is_rejected(spec_error):
    [problem] = spec_error("states:\n  - name: a\n    terminal: true\n").problems
    assert (problem.path, problem.message) == ("states", "expected object, got list")
    assert problem.hint == "write states as a mapping: 'states: {name: {...}}'"


@pytest.mark.parametrize("value", ["{}", "x", "null"])
def test_states_must_be_a_non_empty_mapping(errors, value):
    assert errors(f"states: {value}\n") == [("states", "states must be a non-empty mapping of state name to state")]


def test_state_body_must_be_a_mapping(errors):
    assert errors("states:\n  a: echo\n  b:\n  done: {terminal: true}\n") == [
        ("states.a", "state 'a' must be a mapping, got string"),
        ("states.b", "state 'b' must be a mapping, got null"),
    ]


def test_initial_defaults_to_first_state_and_must_exist(load, spec_error):
    assert load("states:\n  b: {next: a}\n  a: {terminal: true}\n").spec.initial == "b"
    assert load("initial: a\nstates:\n  b: {next: a}\n  a: {terminal: true}\n").spec.initial == "a"
    [problem] = spec_error("initial: strat\nstates:\n  start: {terminal: true}\n").problems
    assert (problem.path, problem.message, problem.hint) == (
        "initial", "initial state 'strat' is not defined", "did you mean 'start'?"
    )


def test_initial_must_be_a_state_name(errors):
    assert errors("initial: [a]\nstates:\n  a: {terminal: true}\n") == [
        ("initial", "initial state ['a'] is not defined")
    ]


def test_at_least_one_terminal_state(spec_error):
    [problem] = spec_error("states:\n  a: {run: {shell: echo}}\n").problems
    assert (problem.path, problem.message) == ("states", "workflow must declare at least one terminal: true state")
    assert problem.hint == "mark the last state with 'terminal: true'"


def test_terminal_must_be_a_bool(errors):
    assert errors("states:\n  a: {run: {shell: echo}, terminal: 'yes'}\n") == [
        ("states.a.terminal", "must be true or false, got 'yes'")
    ]


def test_state_without_anything_to_do(spec_error):
    [problem] = spec_error("states:\n  a: {description: nothing}\n  done: {terminal: true}\n").problems
    assert (problem.path, problem.message) == (
        "states.a", "must set run, toolRef, sequence, parallel, transitions, next, or terminal"
    )


def test_needs_unknown_and_cycle(errors):
    assert errors("states:\n  a: {needs: [b, zz], terminal: true}\n  b: {needs: [a], terminal: true}\n") == [
        ("states.a.needs[1]", "unknown needs 'zz'"),
        ("states.a.needs", "cycle detected in needs among states: a -> b -> a"),
    ]


def test_needs_is_only_a_hint(load):
    load("states:\n  a: {needs: [b], next: b}\n  b: {terminal: true}\n")


def test_control_flow_cycle(spec_error):
    err = spec_error("states:\n  a: {run: {shell: x}, next: b}\n  b: {run: {shell: x}, next: a}\n"
                     "  done: {terminal: true}\n")
    [problem] = err.problems
    assert (problem.path, problem.message) == ("states.a", "unbounded control-flow cycle detected: a -> b -> a")


def test_cycle_is_named_from_the_first_declared_state(errors):
    body = ("states:\n  z: {next: b}\n  a: {transitions: [{when: loop_back, goto: b}], next: done}\n"
            "  b: {next: c}\n  c: {transitions: [{goto: a}]}\n  done: {terminal: true}\n")
    assert errors(body) == [("states.a", "unbounded control-flow cycle detected: a -> b -> c -> a")]


def test_self_next_is_a_cycle(errors):
    assert errors("states:\n  a: {run: {shell: x}, next: a}\n  done: {terminal: true}\n") == [
        ("states.a", "unbounded control-flow cycle detected: a -> a")
    ]


def test_goto_back_to_parent_sequence_is_allowed(load):
    load("""\
        states:
          harden: {sequence: [work, decide], loop: {max: 2}, next: done}
          work: {run: {shell: x}}
          decide: {run: {shell: x}, transitions: [{when: loop_back, goto: harden}]}
          done: {terminal: true}
        """)


def test_sequence_containing_itself(errors):
    assert errors("states:\n  s: {sequence: [t], next: done}\n  t: {sequence: [s]}\n  done: {terminal: true}\n") == [
        ("states.s.sequence", "a sequence contains itself: s -> t -> s")
    ]
    assert errors("states:\n  s: {sequence: [s], next: done}\n  done: {terminal: true}\n") == [
        ("states.s.sequence", "a sequence contains itself: s -> s")
    ]


def test_long_next_chain_does_not_hit_the_recursion_limit(load):
    chain = "".join(f"  s{i}: {{run: {{shell: x}}, next: s{i + 1}}}\n" for i in range(1500))
    loaded = load("states:\n" + chain + "  s1500: {terminal: true}\n")
    assert len(loaded.spec.states) == 1501


def test_long_cycle_is_found_without_recursion(errors):
    chain = "".join(f"  s{i}: {{next: s{(i + 1) % 1500}}}\n" for i in range(1500))
    [(path, message)] = errors("states:\n" + chain + "  done: {terminal: true}\n")
    assert path == "states.s0" and message.startswith("unbounded control-flow cycle detected: s0 -> s1 -> s2")
    assert message.endswith("s1499 -> s0")


def test_unknown_top_level_key_is_an_error_unless_allowed(load, spec_error):
    [error] = spec_error("stats: {}\n" + OK_STATES).problems
    assert (error.path, error.message, error.hint) == (
        "stats", "unknown top-level key 'stats'", "did you mean 'states'?")
    loaded = load("stats: {}\n" + OK_STATES, allow_unknown_keys=True)
    [warning] = loaded.warnings
    assert (warning.path, warning.message, warning.hint, warning.severity) == (
        "stats", "unknown top-level key 'stats' is ignored", "did you mean 'states'?", "warning"
    )
    assert [p.message for p in spec_error("stats: {}\n" + OK_STATES, strict=True,
                                          allow_unknown_keys=True).problems] == [
        "unknown top-level key 'stats' is ignored"
    ]
