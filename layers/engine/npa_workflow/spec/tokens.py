"""Tokens: `{{scope.key}}` substitution with the `config`, `run`, `state`, `loop` and `params` scopes.

Grammar (the contract): `{{` optional spaces, scope, `.`, key of letters, digits, `_`, `.`,
`-`, optional `|transform` with no spaces around the pipe, optional spaces, `}}`.
Substitution is single-pass. Values render as JSON scalars (`true`, `false`, `""` for null);
lists and maps cannot be put into a command.

`{{params.K}}` is ours (the existing engine leaves it in the command verbatim): inside a state's `params`, the
value of that state's param `K`. It is a scope of its own so that it cannot shadow `{{config.K}}`, which in a
param always reads the base config, as in the existing engine. Anywhere else it is an error naming the fix.

Where we do better than the existing engine: text that *looks* like a token but has an
unknown scope (`{{iteration}}`, `{{env.HOME}}`) or a malformed transform is reported instead
of being left in the command verbatim. `find_suspicious` returns those. And a value put into a
`run.shell` script (`resolve_shell`) is one quoted shell word, never shell syntax, unless its token
says `|raw` (spec/shell_quote.py): that engine pasted every value in as is.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from npa_workflow.spec.hints import did_you_mean
from npa_workflow.spec.paths import yaml_type
from npa_workflow.spec.shell_quote import QuoteError, ShellScanner, insert

SCOPES = ("config", "run", "state", "loop", "params")

TOKEN_RE = re.compile(
    r"\{\{\s*(?P<scope>config|run|state|loop|params)\.(?P<key>[A-Za-z0-9_.\-]+)"
    r"(?:\|(?P<transform>[A-Za-z0-9_\-]+))?\s*\}\}"
)
# Anything shaped like a reference: an identifier, optional dotted key, optional transform.
# `{{.State}}` (Go templates) or `{{ }}` are not token-shaped and are left alone.
SHAPED_RE = re.compile(r"\{\{\s*[A-Za-z_][A-Za-z0-9_\-]*(?:\.[A-Za-z0-9_.\-]*)?(?:\s*\|\s*[A-Za-z0-9_\-]*)?\s*\}\}")

# `raw`: into a `run.shell` command as is, unquoted (spec/shell_quote.py); elsewhere the value is as it is.
TRANSFORMS = ("base64", "raw")


class TokenError(ValueError):
    """A token that cannot be resolved. `hint` says how to fix it."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


@dataclass
class TokenContext:
    """What tokens resolve against. `config` is the effective config (base + tool defaults + params)."""

    config: Mapping[str, Any]
    run: Mapping[str, Any]
    state_outputs: Mapping[str, list[str]] = field(default_factory=dict)
    loops: Mapping[str, int] = field(default_factory=dict)
    # At validation, `state.*` tokens for states that have not run yet are tolerated.
    tolerate_unknown_state: bool = False
    # The state's resolved sibling params, where `{{params.K}}` may be read (a param's value); None elsewhere.
    params: Mapping[str, Any] | None = None


def render_scalar(value: Any, where: str) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, bool | int | float):
        return json.dumps(value)
    raise TokenError(
        f"{where} is a {yaml_type(value)}, which cannot be put into text",
        "use a string, number or bool value",
    )


def output_index(out: str) -> int | None:
    """0-based output of `state.NAME.<out>`: `uri` is the first, `output_N` the N-th (1-based)."""
    if out == "uri":
        return 0
    number = out[len("output_"):] if out.startswith("output_") else ""
    return int(number) - 1 if number.isascii() and number.isdigit() and int(number) >= 1 else None


