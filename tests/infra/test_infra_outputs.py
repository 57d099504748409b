"""The stack's CloudFormation outputs are the ones `stack_client` reads (protocol.stack: one table both use), and
its functions are the rows of the function table."""

from __future__ import annotations

from infra_support import Synth

from npa_workflow.protocol import functions as function_table
from npa_workflow.protocol import stack as outputs


def test_the_stack_emits_every_output_of_the_protocol_table(default_synth: Synth) -> None:
    emitted = set(default_synth.template.get("Outputs", {}))
    assert set(outputs.OUTPUTS) <= emitted
    assert set(outputs.REQUIRED_BY_CLIENTS) <= set(outputs.OUTPUTS)


def test_every_function_of_the_table_is_deployed_with_its_handler_timeout_and_memory(default_synth: Synth) -> None:
    deployed = default_synth.stack.engine.functions
    assert set(deployed) == set(function_table.NAMES)
    for slot in function_table.FUNCTIONS:
        props = default_synth.template["Resources"][default_synth.logical_id(deployed[slot.name])]["Properties"]
        assert (props["Handler"], props["Timeout"], props["MemorySize"]) == (
            slot.handler, slot.timeout_seconds, slot.memory_mb), slot.name
