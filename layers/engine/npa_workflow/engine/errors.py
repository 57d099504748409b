"""Errors the engine functions raise into the state machine.

Step Functions names a Lambda error after `errorType`, the exception's class name on AWS; the
local adapter also honours `error_type`. The `Wave.*` names are what Retry and Catch match.
"""

from __future__ import annotations

WAVE_FAILED = "Wave.Failed"
WAVE_INFRASTRUCTURE_FAILED = "Wave.InfrastructureFailed"
WAVE_CONFIGURATION_FAILED = "Wave.ConfigurationFailed"
WAVE_CANCELLED = "Wave.Cancelled"
WAVE_LOST = "Wave.Lost"
TRIGGER_FAILED = "Trigger.Failed"


class EngineError(Exception):
    error_type = "Engine.Error"


class RunNotFound(EngineError):
    error_type = "Run.NotFound"


class DecisionMissing(EngineError):
    error_type = "Decision.Missing"


class DecisionMalformed(EngineError):
    error_type = "Decision.Malformed"


class StepNotResolvable(EngineError):
    error_type = "Step.Unresolvable"
