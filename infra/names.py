"""The deployed names of a spec: its state machine and log group (the rule and the AWS facts it relies on are in
`npa_workflow.protocol.deployed_names`, which `npa-workflow validate` shares), and its CDK construct id.
"""

from __future__ import annotations

import re

from infra.settings import SettingsError
from npa_workflow.protocol import deployed_names as rule
from npa_workflow.protocol.deployed_names import (  # noqa: F401 - the stack's names, re-exported
    AD_HOC_INFIX,
    ad_hoc_prefix,
    log_group_name,
    machine_prefix,
)

_WORD = re.compile(r"[A-Za-z0-9]+")


def machine_name(stack_name: str, spec_name: str) -> str:
    """`<stack>_<spec name>` mapped to `[A-Za-z0-9_-]`, at most 80 characters; a stack name too long for it is a
    settings error (the context value to fix)."""
    try:
        return rule.machine_name(stack_name, spec_name)
    except rule.NoRoomForSpecNames as exc:
        raise SettingsError(str(exc)) from None


def construct_id(machine: str, stack_name: str) -> str:
    """A CamelCase construct id from the machine name's spec part (`gate-loop` → `GateLoop`)."""
    spec_part = machine.removeprefix(machine_prefix(stack_name))
    return "".join(word[0].upper() + word[1:] for word in _WORD.findall(spec_part)) or "Spec"


def unique_construct_id(machine: str, stack_name: str, taken: set[str]) -> str:
    """`construct_id`, with the machine name's hash appended when another spec already has it (`a_b`, `a-b`)."""
    base = construct_id(machine, stack_name)
    return base if base not in taken else base + rule.name_tag(machine).upper()
