"""The compiled state machine of every spec in specs/."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from infra_support import REPO_ROOT, Synth

from infra.stack import compile_options
from infra.state_machines import SUBSTITUTIONS, machine_name, spec_files
from npa_workflow.compile.asl import CompileOptions, compile_spec
from npa_workflow.spec.load import load_spec

SPECS = REPO_ROOT / "specs"


def _machines(synth: Synth) -> dict[str, dict]:
    """spec name → state machine properties."""
    return {
        name: synth.template["Resources"][synth.logical_id(machine)]["Properties"]
        for name, machine in synth.stack.workflows.machines.items()
    }


def test_every_spec_in_specs_has_a_machine_and_the_catalog_does_not(default_synth: Synth) -> None:
    files = spec_files(SPECS)
    assert SPECS / "tools.yaml" not in files
    names = {load_spec(path).spec.name for path in files}
    assert names and set(default_synth.stack.workflows.machines) == names
    assert len(default_synth.resources("AWS::StepFunctions::StateMachine")) == len(names)


def test_definitions_come_from_the_clis_compiler_with_function_arns_substituted(default_synth: Synth) -> None:
    machines = _machines(default_synth)
    functions = default_synth.stack.engine.functions
    for path in spec_files(SPECS):
        loaded = load_spec(path)
        expected = compile_spec(loaded, compile_options(default_synth.stack.settings)).definition
        props = machines[loaded.spec.name]
        text = default_synth.definition_text(default_synth.stack.workflows.machines[loaded.spec.name])
        assert json.loads(text) == expected
        assert "DefinitionString" not in props  # an S3 asset: the template stays under 1 MB whatever the specs
        assert text == json.dumps(expected, separators=(",", ":"), ensure_ascii=False)  # compact
        assert json.dumps(expected).count("${LaunchFunctionArn}") >= 1
        assert props["DefinitionSubstitutions"] == {
            placeholder: {"Fn::GetAtt": [default_synth.logical_id(functions[fn]), "Arn"]}
            for placeholder, fn in SUBSTITUTIONS.items()
        }


def test_machines_are_standard_logged_traced_and_named_after_stack_and_spec(default_synth: Synth) -> None:
    for spec_name, props in _machines(default_synth).items():
        assert props["StateMachineType"] == "STANDARD"
        assert props["TracingConfiguration"] == {"Enabled": True}
        assert props["LoggingConfiguration"]["Level"] == "ALL"
        assert props["LoggingConfiguration"]["IncludeExecutionData"] is True
        destination = props["LoggingConfiguration"]["Destinations"][0]["CloudWatchLogsLogGroup"]["LogGroupArn"]
        log_group = default_synth.template["Resources"][destination["Fn::GetAtt"][0]]
        assert log_group["Type"] == "AWS::Logs::LogGroup"
        assert log_group["Properties"]["LogGroupName"] == f"/aws/vendedlogs/states/NpaWorkflow_{spec_name}"
        assert props["StateMachineName"] == machine_name("NpaWorkflow", spec_name) == f"NpaWorkflow_{spec_name}"


def test_machine_roles_invoke_exactly_the_four_engine_functions(default_synth: Synth) -> None:
    functions = default_synth.stack.engine.functions
    invoked = sorted(
        json.dumps({"Fn::GetAtt": [default_synth.logical_id(functions[name]), "Arn"]})
        for name in ("launch", "decide", "trigger", "cleanup")
    )
    policies = default_synth.resources("AWS::IAM::Policy")
    for spec_name, role in default_synth.stack.workflows.roles.items():
        role_id = default_synth.logical_id(role)
        statements = [
            st
            for p in policies.values()
            if {"Ref": role_id} in p["Properties"]["Roles"]
            for st in p["Properties"]["PolicyDocument"]["Statement"]
        ]
        invokes = [st for st in statements if st["Action"] == "lambda:InvokeFunction"]
        assert len(invokes) == 1, spec_name
        assert sorted(json.dumps(r) for r in invokes[0]["Resource"]) == invoked
        actions = {a for st in statements for a in ([st["Action"]] if isinstance(st["Action"], str) else st["Action"])}
        assert not any(a.startswith(("s3:", "states:", "dynamodb:")) for a in actions), spec_name


def test_heartbeat_follows_the_watch_interval(default_synth: Synth, ad_hoc_synth: Synth) -> None:
    assert compile_options(default_synth.stack.settings).heartbeat_seconds == CompileOptions().heartbeat_seconds
    assert compile_options(ad_hoc_synth.stack.settings).heartbeat_seconds == 3 * 5 * 60  # watchIntervalMinutes=5
    definition = ad_hoc_synth.definition(next(iter(ad_hoc_synth.stack.workflows.machines.values())))
    beats = [s["HeartbeatSeconds"] for s in _walk_states(definition) if "HeartbeatSeconds" in s]
    assert beats and set(beats) == {900}


def test_a_trigger_waits_max_polls_watch_ticks_at_least(default_synth: Synth, ad_hoc_synth: Synth) -> None:
    """Issue 11 item 17: the watch tick polls a trigger's prefix once a tick (60 s at the least), so the trigger Task's
    bound is `maxPolls` × max(`pollSeconds`, the tick); `maxPolls` × `pollSeconds` gave the example (1 s × 120) two
    polls in the cloud before the run timed out."""
    checked = 0
    for synth in (default_synth, ad_hoc_synth):
        tick = 60 * synth.stack.settings.watch_interval_minutes
        for path in spec_files(SPECS):
            spec = load_spec(path).spec
            triggers = {n: st.trigger for n, st in spec.states.items() if st.trigger is not None}
            if not triggers:
                continue
            states = dict(_named_states(synth.definition(synth.stack.workflows.machines[spec.name])))
            for name, trigger in triggers.items():
                task = states[f"{name}.trigger"]
                assert task["Resource"].endswith(":lambda:invoke.waitForTaskToken"), name
                assert task["TimeoutSeconds"] == trigger.max_polls * max(trigger.poll_seconds, tick), (spec.name, name)
                assert task["TimeoutSeconds"] >= trigger.max_polls * tick
                checked += 1
    assert checked >= 2  # the trigger example, in both synths


def _named_states(definition: dict) -> list[tuple[str, dict]]:
    found = []
    for name, state in definition.get("States", {}).items():
        found.append((name, state))
        for inner in (*state.get("Branches", []), state.get("ItemProcessor"), state.get("Iterator")):
            if inner:
                found.extend(_named_states(inner))
    return found


def _walk_states(definition: dict) -> list[dict]:
    return [state for _, state in _named_states(definition)]


def test_an_invalid_spec_fails_the_synth_with_the_engines_message(tmp_path: Path) -> None:
    from infra.state_machines import compile_catalog
    from npa_workflow.errors import SpecError

    (tmp_path / "broken.yaml").write_text("apiVersion: npa.workflow/v0.0.1\nkind: Workflow\nname: broken\n")
    with pytest.raises(SpecError) as err:
        compile_catalog(tmp_path)
    assert "broken.yaml" in str(err.value)