def _lookup(scope: str, key: str, ctx: TokenContext) -> Any | None:
    """Returns the value, or raises TokenError. None means 'leave verbatim' (tolerated)."""
    if scope == "config":
        if key not in ctx.config:
            raise TokenError(f"unknown config token: config.{key}",
                             did_you_mean(key, ctx.config, prefix="config.") or f"add '{key}' to config or params")
        return ctx.config[key]
    if scope == "run":
        if key not in ctx.run:
            known = ", ".join(sorted(ctx.run))
            raise TokenError(f"unknown run token: run.{key}",
                             did_you_mean(key, ctx.run, prefix="run.") or f"known run keys: {known}")
        return ctx.run[key]
    if scope == "params":
        if ctx.params is None:
            raise TokenError(f"params.* tokens are read only inside a state's params (params.{key})",
                             f"read the state's param here as {{{{config.{key}}}}}")
        if key not in ctx.params:
            raise TokenError(f"unknown params token: params.{key}",
                             did_you_mean(key, ctx.params, prefix="params.")
                             or f"add '{key}' to this state's params, or read config as {{{{config.{key}}}}}")
        return ctx.params[key]
    if scope == "loop":
        if key not in ctx.loops:
            raise TokenError(
                f"unknown loop token: loop.{key}",
                did_you_mean(key, ctx.loops, prefix="loop.")
                or "name a state that has a loop, and use the token inside or after that loop",
            )
        return ctx.loops[key]
    # state.NAME.K — split at the first dot
    name, _, out = key.partition(".")
    uris = ctx.state_outputs.get(name)
    if uris is None:
        if ctx.tolerate_unknown_state:
            return None
        raise TokenError(
            f"unknown state token: state.{key}",
            f"state '{name}' has not produced outputs before this step",
        )
    index = output_index(out)
    if index is None:
        raise TokenError(f"unknown state token: state.{key}", "use state.NAME.uri or state.NAME.output_N")
    if index >= len(uris):
        if ctx.tolerate_unknown_state:
            return None
        raise TokenError(
            f"unknown state token: state.{key}", f"state '{name}' declares {len(uris)} output(s)"
        )
    return uris[index]


def _token_value(match: re.Match[str], ctx: TokenContext) -> str | None:
    """The token's text after its transform; None for a tolerated unknown `state.*` (left verbatim)."""
    scope, key, transform = match.group("scope"), match.group("key"), match.group("transform")
    if transform is not None and transform not in TRANSFORMS:
        raise TokenError(f"unsupported token transform '{transform}'", "the transforms are |base64 and |raw")
    value = _lookup(scope, key, ctx)
    if value is None and scope == "state":
        return None
    rendered = render_scalar(value, f"{scope}.{key}")
    if transform == "base64":
        rendered = base64.b64encode(rendered.encode("utf-8")).decode("ascii")
    return rendered


def resolve_text(text: str, ctx: TokenContext) -> str:
    """Substitute every token in `text` (single pass). Raises TokenError on the first failure."""

    def replace(match: re.Match[str]) -> str:
        value = _token_value(match, ctx)
        return match.group(0) if value is None else value

    return TOKEN_RE.sub(replace, text)


def resolve_shell(text: str, ctx: TokenContext) -> str:
    """`resolve_text` for a `run.shell` script: each value is quoted as one shell word where it sits
    (`|raw`: as is). Raises TokenError when a value cannot be put at its place safely."""
    if "{{" not in text:  # nothing to put in: the script is as written
        return text
    scanner, out, end = ShellScanner(), [], 0
    try:
        for match in TOKEN_RE.finditer(text):
            literal = text[end:match.start()]
            scanner.feed(literal)
            out.append(literal)
            end = match.end()
            value = _token_value(match, ctx)
            if value is None:  # validation's stand-in for a later state's output: it holds a plain URI
                scanner.feed(match.group(0))
                out.append(match.group(0))
            else:
                token = f"{match.group('scope')}.{match.group('key')}"
                out.append(insert(scanner, value, token, match.group("transform") == "raw"))
        scanner.feed(text[end:])  # the script's rest: a here-document's end line may hold a value's text
    except QuoteError as exc:
        raise TokenError(exc.message, exc.hint) from None
    out.append(text[end:])
    return "".join(out)


def resolve_deep(value: Any, ctx: TokenContext) -> Any:
    """Resolve every string inside nested lists and maps (resource profiles)."""
    if isinstance(value, str):
        return resolve_text(value, ctx)
    if isinstance(value, list):
        return [resolve_deep(v, ctx) for v in value]
    if isinstance(value, dict):
        return {k: resolve_deep(v, ctx) for k, v in value.items()}
    return value


def references(text: str) -> list[tuple[str, str]]:
    """(scope, key) of every well-formed token in text."""
    return [(m.group("scope"), m.group("key")) for m in TOKEN_RE.finditer(text)]


def find_suspicious(text: str) -> list[tuple[str, str]]:
    """Token-shaped text that is not a valid token: (text, hint) pairs."""
    found = []
    for m in SHAPED_RE.finditer(text):
        if TOKEN_RE.fullmatch(m.group(0)):
            continue
        raw = m.group(0)
        inner = raw[2:-2].strip()
        head = inner.split(".", 1)[0].split("|", 1)[0].strip()
        if "|" in inner and head in SCOPES:
            hint = "write the transform without spaces around '|', e.g. {{config.x|base64}}"
        elif head in ("iteration", "loop"):
            hint = "use {{loop.STATE}} with the name of the looped state"
        elif head in SCOPES:
            hint = f"write {{{{{head}.KEY}}}}"
        else:
            hint = "scopes are config, run, state, loop and params"
        found.append((raw, hint))
    return found
