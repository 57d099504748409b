"""The decision contract: normalization and the two predicates (a closed registry).

Pure functions; reading the artifact from S3 is the runtime's job.
"""

from __future__ import annotations

import json
from typing import Any

PROMOTE = "promote_checkpoint"
LOOP_BACK = "loop_back_to_inner_loop"
DECISION_KEYS = ("decision", "last_decision", "action")

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


def decision_from_body(body: bytes | str, uri: str) -> tuple[str, str]:
    """(raw value, normalized value) from an artifact body. Raises DecisionError naming the URI."""
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
            return text, normalize(text)
    raise DecisionError(f"decision artifact {uri} is missing a decision field (one of {', '.join(DECISION_KEYS)})")
