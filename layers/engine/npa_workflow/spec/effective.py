"""Per-state effective config: resolved base config overlaid with the state's `params`.

Shared by validation (run id `validate-run`, every loop counter = 1), the planner and the
runtime's launch, so a state's command means the same thing everywhere.

In a param, `{{config.K}}` reads the *base* config, as in the existing engine (`prefix:
"{{config.prefix}}/eval"` extends the global prefix even where the state has a param `prefix`). The state's
other params are read through their own scope, `{{params.K}}` (`round_uri: "{{config.root}}/r{{loop.train}}"`,
`ckpt: "{{params.round_uri}}/ckpt"`), which cannot shadow config: params resolve in dependency order, and
params that reference each other in a ring are reported by name.
"""

from __future__ import annotations

from collections.abc import Mapping
from graphlib import TopologicalSorter
from typing import Any

from npa_workflow.spec.graph import find_cycle
from npa_workflow.spec.model import State
from npa_workflow.spec.tokens import TokenContext, TokenError, references, resolve_text


def resolve_param(value: Any, ctx: TokenContext) -> Any:
    """One param value: strings are token-resolved (no `state.*` tokens), others kept as they are."""
    if not isinstance(value, str):
        return value
    for scope, ref in references(value):
        if scope == "state":
            raise TokenError(
                f"state.* tokens are not allowed in params (state.{ref})",
                "params resolve before the step runs: use the state token in the command or outputs",
            )
    return resolve_text(value, ctx)


def param_dependencies(params: Mapping[str, Any]) -> dict[str, list[str]]:
    """Param -> the sibling params its value reads (`{{params.K}}`; an unknown K is reported when it resolves)."""
    deps: dict[str, list[str]] = {}
    for key, value in params.items():
        refs = references(value) if isinstance(value, str) else []
        deps[key] = [ref for scope, ref in refs if scope == "params" and ref in params]
    return deps


def resolve_params(
    params: Mapping[str, Any],
    base_config: Mapping[str, Any],
    run: Mapping[str, Any],
    loops: Mapping[str, int],
    state_outputs: Mapping[str, list[str]] | None = None,
) -> tuple[dict[str, Any], dict[str, TokenError]]:
    """(base config overlaid with the params, {param: error} for those that did not resolve).

    `{{config.K}}` reads `base_config`, `{{params.K}}` the resolved sibling param K.
    A param whose sibling failed gets no error of its own: the root cause is reported where it is."""
    deps = param_dependencies(params)
    errors: dict[str, TokenError] = {}
    graph = {k: list(v) for k, v in deps.items()}
    while cycle := find_cycle(graph):
        for key in cycle[:-1]:
            errors.setdefault(key, TokenError(
                "params reference each other in a cycle: " + " -> ".join(f"params.{k}" for k in cycle),
                "make one of them a literal value or read it from config ({{config.KEY}})"))
            graph[key] = []
    resolved: dict[str, Any] = {}  # the params resolved so far: what `{{params.K}}` reads
    skipped: set[str] = set()
    for key in TopologicalSorter(graph).static_order():  # a param's siblings come before it
        if key in errors or any(dep in errors or dep in skipped for dep in deps[key]):
            skipped.add(key)
            continue
        ctx = TokenContext(config=base_config, run=run, loops=loops, state_outputs=state_outputs or {},
                           params=resolved)
        try:
            resolved[key] = resolve_param(params[key], ctx)
        except TokenError as exc:
            errors[key] = exc
            skipped.add(key)
    # A param that did not resolve keeps its raw text, so the commands that read it are not
    # reported a second time for the same root cause (the caller reports `errors`).
    merged = dict(base_config)
    for key in params:
        merged[key] = params[key] if key in skipped else resolved[key]
    return merged, errors


def effective_config(
    state: State,
    base_config: Mapping[str, Any],
    run: Mapping[str, Any],
    loops: Mapping[str, int],
    state_outputs: Mapping[str, list[str]] | None = None,
) -> dict[str, Any]:
    """Params resolve against the base config, their siblings (`params.*`, in dependency order), run, loops and
    outputs."""
    merged, errors = resolve_params(state.params, base_config, run, loops, state_outputs)
    for key, exc in errors.items():
        raise TokenError(f"params.{key}: {exc.message}", exc.hint)
    return merged
