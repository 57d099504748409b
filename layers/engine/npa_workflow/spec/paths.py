"""YAML paths and value kinds in messages: `states.sweep.parallel[2]`, "got list"."""

from __future__ import annotations

import re
from typing import Any

from pydantic import ValidationError

from npa_workflow.errors import Problem


def join(base: str, *parts: str | int) -> str:
    out = base
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out = f"{out}.{part}" if out else str(part)
    return out


def yaml_type(value: Any) -> str:
    """The YAML name of a value's type, for "got ..." in messages."""
    if value is None:
        return "null"
    for kind, name in ((bool, "bool"), (int, "int"), (float, "float"), (str, "string"), (list, "list"),
                       (dict, "mapping")):
        if isinstance(value, kind):
            return name
    return type(value).__name__


_FRIENDLY = {
    "string_type": "must be a string",
    "list_type": "must be a list",
    "dict_type": "must be a mapping",
    "model_type": "must be a mapping",
    "model_attributes_type": "must be a mapping",
    "bool_type": "must be true or false",
    "int_type": "must be an integer",
    "float_type": "must be a number",
}


# pydantic names the member of a union that failed after the real path: `spec.constrained-str`,
# `spec.dict[str,any]`, `vars.a.int`. Those are our types' internals, never something the user wrote.
_UNION_TAG = re.compile(r"^(str|int|float|bool|none|constrained-\w+|[a-z][\w-]*\[.*\])$")


def _user_path(loc: tuple[Any, ...]) -> list[str | int]:
    parts = list(loc)
    if len(parts) > 1 and isinstance(parts[-1], str) and _UNION_TAG.match(parts[-1]):
        parts.pop()
    return parts


def _message_and_fix(err: Any, loc: list[str | int]) -> tuple[str, str]:
    kind, ctx, got = err["type"], err.get("ctx") or {}, err.get("input")
    field = str(loc[-1]) if loc else "field"
    shown = repr(got) if isinstance(got, str | int | float | bool) else yaml_type(got)
    if kind == "missing":
        return f"missing required field '{field}'", f"add '{field}'"
    if kind == "extra_forbidden":
        return f"unknown field '{field}'", f"remove '{field}' or check its spelling"
    if kind in ("too_short", "string_too_short"):
        return "must not be empty", "give a value"
    if kind == "literal_error":
        return err["msg"].replace("Input should be", "must be") + f", got {shown}", "use one of the values listed"
    if kind == "string_pattern_mismatch":
        return (f"{shown} is not allowed here", "use letters, digits, '-' and '_' only, starting with a letter "
                "or digit" if "A-Za-z0-9" in str(ctx.get("pattern", "")) else f"match {ctx.get('pattern')}")
    bounds = {"greater_than_equal": ("at least", "ge"), "less_than_equal": ("at most", "le"),
              "greater_than": ("more than", "gt"), "less_than": ("less than", "lt")}
    if kind in bounds:
        word, key = bounds[kind]
        return f"must be {word} {ctx.get(key)}, got {shown}", f"use a number {word} {ctx.get(key)}"
    if kind in ("int_parsing", "int_from_float", "int_type"):
        return f"must be an integer, got {shown}", "write a whole number"
    if kind in _FRIENDLY:
        return f"{_FRIENDLY[kind]}, got {shown}", _FRIENDLY[kind].replace("must be", "write")
    return f"{err['msg']}, got {shown}", "see docs/language.md for what this field takes"


def pydantic_problems(exc: ValidationError, base: str, file: str = "") -> list[Problem]:
    """One problem per path the user wrote (a union failure is reported once, not once per member type)."""
    by_path: dict[str, list[tuple[Any, list[str | int]]]] = {}
    for err in exc.errors():
        loc = _user_path(err["loc"])
        by_path.setdefault(join(base, *loc), []).append((err, loc))
    problems = []
    for path, errs in by_path.items():
        kinds = [e["type"] for e, _ in errs]
        if len(errs) > 1 and all(k in _FRIENDLY for k in kinds):
            # Every member of a union refused the value: say what the field takes, once.
            names = list(dict.fromkeys(_FRIENDLY[k].removeprefix("must be ") for k in kinds))
            got = errs[0][0].get("input")
            shown = repr(got) if isinstance(got, str | int | float | bool) else yaml_type(got)
            either = ", ".join(names[:-1]) + f" or {names[-1]}"
            problems.append(Problem(path, f"must be {either}, got {shown}", f"write {either}", file=file))
            continue
        message, fix = _message_and_fix(*errs[0])
        problems.append(Problem(path, message, fix, file=file))
    return problems
