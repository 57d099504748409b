"""Deployed names from the stack and spec names alone (issue 11 item 10): legal for Step Functions and CloudWatch
Logs, distinct, the same on every synth."""

from __future__ import annotations

import re

import pytest

from infra.names import ad_hoc_prefix, construct_id, log_group_name, machine_name, unique_construct_id
from infra.settings import STACK_NAME, SettingsError

LOG_GROUP = re.compile(r"^[\.\-_/#A-Za-z0-9]{1,512}$")
FORBIDDEN = re.compile(r"[\s<>{}\[\]?*\"#%\\^|~`$&,;:/\x00-\x1f\x7f-\x9f]")


@pytest.mark.parametrize("spec", ["train(v2)", "a+b", "résumé", "日本語", "x" * 200, "with space", "a/b", "ok-name"])
def test_every_spec_name_maps_to_a_legal_machine_and_log_group(spec: str) -> None:
    name = machine_name("NpaWorkflow", spec)
    assert name == machine_name("NpaWorkflow", spec)  # deterministic
    assert name.startswith("NpaWorkflow.") and len(name) <= 80 and not FORBIDDEN.search(name), name
    assert LOG_GROUP.match(log_group_name(name))
    assert re.fullmatch(r"[A-Za-z0-9]+", construct_id(name, "NpaWorkflow"))


def test_legal_names_are_kept_and_folded_ones_stay_apart() -> None:
    assert machine_name("S", "gate-loop") == "S.gate-loop"
    folded = {machine_name("S", n) for n in ("a+b", "a-b", "a b", "a(b", "a_b")}
    assert len(folded) == 5
    assert machine_name("S", "résumé").startswith("S.resume-")


def test_the_stack_prefix_never_matches_another_stacks_machines() -> None:
    """`.` is not allowed in a stack name, so `NpaWorkflow.` is not a prefix of `NpaWorkflow-dev.`'s machines."""
    assert not STACK_NAME.match("Npa.Workflow")
    assert not machine_name("NpaWorkflow-dev", "x").startswith("NpaWorkflow.")
    assert ad_hoc_prefix("NpaWorkflow") == "NpaWorkflow.adhoc."


def test_a_stack_name_that_leaves_no_room_is_a_settings_error() -> None:
    long_stack = "S" * 75
    assert len(machine_name(long_stack, "ab")) <= 80  # a short legal name still fits
    with pytest.raises(SettingsError, match="stackName"):
        machine_name(long_stack, "a name that must be folded")


def test_construct_ids_that_collide_get_the_hash() -> None:
    taken = {construct_id("S.a-b", "S")}
    other = unique_construct_id("S.a_b", "S", taken)
    assert other != "AB" and other.startswith("AB")
