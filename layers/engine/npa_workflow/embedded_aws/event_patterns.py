"""EventBridge's event pattern matching, for the twin: an event reaches a rule's target only if it matches the
rule's EventPattern, the pattern the CDK app deploys (`protocol.deployment.Deployment.event_rules`).

The semantics, as the EventBridge User Guide states them ("Event patterns", "Arrays in event patterns",
"Content filtering", "Comparison operators"):

- every field the pattern names must be in the event, with the same nesting; fields the pattern does not name are
  ignored; the fields of one object are ANDed;
- a leaf of the pattern is an array of values, ORed: the event's value matches if any matches; when the event's
  value is itself an array, the pattern matches if any of its elements does (a non-empty intersection);
- a plain value matches by equality (strings are case-sensitive; numbers compare as numbers; `null` matches null);
- `{"prefix": s}`, `{"suffix": s}` (strings), `{"equals-ignore-case": s}`, `{"wildcard": p}` (`*` is any run of
  characters, `\\*` a literal star), `{"exists": true|false}` (`false` matches an absent field, and a field the
  event lacks fails every other matcher), `{"numeric": [op, n, ...]}`;
- `{"anything-but": x}`: any value except x, where x is a value, a list of values, or `{"prefix"|"suffix"|
  "wildcard"|"equals-ignore-case": ...}`; it needs the field to be present;
- `{"$or": [pattern, ...]}` inside an object: any of the alternatives.

Only what a rule can state is implemented; a matcher this module does not know raises ValueError, so a pattern the
stack starts using is never silently taken as matching or not (`cidr` is one: no rule of the stack needs it).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["matches"]

_ABSENT = object()
_NUMERIC_OPS = {"<": lambda a, b: a < b, "<=": lambda a, b: a <= b, "=": lambda a, b: a == b,
                ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}


def matches(pattern: Mapping[str, Any], event: Mapping[str, Any]) -> bool:
    """Whether `event` matches the EventPattern `pattern` (both as JSON documents)."""
    return _object(pattern, event)


def _object(pattern: Mapping[str, Any], event: Any) -> bool:
    for key, sub in pattern.items():
        if key == "$or":
            if not any(_object(alternative, event) for alternative in sub):
                return False
            continue
        value = event.get(key, _ABSENT) if isinstance(event, Mapping) else _ABSENT
        if isinstance(sub, Mapping):
            if value is _ABSENT or not _object(sub, value):
                return False
        elif isinstance(sub, list):
            if not _leaf(sub, value):
                return False
        else:
            raise ValueError(f"event pattern field {key!r}: expected an array or an object, got {sub!r}")
    return True


def _leaf(alternatives: list[Any], value: Any) -> bool:
    """One field's array of alternatives against the event's value (or each element of an array value)."""
    values = value if isinstance(value, list) else [value]
    for alternative in alternatives:
        if isinstance(alternative, Mapping) and "exists" in alternative:
            if bool(alternative["exists"]) == (value is not _ABSENT):
                return True
            continue
        if value is _ABSENT:
            continue
        if any(_one(alternative, v) for v in values):
            return True
    return False


def _one(alternative: Any, value: Any) -> bool:
    if not isinstance(alternative, Mapping):
        return _equal(alternative, value)
    if len(alternative) != 1:
        raise ValueError(f"event pattern matcher {alternative!r}: expected one operator")
    (op, arg), = alternative.items()
    if op == "anything-but":
        return not _anything_but_hit(arg, value)
    if op == "numeric":
        return _numeric(arg, value)
    return _string_match(op, arg, value)


def _equal(expected: Any, value: Any) -> bool:
    if isinstance(expected, bool) or isinstance(value, bool):
        return expected is value
    if isinstance(expected, (int, float)) and isinstance(value, (int, float)):
        return float(expected) == float(value)
    return bool(expected == value)


def _string_match(op: str, arg: Any, value: Any) -> bool:
    if op == "prefix" and isinstance(arg, Mapping):  # {"prefix": {"equals-ignore-case": "x"}}
        return isinstance(value, str) and value.lower().startswith(str(arg["equals-ignore-case"]).lower())
    if op == "suffix" and isinstance(arg, Mapping):
        return isinstance(value, str) and value.lower().endswith(str(arg["equals-ignore-case"]).lower())
    if not isinstance(value, str):
        return False
    if op == "prefix":
        return value.startswith(arg)
    if op == "suffix":
        return value.endswith(arg)
    if op == "equals-ignore-case":
        return value.lower() == str(arg).lower()
    if op == "wildcard":
        return _wildcard(str(arg)).fullmatch(value) is not None
    raise ValueError(f"event pattern operator {op!r} is not emulated (fix: add it to embedded_aws/event_patterns.py)")


def _anything_but_hit(arg: Any, value: Any) -> bool:
    """Whether `value` is one of what anything-but excludes."""
    if isinstance(arg, Mapping):
        (op, inner), = arg.items()
        candidates = inner if isinstance(inner, list) else [inner]
        return any(_string_match(op, c, value) for c in candidates)
    candidates = arg if isinstance(arg, list) else [arg]
    return any(_equal(c, value) for c in candidates)


def _numeric(arg: list[Any], value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    pairs = list(zip(arg[::2], arg[1::2], strict=True))
    return all(_NUMERIC_OPS[op](value, bound) for op, bound in pairs)


def _wildcard(pattern: str) -> re.Pattern[str]:
    """`*` is any run of characters (none included); `\\*` is a star itself."""
    parts = re.split(r"(\\\*|\*)", pattern)
    return re.compile("".join(".*" if p == "*" else re.escape("*" if p == "\\*" else p) for p in parts),
                      re.DOTALL)
