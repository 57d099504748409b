"""Deployed names from the stack and spec names alone (issue 11 item 10): legal for Step Functions and CloudWatch
Logs, distinct, the same on every synth."""

from __future__ import annotations

import re

import pytest

from infra.names import ad_hoc_prefix, construct_id, log_group_name, machine_name, unique_construct_id
from infra.settings import STACK_NAME, SettingsError

LOG_GROUP = re.compile(r"^[\.\-_/#A-Za-z0-9]{1,512}$")
# Step Functions CreateStateMachine, `name`: "To enable logging with CloudWatch Logs, the name should only contain
# 0-9, A-Z, a-z, - and _." (every machine of the stack logs at level ALL).
LOGGED_MACHINE = re.compile(r"^[0-9A-Za-z_-]{1,80}$")


@pytest.mark.parametrize("spec", ["train(v2)", "a+b", "résumé", "日本語", "x" * 200, "with space", "a/b", "ok-name",
                                  "with.dot"])
def test_every_spec_name_maps_to_a_legal_machine_and_log_group(spec: str) -> None:
    name = machine_name("NpaWorkflow", spec)
    assert name == machine_name("NpaWorkflow", spec)  # deterministic
    assert name.startswith("NpaWorkflow_") and len(name) <= 80 and LOGGED_MACHINE.match(name), name
    assert LOG_GROUP.match(log_group_name(name))
    assert re.fullmatch(r"[A-Za-z0-9]+", construct_id(name, "NpaWorkflow"))


def test_legal_names_are_kept_and_folded_ones_stay_apart() -> None:
    assert machine_name("S", "gate-loop") == "S_gate-loop"
    assert machine_name("S", "snake_case") == "S_snake_case"
    folded = {machine_name("S", n) for n in ("a+b", "a-b", "a b", "a(b", "a_b", "a.b")}
    assert len(folded) == 6
    assert machine_name("S", "résumé").startswith("S_resume-")


def test_the_stack_prefix_never_matches_another_stacks_machines() -> None:
    """`_` is not allowed in a stack name (CloudFormation: `[A-Za-z][A-Za-z0-9-]*`), so `NpaWorkflow_` is not a prefix
    of `NpaWorkflow-dev_`'s machines."""
    assert not STACK_NAME.match("Npa_Workflow")
    assert not machine_name("NpaWorkflow-dev", "x").startswith("NpaWorkflow_")
    assert ad_hoc_prefix("NpaWorkflow") == "NpaWorkflow_adhoc_"


def test_a_stack_name_that_leaves_no_room_is_a_settings_error() -> None:
    long_stack = "S" * 75
    assert len(machine_name(long_stack, "ab")) <= 80  # a short legal name still fits
    with pytest.raises(SettingsError, match="stackName"):
        machine_name(long_stack, "a name that must be folded")


def test_construct_ids_that_collide_get_the_hash() -> None:
    taken = {construct_id("S_a-b", "S")}
    other = unique_construct_id("S_a_b", "S", taken)
    assert other != "AB" and other.startswith("AB")


def test_validate_prints_the_names_a_renamed_spec_deploys_as(tmp_path) -> None:
    """One rule for the deploy and for `validate` (protocol.deployed_names): what validate prints is what synth
    names, and a spec whose name is kept prints nothing extra."""
    import json
    from pathlib import Path

    from typer.testing import CliRunner

    from npa_workflow.cli.app import app

    specs = Path(__file__).resolve().parents[2] / "specs"
    text = (specs / "fanout.yaml").read_text()
    renamed = tmp_path / "renamed.yaml"
    renamed.write_text(re.sub(r"(?m)^  name: .*$", '  name: "train(v2)"', text, count=1))
    (tmp_path / "tools.yaml").write_text((specs / "tools.yaml").read_text())
    machine = machine_name("NpaWorkflow", "train(v2)")
    result = CliRunner().invoke(app, ["validate", str(renamed), str(specs / "fanout.yaml")])
    assert result.exit_code == 0, result.output
    assert f"deploys as state machine {machine}, log group {log_group_name(machine)}" in result.output
    assert result.output.count("deploys as") == 1  # fanout keeps its name: no line
    result = CliRunner().invoke(app, ["validate", str(renamed), "--json"])
    [spec] = json.loads(result.output)["specs"]
    assert spec["deployedAs"] == {"stateMachine": machine, "logGroup": log_group_name(machine), "renamed": True}
