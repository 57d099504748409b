"""The function table: every Lambda function of the engine, once.

The compiler writes a Task's `FunctionName` as the slot's placeholder (`${LaunchFunctionArn}`); the CDK app
substitutes each deployed function's ARN for it (`DefinitionSubstitutions`), the twin and the inbox's ad-hoc
machines by text replacement (`substitute`). The CDK app creates one function per row with the row's handler,
timeout and memory; the twin deploys the same rows on moto; `cost` prices invocations at the row's memory.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from npa_workflow.protocol import environment as env

SKYPILOT = (env.SKYPILOT_ENDPOINT, env.SKYPILOT_TOKEN_SECRET_ARN, env.STEP_SECRETS_ARN)
INBOX = (env.STATE_MACHINES, env.ALLOW_AD_HOC, env.AD_HOC_MACHINE_PREFIX, env.AD_HOC_ROLE_ARN,
         env.AD_HOC_LOG_GROUP_ARN, env.HEARTBEAT_SECONDS, env.MAX_WAIT_SECONDS, env.WATCH_INTERVAL_SECONDS,
         env.MACHINE_ARN_PREFIX)


@dataclass(frozen=True)
class FunctionSlot:
    name: str  # `functions/<name>/handler.py`; the CDK construct ids and local function names derive from it
    description: str
    timeout_seconds: int
    memory_mb: int = 512
    machine_invoked: bool = False  # a compiled Task invokes it: it has an ARN placeholder
    env: tuple[str, ...] = env.ENGINE  # the variables it reads
    # Lambda ReservedConcurrentExecutions: None shares the account's unreserved pool (see ACCOUNT_CONCURRENCY below).
    reserved_concurrency: int | None = None

    @property
    def module(self) -> str:
        return f"functions.{self.name}.handler"

    @property
    def handler(self) -> str:
        """Lambda's `Handler`: the code asset's root is the import root of `functions`."""
        return f"{self.module}.handler"

    @property
    def placeholder_name(self) -> str:
        """`LaunchFunctionArn`: the key of the CDK app's DefinitionSubstitutions."""
        if not self.machine_invoked:
            raise KeyError(f"function {self.name!r} is not invoked by a state machine: it has no placeholder")
        return f"{self.name.title()}FunctionArn"

    @property
    def placeholder(self) -> str:
        """`${LaunchFunctionArn}`: what compiled ASL holds where the function's ARN goes."""
        return "${" + self.placeholder_name + "}"

    @property
    def arn_env(self) -> str:
        """The variable that tells the inbox this function's ARN (for the ad-hoc machines it creates)."""
        return f"NPA_WORKFLOW_{self.name.upper()}_FUNCTION_ARN"


# The launch function's time, in two parts. Its SkyPilot calls (the reconcile-by-name lookup, the submit) may spend
# LAUNCH_CALL_BUDGET_SECONDS in all: the handler opens that budget (npa_workflow/budget.py) as the time remaining less
# LAUNCH_MARGIN_SECONDS, which covers the one exchange in flight when the budget runs out (SkyPilotApi's connect 5 s
# + read 30 s timeouts) and the ledger write recording the outcome. Lambda kills a function at its timeout
# mid-call, with nothing recorded, so the timeout is the sum (tests/infra/test_infra_functions.py pins it).
LAUNCH_CALL_BUDGET_SECONDS = 80
# Concurrency (docs/deploy.md, "Concurrency"). An account runs 1,000 Lambda executions at once by default, and a
# Distributed Map of 10,000 members asks for 10,000 launches at once: without reservations the fan-out takes the
# whole pool and the control functions (inbox, trigger, decide, cleanup, reap) are throttled with it. Each of those
# reserves a little (which is also its ceiling); launch keeps the unreserved rest, and its throttled invocations are
# retried by the compiled Lambda retrier (compile/asl.py LAMBDA_RETRY) for long enough to drain the fan-out. Lambda
# keeps at least 100 units unreserved in an account.
ACCOUNT_CONCURRENCY = 1_000
MIN_UNRESERVED_CONCURRENCY = 100
LAUNCH_MARGIN_SECONDS = 40
LAUNCH = FunctionSlot("launch", "Submits a wave's SkyPilot job once and records (job id, task token)",
                      LAUNCH_CALL_BUDGET_SECONDS + LAUNCH_MARGIN_SECONDS, machine_invoked=True,
                      env=(*env.ENGINE, *SKYPILOT))
DECIDE = FunctionSlot("decide", "Reads a decision artifact from S3 and normalizes it for a Choice", 30,
                      machine_invoked=True, reserved_concurrency=10)
TRIGGER = FunctionSlot("trigger", "Registers a trigger watch; completes it on S3 Object Created events", 60,
                       machine_invoked=True, reserved_concurrency=20)
CLEANUP = FunctionSlot("cleanup", "Cancels a failed wave's jobs by exact id and records the run's failure", 300,
                       machine_invoked=True, env=(*env.ENGINE, *SKYPILOT), reserved_concurrency=20)
WATCH = FunctionSlot("watch", "Completes or heartbeats the task tokens of active waves (scheduled)", 120,
                     env=(*env.ENGINE, *SKYPILOT, env.HEARTBEAT_SECONDS))  # heartbeats when due (engine/watch.py)
REAP = FunctionSlot("reap", "Cancels the jobs of executions that failed, timed out or were stopped", 300,
                    env=(*env.ENGINE, *SKYPILOT), reserved_concurrency=10)
INBOX_FN = FunctionSlot("inbox", "Validates a spec dropped under inbox/ and starts its run", 120, 1024,
                        env=(*env.ENGINE, *INBOX, env.STEP_SECRETS_ARN,  # the preflight of secretEnv names
                             *(f.arn_env for f in (LAUNCH, DECIDE, TRIGGER, CLEANUP))),
                        reserved_concurrency=10)

FUNCTIONS: tuple[FunctionSlot, ...] = (INBOX_FN, LAUNCH, DECIDE, TRIGGER, WATCH, CLEANUP, REAP)
BY_NAME: Mapping[str, FunctionSlot] = {f.name: f for f in FUNCTIONS}
NAMES: tuple[str, ...] = tuple(f.name for f in FUNCTIONS)
# The functions compiled Tasks invoke, in the order the compiler's options list them.
MACHINE_INVOKED: tuple[FunctionSlot, ...] = tuple(f for f in FUNCTIONS if f.machine_invoked)


def slot(name: str) -> FunctionSlot:
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"no engine function {name!r} (known: {', '.join(NAMES)})") from None


def substitutions(arns: Mapping[str, str]) -> dict[str, str]:
    """{placeholder name: ARN} for every machine-invoked function, from {function name: ARN} (CDK's
    DefinitionSubstitutions; also what `substitute` replaces)."""
    return {f.placeholder_name: arns[f.name] for f in MACHINE_INVOKED}


def substitute(definition: Mapping[str, object] | str, arns: Mapping[str, str]) -> str:
    """A compiled definition (or its JSON text) with the functions' ARNs in place of their placeholders."""
    text = definition if isinstance(definition, str) else json.dumps(definition, sort_keys=True,
                                                                     separators=(",", ":"))
    for f in MACHINE_INVOKED:
        text = text.replace(f.placeholder, arns[f.name])
    return text
