"""The portable scheduler task document: one per plan step, what every renderer starts from."""

from __future__ import annotations

import copy
from typing import Any

from npa_workflow.plan.model import PlanStep


def step_image(step: PlanStep) -> str:
    """The step's container image: the profile `image` > the step's image (the tool's default) > "".

    A profile `image: tool://X` has already been expanded by the planner into `step.image`,
    so it is skipped here.
    """
    profile_image = step.resources_profile.get("image")
    if isinstance(profile_image, str) and profile_image.strip() and not profile_image.startswith("tool://"):
        return profile_image.strip()
    return step.image.strip()


def portable_task(step: PlanStep, *, workflow: str, run_id: str) -> dict[str, Any]:
    """Scheduler-neutral task: no env, no secrets. `command` is `[]` for a step with nothing to run."""
    return {
        "name": step.task_name,
        "run_id": run_id,
        "workflow": workflow,
        "tool_ref": step.tool_ref,
        "resources": copy.deepcopy(step.resources_profile),
        "num_nodes": step.num_nodes,
        "command": step.command,
        "image": step_image(step),
        "outputs": [{"uri": o.get("uri", ""), "schema": o.get("schema", "")} for o in step.outputs],
    }
