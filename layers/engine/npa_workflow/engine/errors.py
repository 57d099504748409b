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
# What `run.failed` fails an execution with when the caught error is Step Functions' own: a Fail state's
# Error may not begin with `States.` (AWS answers States.Runtime "Custom Error Names MUST NOT begin with
# the prefix 'States.'"), so cleanup never returns a `States.*` name.
WAVE_TIMED_OUT = "Wave.TimedOut"
RUN_FAILED = "Run.Failed"


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
