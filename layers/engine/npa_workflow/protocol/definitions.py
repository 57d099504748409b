"""A definition's identity, as a run is pinned to it: the SHA-256 of its canonical JSON with every `FunctionName`
masked. Deployed machines carry the functions' ARNs where the compiler writes placeholders (`protocol.functions`);
the functions are the stack's either way, so two definitions that differ only there run a frozen spec alike.

The inbox starts a deployed machine only when its definition, masked, equals the spec's compile (`engine.inbox`),
and freezes the digest with the run (`RunRecord.definition_digest`); `resume` starts a new execution only on a
machine whose current definition has that digest (`stack_client.StackClient.resume`): a deploy that changed the
spec since would run other states, loop and group keys than the run's frozen spec and ledger hold.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

MASKED_FUNCTION = "<function>"


def masked(node: Any) -> Any:
    """`node` with every string `FunctionName` replaced by one placeholder."""
    if isinstance(node, dict):
        return {k: MASKED_FUNCTION if k == "FunctionName" and isinstance(v, str) else masked(v)
                for k, v in node.items()}
    if isinstance(node, list):
        return [masked(v) for v in node]
    return node


def definition_digest(definition: dict[str, Any]) -> str:
    """The hex SHA-256 of `definition`, masked, as compact JSON with sorted keys."""
    text = json.dumps(masked(definition), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
