"""The decision contract: normalization and the two predicates (a closed registry).

Pure functions; reading the artifact from S3 is the runtime's job.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

PROMOTE = "promote_checkpoint"
LOOP_BACK = "loop_back_to_inner_loop"
DECISION_KEYS = ("decision", "last_decision", "action")

# A decision is a short name (`promote_checkpoint`); its artifact a small JSON object. Past these sizes it is not
# a decision: refusing it here keeps it out of a DynamoDB item (400 KB at most) and a Step Functions payload
# (256 KiB at most), where it would fail with a raw service error.
MAX_BODY_BYTES = 1024 * 1024
MAX_VALUE_CHARS = 256
# The ledger keeps a body up to this size as it is; a larger one by reference (its URI, size and sha256).
INLINE_BODY_BYTES = 2000

_CANONICAL = {"promote": PROMOTE, PROMOTE: PROMOTE, "loop_back": LOOP_BACK, LOOP_BACK: LOOP_BACK}


class DecisionError(ValueError):
    """A decision artifact that exists but cannot be used."""


def normalize(value: str | None) -> str:
    """Case-sensitive: `PROMOTE` is not `promote`. Unknown values pass through and match nothing."""
    text = (value or "").strip()
    return _CANONICAL.get(text, text)


def predicate(name: str, decision: str) -> bool:
    if name == "promote_checkpoint":
        return decision == PROMOTE
    if name == "loop_back":
        return decision == LOOP_BACK
    raise ValueError(f"unknown predicate {name!r}")


def resolve_assumption(cli_value: str | None, config: dict[str, Any], has_transitions: bool) -> str:
    """CLI value, else config.plan_assume_decision, else loop_back when any state branches."""
    if cli_value:
        return normalize(cli_value)
    configured = config.get("plan_assume_decision")
    if configured:
        return normalize(str(configured))
    return LOOP_BACK if has_transitions else ""


def body_for_ledger(body: bytes, uri: str) -> str:
    """What the ledger records of an artifact body: the text when small, else a reference to it."""
    if len(body) <= INLINE_BODY_BYTES:
        return body.decode("utf-8", errors="replace")
    return f"(stored by reference: {uri}, {len(body)} bytes, sha256:{hashlib.sha256(body).hexdigest()})"


def decision_from_body(body: bytes | str, uri: str) -> tuple[str, str]:
    """(raw value, normalized value) from an artifact body. Raises DecisionError naming the URI."""
    size = len(body.encode("utf-8") if isinstance(body, str) else body)
    if size > MAX_BODY_BYTES:
        raise DecisionError(f"decision artifact {uri} is {size} bytes; a decision artifact is a small JSON object "
                            f"(at most {MAX_BODY_BYTES} bytes) such as {{\"decision\": \"{PROMOTE}\"}}")
    try:
        payload = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise DecisionError(f"decision artifact {uri} is not valid JSON: {exc}") from None
    if not isinstance(payload, dict):
        raise DecisionError(f"decision artifact {uri} must be a JSON object, got {type(payload).__name__}")
    for key in DECISION_KEYS:
        if key in payload:
            raw = payload[key]
            text = raw if isinstance(raw, str) else json.dumps(raw)
            if len(text) > MAX_VALUE_CHARS:
                raise DecisionError(f"decision artifact {uri}: the {key!r} value is {len(text)} characters; a "
                                    f"decision is a short name such as {PROMOTE!r} (at most {MAX_VALUE_CHARS})")
            return text, normalize(text)
    raise DecisionError(f"decision artifact {uri} is missing a decision field (one of {', '.join(DECISION_KEYS)})")
