"""Waves: the flat plan folded into submit units, and the batching of parallel groups.

A step without a group is its own serial wave. Consecutive steps of one group form a
parallel wave; a change of group, or a member repeating (loop re-entry), closes it.
Batches: members in declared order, `min(maxConcurrency, --max-concurrency)` at a time.
"""

from __future__ import annotations

from npa_workflow.plan.model import Plan, PlanStep, Wave, WavePlan
from npa_workflow.spec.config import RunContext
from npa_workflow.spec.ints import IntFieldError, resolve_bounded
from npa_workflow.spec.validate import LoadedSpec


def concurrency_limit(declared: int, group_size: int, cap: int = 0) -> int:
    """The batch size: the declared bound (or the group size), lowered by the operator cap."""
    limit = declared if declared > 0 else group_size
    if cap > 0:
        limit = min(limit, cap)
    return max(1, limit)


def batches(members: list[PlanStep], limit: int) -> list[list[PlanStep]]:
    return [members[i : i + limit] for i in range(0, len(members), limit)]


def group_max_concurrency(loaded: LoadedSpec, group: str, run_ctx: RunContext) -> int:
    st = loaded.spec.states[group]
    try:
        return resolve_bounded(st.max_concurrency, run_ctx.config, "maxConcurrency", len(st.parallel), 1)
    except IntFieldError:
        return len(st.parallel)


def build_waves(loaded: LoadedSpec, plan: Plan, run_ctx: RunContext, *, max_concurrency_cap: int = 0) -> WavePlan:
    groups: list[tuple[str, list[PlanStep]]] = []
    members: set[str] = set()  # states in the open parallel wave: a repeat is a loop re-entry
    for step in plan.steps:
        if step.group and groups and groups[-1][0] == step.group and step.state not in members:
            groups[-1][1].append(step)
            members.add(step.state)
        else:
            groups.append((step.group, [step]))
            members = {step.state}
    waves: list[Wave] = []
    for index, (group, steps) in enumerate(groups):
        if group:
            declared = group_max_concurrency(loaded, group, run_ctx)
            limit = concurrency_limit(declared, len(steps), max_concurrency_cap)
            waves.append(Wave(index, "parallel", group, group, limit, batches(steps, limit), steps))
        else:
            waves.append(Wave(index, "serial", "", steps[0].state, 1, [steps], steps))
    return WavePlan(workflow=plan.workflow, run_id=plan.run_id, assume_decision=plan.assume_decision, waves=waves)
