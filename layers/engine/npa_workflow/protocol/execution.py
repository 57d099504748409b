"""The state data of an execution: the input every execution starts with (`ExecutionInput`, built by
`compile.asl.execution_input`) and the item a Map's ItemSelector gives each member (`MapItem`). The compiler
checks its ItemSelector against `MapItem`; reap reads the run id back from an execution's input.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class MapItem(BaseModel):
    """One member of a group, as the Map's ItemSelector builds it from the parent's state data."""

    model_config = ConfigDict(extra="forbid")

    member: str
    run_id: str
    loops: dict[str, int] = Field(default_factory=dict)
    deadline: int = 0  # the run's per-wave deadline (`$.run.deadline`), read by the member's TimeoutSecondsPath


class RunRef(BaseModel):
    run_id: str
    bucket: str
    deadline: int = 0  # this run's per-wave deadline in seconds; wave Tasks read it (TimeoutSecondsPath)


class DecisionValue(BaseModel):
    value: str = ""


class ExecutionInput(BaseModel):
    """What every execution of a compiled machine starts with (`compile.asl.execution_input`)."""

    model_config = ConfigDict(extra="ignore")

    run: RunRef
    loops: dict[str, int] = Field(default_factory=dict)  # every loop key at 0
    decision: DecisionValue = Field(default_factory=DecisionValue)
    groups: dict[str, list[str]] = Field(default_factory=dict)  # group key → members (empty: read from S3)


def run_id_of_input(text: str | None) -> str | None:
    """The run id in an execution's input JSON (as Execution Status Change events carry it), or None."""
    try:
        return ExecutionInput.model_validate_json(text or "").run.run_id or None
    except ValueError:
        return None
