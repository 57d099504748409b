"""Plan documents. `PlanStep.to_json()` is the contract of `npa-workflow plan --json`."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class PlanStep:
    state: str
    iteration: int | None
    loop_label: str
    argv: list[str]
    shell: str
    tool_ref: str
    resources: str
    resources_profile: dict[str, Any]
    outputs: list[dict[str, str]]
    inputs: list[dict[str, str]]
    group: str
    # Rendering inputs that are not part of the plan document.
    image: str = ""
    setup: str = ""
    env: dict[str, str] = field(default_factory=dict)
    num_nodes: int = 1
    # The loop round this step belongs to, kept for every step (the contract's `iteration` numbers only
    # leaf loops): the innermost loop around it and that loop's counter; None outside loops.
    loop: str = ""
    round: int | None = None
    # Every loop counter started when the step is reached: the launch's identity of the step's wave.
    loops: dict[str, int] = field(default_factory=dict)

    @property
    def task_name(self) -> str:
        return f"{self.state}-{self.iteration}" if self.iteration is not None else self.state

    @property
    def command(self) -> list[str]:
        if self.argv:
            return list(self.argv)
        if self.shell.strip():
            return ["bash", "-c", self.shell]
        return []

    def to_json(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "iteration": self.iteration,
            "loop_label": self.loop_label,
            "argv": list(self.argv),
            "shell": self.shell,
            "tool_ref": self.tool_ref,
            "resources": self.resources,
            "resources_profile": copy.deepcopy(self.resources_profile),
            "outputs": [dict(o) for o in self.outputs],
            "inputs": [dict(i) for i in self.inputs],
            "group": self.group,
            "loop": self.loop,
            "round": self.round,
        }


@dataclass(frozen=True)
class Plan:
    workflow: str
    api_version: str
    initial: str
    run_id: str
    assume_decision: str
    steps: list[PlanStep]

    def to_json(self) -> dict[str, Any]:
        return {
            "workflow": self.workflow,
            "api_version": self.api_version,
            "initial": self.initial,
            "assume_decision": self.assume_decision,
            "steps": [s.to_json() for s in self.steps],
        }


@dataclass(frozen=True)
class Wave:
    index: int
    kind: str  # "serial" | "parallel"
    group: str
    name: str
    max_concurrency: int
    batches: list[list[PlanStep]]
    steps: list[PlanStep]

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "kind": self.kind,
            "group": self.group,
            "name": self.name,
            "max_concurrency": self.max_concurrency,
            "batches": len(self.batches),
            "steps": [
                {
                    "state": s.state,
                    "iteration": s.iteration,
                    "tool_ref": s.tool_ref,
                    "resources": s.resources,
                    "outputs": [o["uri"] for o in s.outputs],
                    "round": s.round,
                }
                for s in self.steps
            ],
        }


@dataclass(frozen=True)
class WavePlan:
    workflow: str
    run_id: str
    assume_decision: str
    waves: list[Wave]

    def to_json(self) -> dict[str, Any]:
        return {
            "workflow": self.workflow,
            "run_id": self.run_id,
            "assume_decision": self.assume_decision,
            "wave_count": len(self.waves),
            "parallel_waves": sum(1 for w in self.waves if w.kind == "parallel"),
            "waves": [w.to_json() for w in self.waves],
        }
