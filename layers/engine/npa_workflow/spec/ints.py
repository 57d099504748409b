"""Integer fields that may name a config key: `loop.max`, `parallelCount`, `maxConcurrency`,
and the trigger's `pollSeconds` / `maxPolls` / `minObjects`.

Accepted forms: an integer, a digit string, `config.KEY` or `{{config.KEY}}` (no space after
`{{`). A config value is read with `int()` (so `"3"` and `2.7` work, `"2.5"` does not). We
read the *resolved* config, so a config value that is itself a token works (the existing
engine reads raw config there and fails).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from npa_workflow.spec.paths import yaml_type

_CONFIG_REF = re.compile(r"^(?:\{\{config\.([A-Za-z0-9_.\-]+)\s*\}\}|config\.([A-Za-z0-9_.\-]+))$")
_HINT = "use an integer, 'config.KEY' or '{{config.KEY}}'"


class IntFieldError(ValueError):
    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


def _from_config(key: str, config: Mapping[str, Any], field: str) -> int:
    if key not in config:
        raise IntFieldError(f"{field} names config.{key}, which is not in config", f"add '{key}' to config")
    value = config[key]
    if isinstance(value, int | float | str) and not isinstance(value, bool):
        try:
            return int(value)
        except (ValueError, OverflowError):
            pass
    raise IntFieldError(f"{field} reads config.{key} = {value!r}, which is not an integer",
                        f"set config.{key} to a whole number")


# Every integer field counts rounds, members, seconds or objects: past this it is a typo (or an attack), and an
# unbounded one breaks later (a timestamp that does not fit, a Map that never ends).
MAX_INT = 1_000_000_000


def resolve_int(value: Any, config: Mapping[str, Any], field: str, default: int) -> int:
    """Resolve one integer field. Raises IntFieldError with the field's name in the message."""
    result = _resolve_int(value, config, field, default)
    if abs(result) > MAX_INT:
        raise IntFieldError(f"{field} = {result} is larger than {MAX_INT}", f"use a number up to {MAX_INT}")
    return result


def _resolve_int(value: Any, config: Mapping[str, Any], field: str, default: int) -> int:
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        raise IntFieldError(f"{field} must be an integer, not a bool", _HINT)
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        text = value.strip()
        match = _CONFIG_REF.match(text)
        if match:
            return _from_config(match.group(1) or match.group(2), config, field)
        if text.isascii() and text.isdigit():
            return int(text)
        raise IntFieldError(f"cannot resolve {field} from {value!r}", _HINT)
    shown = repr(value) if isinstance(value, float) else yaml_type(value)
    raise IntFieldError(f"{field} must be an integer, got {shown}", _HINT)


def resolve_bounded(
    value: Any, config: Mapping[str, Any], field: str, default: int, low: int, high: int | None = None
) -> int:
    number = resolve_int(value, config, field, default)
    if number < low:
        raise IntFieldError(f"{field} must be >= {low}, got {number}", f"set {field} to {low} or more")
    if high is not None and number > high:
        raise IntFieldError(f"{field} must be <= {high}, got {number}", f"set {field} to {high} or less")
    return number


_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0", ""}


def yaml_bool(value: Any) -> bool | None:
    """YAML-boolean reading of a config value for `transitions[].if`; None = not a boolean."""
    if isinstance(value, bool):
        return value
    if value is None:
        return False
    if isinstance(value, int):
        return {0: False, 1: True}.get(value)
    if isinstance(value, str):
        text = value.strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
    return None
