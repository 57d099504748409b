"""Resolving one state visit into a concrete step: command, profile, artifacts, image.

Used by the planner and by the runtime's launch, so a step means the same in both.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from npa_workflow.plan.model import PlanStep
from npa_workflow.spec.config import RunContext
from npa_workflow.spec.effective import effective_config
from npa_workflow.spec.tokens import TokenContext, TokenError, resolve_deep, resolve_shell, resolve_text
from npa_workflow.spec.validate import MAX_NUM_NODES, LoadedSpec


def _omit_empty_flags(argv: list[str], flags: list[str]) -> list[str]:
    """Drop each listed flag together with its value when the value resolved to ""."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        if argv[i] in flags and i + 1 < len(argv) and argv[i + 1] == "":
            i += 2
            continue
        out.append(argv[i])
        i += 1
    return out


def _num_nodes(value: Any, profile: str) -> int:
    """The profile's gang size after the step's params overlay (validation saw only base config)."""
    if type(value) is int and 1 <= value <= MAX_NUM_NODES:
        return value
    where, hint = f"resources profile '{profile}': num_nodes", f"set num_nodes to 1..{MAX_NUM_NODES}"
    if isinstance(value, bool):
        raise TokenError(f"{where} must be an integer, not a bool", hint)
    try:
        nodes = int(str(value).strip())
    except ValueError:
        raise TokenError(f"{where} must be an integer, got {value!r}", hint) from None
    if not 1 <= nodes <= MAX_NUM_NODES:
        raise TokenError(f"{where} must be in 1..{MAX_NUM_NODES}, got {nodes}", hint)
    return nodes


def resolve_step(
    loaded: LoadedSpec,
    name: str,
    run_ctx: RunContext,
    *,
    loops: Mapping[str, int],
    state_outputs: Mapping[str, list[str]],
    iteration: int | None = None,
    loop_label: str = "",
    group: str = "",
) -> PlanStep:
    """Raises TokenError when a token cannot be resolved at this point of the walk."""
    spec, catalog = loaded.spec, loaded.catalog
    st = spec.states[name]
    eff = effective_config(st, run_ctx.config, run_ctx.run, loops, state_outputs)
    ctx = TokenContext(config=eff, run=run_ctx.run, loops=loops, state_outputs=state_outputs)
    argv: list[str] = []
    shell = ""
    image = setup = ""
    env: dict[str, str] = {}
    tool = catalog.get(st.tool_ref) if st.tool_ref else None
    if tool is not None:
        argv = _omit_empty_flags([resolve_text(t, ctx) for t in tool.argv], tool.omit_flags_when_empty)
        image, setup = tool.image, tool.setup
        env = {k: resolve_text(v, ctx) for k, v in tool.env.items()}
    elif st.run is not None:
        if st.run.argv:
            argv = [resolve_text(t, ctx) for t in st.run.argv]
        else:
            shell = resolve_shell(st.run.shell, ctx)  # each value one shell word (`|raw`: as is)
    # An undefined profile name falls back to `default`, then to {}; a defined empty profile is used as is.
    if st.resources in spec.resources:
        profile_raw: dict[str, Any] = spec.resources[st.resources]
    else:
        profile_raw = spec.resources.get("default") or {}
    profile = resolve_deep(profile_raw, ctx)
    profile_image = profile.get("image") if isinstance(profile.get("image"), str) else ""
    if profile_image.startswith("tool://"):
        profile_image = catalog.tool_image(profile_image[len("tool://"):])  # validation rejects one that names none
    num_nodes = _num_nodes(profile.get("num_nodes", 1), st.resources)
    return PlanStep(
        state=name,
        iteration=iteration,
        loop_label=loop_label,
        argv=argv,
        shell=shell,
        tool_ref=st.tool_ref,
        resources=st.resources,
        resources_profile=profile,
        outputs=[{"uri": resolve_text(a.uri, ctx), "schema": a.schema_} for a in st.outputs],
        inputs=[{"uri": resolve_text(a.uri, ctx), "schema": a.schema_} for a in st.inputs],
        group=group,
        image=profile_image or image,
        setup=setup,
        env=env,
        num_nodes=num_nodes,
    )


def decision_uri(
    loaded: LoadedSpec, name: str, run_ctx: RunContext, *, loops: Mapping[str, int],
    state_outputs: Mapping[str, list[str]],
) -> str:
    """Where a state's decision is read: its decision output, else state-scoped, else global decision_uri."""
    st = loaded.spec.states[name]
    eff = effective_config(st, run_ctx.config, run_ctx.run, loops, state_outputs)
    ctx = TokenContext(config=eff, run=run_ctx.run, loops=loops, state_outputs=state_outputs)
    out = st.decision_output
    if out is not None:
        return resolve_text(out.uri, ctx)
    # Both mappings hold resolved values already; resolving again would break single-pass substitution.
    for source in (eff, run_ctx.config):
        value = source.get("decision_uri")
        if value:
            return value if isinstance(value, str) else str(value)
    return ""
