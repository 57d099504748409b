"""YAML paths and value kinds in messages: `states.sweep.parallel[2]`, "got list"."""

from __future__ import annotations

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
}


def pydantic_problems(exc: ValidationError, base: str, file: str = "") -> list[Problem]:
    """One problem per path: pydantic reports a union failure once per member type."""
    unique: dict[str, Problem] = {}
    for err in exc.errors():
        # Union members show up as extra loc entries like 'int' / 'str'; drop them.
        loc = [p for p in err["loc"] if not (isinstance(p, str) and p in ("str", "int", "float", "bool"))]
        path = join(base, *loc)
        kind = err["type"]
        if kind == "missing":
            message = f"missing required field '{loc[-1]}'" if loc else "missing required field"
        elif kind == "extra_forbidden":
            message = f"unknown field '{loc[-1]}'" if loc else "unknown field"
        elif kind == "too_short":
            message = "must not be empty"
        elif kind == "literal_error":
            message = err["msg"].replace("Input should be", "must be") + f", got {err.get('input')!r}"
        else:
            got = err.get("input")
            shown = repr(got) if isinstance(got, str | int | float | bool) else yaml_type(got)
            message = f"{_FRIENDLY.get(kind, err['msg'])}, got {shown}"
        unique.setdefault(path, Problem(path, message, file=file))
    return list(unique.values())
