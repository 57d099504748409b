"""Every error name the state machine retries, catches, fails or is stopped with, and the exceptions the engine's
Lambda functions raise into it.

Two ways an error reaches a Task, two naming rules:

- `SendTaskFailure(error=...)` (the watch pass, trigger, cleanup of a waitForTaskToken Task): the name is any
  string we send, so the wave errors are dotted (`Wave.Failed`);
- an exception a Lambda handler raises: AWS's Python runtime reports it with `errorType` = the exception class's
  `__name__` (no module, no attribute can change it), and Step Functions names the Task's error after
  `errorType`. So these errors are the classes below and their names are the class names (`DecisionMissing`);
  the twin (embedded_aws/moto_lambda.py) names them with `lambda_error_type`, the same rule.
"""

from __future__ import annotations

# -- sent with SendTaskFailure by the engine; matched by the wave Tasks' Retry (compile/asl.py)
WAVE_FAILED = "Wave.Failed"  # the job failed: the spec's --retries budget
WAVE_INFRASTRUCTURE_FAILED = "Wave.InfrastructureFailed"  # the cluster/scheduler failed: recoveries budget
WAVE_CONFIGURATION_FAILED = "Wave.ConfigurationFailed"  # the job cannot run as configured: never retried
WAVE_CANCELLED = "Wave.Cancelled"
WAVE_LOST = "Wave.Lost"  # the scheduler no longer knows the job
TRIGGER_FAILED = "Trigger.Failed"
WAVE_ERRORS = (WAVE_FAILED, WAVE_INFRASTRUCTURE_FAILED, WAVE_CONFIGURATION_FAILED, WAVE_CANCELLED, WAVE_LOST)

# -- what `run.failed` fails an execution with (cleanup's result). A Fail state's Error may not begin with
# `States.` (AWS answers States.Runtime "Custom Error Names MUST NOT begin with the prefix 'States.'"), so
# cleanup turns Step Functions' own names into these.
WAVE_TIMED_OUT = "Wave.TimedOut"  # a Task ran past its TimeoutSeconds / HeartbeatSeconds
RUN_FAILED = "Run.Failed"  # any other Step Functions error with no root cause in the ledger
# How a timed-out wave's attempt ends in the ledger when --no-cancel-on-timeout keeps its job: the error
# `state 'x' timed out; <this>` (engine/cleanup.py writes it; the run report marks that wave `left_running`).
JOB_LEFT_RUNNING = "its job is left running (--no-cancel-on-timeout)"

# -- StopExecution / a local interrupt: why a run was stopped from outside
RUN_CANCELLED = "Run.Cancelled"  # npa-workflow cancel
RUN_INTERRUPTED = "Run.Interrupted"  # Ctrl-C / SIGTERM of a local run or serve

# -- Step Functions' own names (the States Language), as the machine matches them
STATES_ALL = "States.ALL"
STATES_RUNTIME = "States.Runtime"
STATES_TIMEOUT = "States.Timeout"
STATES_HEARTBEAT_TIMEOUT = "States.HeartbeatTimeout"
STATES_TASK_FAILED = "States.TaskFailed"
STATES_EXCEED_TOLERATED_FAILURE = "States.ExceedToleratedFailureThreshold"
TIMEOUTS = (STATES_TIMEOUT, STATES_HEARTBEAT_TIMEOUT)

# -- the Lambda service's own errors (AWS recommends retrying them on every Lambda Task): the four of AWS's
# "Handle transient Lambda service exceptions" retrier and aws-cdk-lib's LambdaInvoke default `retryOnServiceExceptions`
# (ClientExecutionTimeout: the invoke call itself timed out), plus throttling (TooManyRequests: a fan-out past the
# account's concurrency, see docs/deploy.md).
LAMBDA_SERVICE_EXCEPTION = "Lambda.ServiceException"  # the service failed the invocation (also the twin's)
LAMBDA_SERVICE_ERRORS = (
    "Lambda.ClientExecutionTimeoutException",
    LAMBDA_SERVICE_EXCEPTION,
    "Lambda.AWSLambdaException",
    "Lambda.SdkClientException",
    "Lambda.TooManyRequestsException",
)
# The Lambda runtime's name for a function that ran past its configured timeout.
LAMBDA_TIMED_OUT = "Sandbox.Timedout"


def lambda_error_type(exc: BaseException) -> str:
    """The `errorType` AWS's Python runtime reports for an unhandled `exc`: its class's `__name__`."""
    return type(exc).__name__


class EngineError(Exception):
    """An error an engine function raises into the machine; its error name is its class name."""

    @classmethod
    def error_name(cls) -> str:
        return cls.__name__


class RunNotFound(EngineError):
    """The Task names a run that is not frozen under `runs/<run-id>/`."""


class DecisionMissing(EngineError):
    """The decision artifact a loop exit or branch reads does not exist (and no decision may be assumed)."""


class DecisionMalformed(EngineError):
    """The decision artifact is not a decision (or its URI is not an S3 URI)."""


class StepNotResolvable(EngineError):
    """The state's step cannot be resolved at this visit (a token does not resolve)."""


LAMBDA_ERRORS: tuple[type[EngineError], ...] = (RunNotFound, DecisionMissing, DecisionMalformed, StepNotResolvable)
