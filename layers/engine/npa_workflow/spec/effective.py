"""Per-state effective config: resolved base config overlaid with the state's `params`.

Shared by validation (run id `validate-run`, every loop counter = 1), the planner and the
runtime's launch, so a state's command means the same thing everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

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


def effective_config(
    state: State,
    base_config: Mapping[str, Any],
    run: Mapping[str, Any],
    loops: Mapping[str, int],
    state_outputs: Mapping[str, list[str]] | None = None,
) -> dict[str, Any]:
    """Params resolve against the *base* config (not each other), run, loops and outputs."""
    ctx = TokenContext(config=base_config, run=run, loops=loops, state_outputs=state_outputs or {})
    merged = dict(base_config)
    for key, value in state.params.items():
        try:
            merged[key] = resolve_param(value, ctx)
        except TokenError as exc:
            raise TokenError(f"params.{key}: {exc.message}", exc.hint) from None
    return merged
