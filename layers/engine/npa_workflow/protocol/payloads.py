"""What each compiled Task sends its Lambda, what the machine reads from the result, and the execution input.

The compiler checks every Task's `Parameters.Payload` against the model of the function it invokes
(`check_payload`), so the machine and the handler cannot drift: a field the model lacks, or a required field not
given, fails the compile. The handler validates the event with the same model and the engine function takes it.

The state data the Tasks read from is in `protocol.execution` (the execution input, a Map's item): the
compiler and reap need those models, the other handlers do not build them at their cold start.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field


class _Task(BaseModel):
    # The payload is ours (the compiler writes every field), so an unknown field is drift, not AWS adding one.
    model_config = ConfigDict(extra="forbid")

    @classmethod
    def of(cls, event: Any) -> Self:
        """`event` as this model: the model itself, or the mapping the machine sends."""
        return event if isinstance(event, cls) else cls.model_validate(event)


class StateTask(_Task):
    """What every Task of a state sends: the run, the state and the loop counters of this visit."""

    run_id: str
    state: str
    loops: dict[str, int] = Field(default_factory=dict)  # loop key (`l<n>`) → iteration; 0 = not started
    execution: str = ""  # the execution's ARN (which of a resumed run's executions sent it)


class WaveTask(StateTask):
    """A waitForTaskToken Task: a wave's launch, or a trigger's watch registration."""

    token: str = Field(repr=False)
    group: str = ""  # a group member's Task: the group state it is a member of


class DecideTask(StateTask):
    """The `<state>.decide` Task."""

    purpose: str = ""  # "loop" (a loop's exit) or "transitions" (a branch)
    current: str = ""  # the decision already in the state data (a loop's writer may have read it)


class CleanupTask(StateTask):
    """The `<state>.cleanup` Task, every Catch's target: the caught error."""

    error: dict[str, Any] = Field(default_factory=dict)  # {"Error": name, "Cause": text}
    # The caught state's TimeoutSeconds / HeartbeatSeconds (`timeoutSeconds`, `heartbeatSeconds`): a timeout's
    # message names the deadline the state ran past.
    deadline: dict[str, int] = Field(default_factory=dict)


# -- results the machine reads (ResultSelector paths)
class DecideResult(BaseModel):
    decision: str  # the normalized decision the Choice compares
    source: str = ""  # where it came from: artifact, assumption, earlier_read, …


class CleanupResult(BaseModel):
    error: str  # the error the run fails with
    cause: str  # the root cause, naming the first failing state


def check_payload(model: type[BaseModel], payload_doc: dict[str, Any]) -> dict[str, Any]:
    """`payload_doc` (a Task's `Parameters.Payload`, an ItemSelector) if it sets only fields of `model` and
    every required one (`"x.$": path` and `"x": literal` both set `x`); else ValueError naming the drift."""
    sent = payload_fields(payload_doc)
    unknown = sorted(sent - set(model.model_fields))
    if unknown:
        raise ValueError(f"{model.__name__} has no field(s) {', '.join(unknown)}")
    missing = sorted(n for n, f in model.model_fields.items() if f.is_required() and n not in sent)
    if missing:
        raise ValueError(f"{model.__name__} payload lacks required field(s) {', '.join(missing)}")
    return payload_doc


def payload_fields(payload_doc: Mapping[str, Any]) -> set[str]:
    """The model fields a compiled Payload sets (`"x.$"` and `"x"` both set `x`)."""
    return {key.removesuffix(".$") for key in payload_doc}
