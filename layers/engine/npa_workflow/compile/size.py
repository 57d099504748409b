"""A compiled definition as Step Functions receives it, and its size against the 1 MiB limit.

Step Functions: a state machine definition is at most 1 MiB (CreateStateMachine's `definition`, UTF-8 bytes).
Indented JSON wastes a quarter of it (1,000 states: 1.37 MB indented, 1.04 MB compact), and every function
placeholder grows into an ARN when CloudFormation or the twin substitutes it, so the size that counts is the
compact text with the longest ARNs in place.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from npa_workflow.protocol.functions import MACHINE_INVOKED

MAX_DEFINITION_BYTES = 1024 * 1024
# The longest ARN a placeholder can become: `arn:aws-us-gov:lambda:<region>:<12 digits>:function:<64 chars>`.
MAX_FUNCTION_ARN_CHARS = 140


def serialize_definition(definition: Mapping[str, Any]) -> str:
    """Compact JSON, as every consumer (CDK app, inbox, twin) sends a definition."""
    return json.dumps(definition, separators=(",", ":"), ensure_ascii=False)


def deployed_definition_bytes(text: str) -> int:
    """The definition's size once every function placeholder is an ARN (at worst)."""
    size = len(text.encode("utf-8"))
    for slot in MACHINE_INVOKED:
        size += text.count(slot.placeholder) * (MAX_FUNCTION_ARN_CHARS - len(slot.placeholder))
    return size
