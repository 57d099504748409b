"""Per-state effective config: resolved base config overlaid with the state's `params`.

Shared by validation (run id `validate-run`, every loop counter = 1), the planner and the
runtime's launch, so a state's command means the same thing everywhere.

A param may read the base config and the state's *other* params (`round_uri:
"{{config.root}}/r{{loop.train}}"`, `ckpt: "{{config.round_uri}}/ckpt"`): params resolve in
dependency order, and params that reference each other in a ring are reported by name. A
param that reads its own name reads the base config's value of that name (`prefix:
"{{config.prefix}}/eval"` extends the global prefix).
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
    """Param -> the sibling params its value reads (a param reading its own name reads base config)."""
    deps: dict[str, list[str]] = {}
    for key, value in params.items():
        refs = references(value) if isinstance(value, str) else []
        deps[key] = [ref for scope, ref in refs if scope == "config" and ref in params and ref != key]
    return deps


def resolve_params(
    params: Mapping[str, Any],
    base_config: Mapping[str, Any],
    run: Mapping[str, Any],
    loops: Mapping[str, int],
    state_outputs: Mapping[str, list[str]] | None = None,
) -> tuple[dict[str, Any], dict[str, TokenError]]:
    """(base config overlaid with the params, {param: error} for those that did not resolve).

    A param whose sibling failed gets no error of its own: the root cause is reported where it is."""
    deps = param_dependencies(params)
    errors: dict[str, TokenError] = {}
    graph = {k: list(v) for k, v in deps.items()}
    while cycle := find_cycle(graph):
        for key in cycle[:-1]:
            errors.setdefault(key, TokenError(
                "params reference each other in a cycle: " + " -> ".join(f"params.{k}" for k in cycle),
                "make one of them a literal value or read it from config"))
            graph[key] = []
    merged = dict(base_config)
    skipped: set[str] = set()
    for key in TopologicalSorter(graph).static_order():  # a param's siblings come before it
        if key in errors or any(dep in errors or dep in skipped for dep in deps[key]):
            skipped.add(key)
            continue
        # The param's own name reads the base value; siblings read their resolved values.
        config = {**merged, key: base_config[key]} if key in base_config else \
            {k: v for k, v in merged.items() if k != key}
        ctx = TokenContext(config=config, run=run, loops=loops, state_outputs=state_outputs or {})
        try:
            merged[key] = resolve_param(params[key], ctx)
        except TokenError as exc:
            errors[key] = exc
            skipped.add(key)
    # A param that did not resolve keeps its raw text, so the commands that read it are not
    # reported a second time for the same root cause (the caller reports `errors`).
    for key in skipped:
        merged[key] = params[key]
    return merged, errors


def effective_config(
    state: State,
    base_config: Mapping[str, Any],
    run: Mapping[str, Any],
    loops: Mapping[str, int],
    state_outputs: Mapping[str, list[str]] | None = None,
) -> dict[str, Any]:
    """Params resolve against the base config, their siblings (in dependency order), run, loops and outputs."""
    merged, errors = resolve_params(state.params, base_config, run, loops, state_outputs)
    for key, exc in errors.items():
        raise TokenError(f"params.{key}: {exc.message}", exc.hint)
    return merged
