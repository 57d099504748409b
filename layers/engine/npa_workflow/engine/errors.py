"""Errors the engine functions raise into the state machine: defined once in the contract package
(`npa_workflow.protocol.errors`, which says how AWS names them); re-exported for the engine's modules."""

from __future__ import annotations

from npa_workflow.protocol.errors import (
    RUN_FAILED,
    TRIGGER_FAILED,
    WAVE_CANCELLED,
    WAVE_CONFIGURATION_FAILED,
    WAVE_FAILED,
    WAVE_INFRASTRUCTURE_FAILED,
    WAVE_LOST,
    WAVE_TIMED_OUT,
    DecisionMalformed,
    DecisionMissing,
    EngineError,
    RunNotFound,
    StepNotResolvable,
)

__all__ = [
    "RUN_FAILED", "TRIGGER_FAILED", "WAVE_CANCELLED", "WAVE_CONFIGURATION_FAILED", "WAVE_FAILED",
    "WAVE_INFRASTRUCTURE_FAILED", "WAVE_LOST", "WAVE_TIMED_OUT", "DecisionMalformed", "DecisionMissing",
    "EngineError", "RunNotFound", "StepNotResolvable",
]
