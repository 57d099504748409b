"""Where moto 5.2.5's Step Functions interpreter differs from AWS, the twin behaves as AWS does: every correction of
an answer of moto's interpreter lives here, each naming the AWS behaviour it restores and the seam it uses. (moto's
interpreter is patched elsewhere for speed, the same answers: `embedded_aws.moto_speedups`; and for what a runtime on
one machine needs: waits that do not count a paused process, `embedded_aws.pause_aware_waits`; an execution's end
told, `embedded_aws.execution_ends`; a stop remembered, `local.serve.record_stops`.)

`moto_fixes()` applies them all for as long as a local stack lives (moto's classes are process-wide):

1. A fresh task token per attempt (AWS mints one token per Task attempt; moto reuses the first).
2. A token completed while the Task's Lambda still runs counts (AWS: the outcome is kept; moto waits for a
   heartbeat and ignores it).
3. A Distributed Map fails when its failed children exceed the tolerated failure threshold, with
   `States.ExceedToleratedFailureThreshold`, and starts no further children; moto counts the failure and lets
   the Map succeed. AWS: the Map fails when the failures exceed `ToleratedFailureCount` *or*
   `ToleratedFailurePercentage`; a field that is not set tolerates nothing only when neither is set (the
   default tolerance is 0), so an explicit `ToleratedFailureCount: 0` beside a percentage still fails at the
   first failure.
4. An inline Map whose iteration failed with a `States.*` error fails with that error (AWS: e.g. a member Task
   past its deadline fails the Map with `States.Timeout`, which the Map's Catch sees); moto fails it with
   `States.Runtime`, "Custom Error Names MUST NOT begin with the prefix 'States.'".
5. A Task whose heartbeat did not come within `HeartbeatSeconds` fails with `States.HeartbeatTimeout` (AWS's
   documented name for it); moto fails it with `States.Timeout`, the name of a Task past its `TimeoutSeconds`,
   so the run's error said the state "ran past its deadline" when its watch had stopped beating. AWS documents
   `States.Timeout` as "a Task state either ran longer than the TimeoutSeconds value, or failed to send a
   heartbeat for a period longer than the HeartbeatSeconds value", and `States.HeartbeatTimeout` as the
   specific case: so a `Retry` or `Catch` whose `ErrorEquals` names `States.Timeout` matches a missed heartbeat
   too, as one naming `States.HeartbeatTimeout` (or `States.ALL`) does, in any machine.
6. A stopped execution is ABORTED (AWS: `StopExecution` "stops an execution", whose status becomes ABORTED), and
   what was running in it ends with it. moto stops the program, but a Map iteration's Task still waiting on its
   token runs on to its `TimeoutSeconds`/`HeartbeatSeconds`, records a `TaskTimedOut`, and its failure replaces
   the stopped state: the execution ended FAILED with `States.Timeout`.

The tests name each behaviour, one per documented sentence, with generic ASL:
tests/integration/test_moto_lambda_adapter.py (the interpreter alone) and tests/e2e/test_moto_fixes.py (runs).
Each fix also has a canary there (`test_canary_moto_*`): the same probe on plain moto, asserting moto still answers
the wrong way; when an upgraded moto answers as AWS does, the canary fails with "moto now ... itself: remove fix N".
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from npa_workflow.protocol.errors import STATES_EXCEED_TOLERATED_FAILURE

__all__ = ["moto_fixes"]

# AWS's cause for a Map run that failed with STATES_EXCEED_TOLERATED_FAILURE
EXCEED_TOLERATED_FAILURE_CAUSE = "The specified tolerated failure threshold was exceeded"


@contextlib.contextmanager
def moto_fixes() -> Iterator[None]:
    with task_token_fixes(), distributed_map_failures(), map_iteration_errors(), heartbeat_timeout_name(), \
            stopped_executions_abort():
        yield
@contextlib.contextmanager
def task_token_fixes() -> Iterator[None]:
    """Fixes 1 and 2: two fixes to moto 5.2.5's `waitForTaskToken` Tasks, active only while a local run's server lives.

    1. A fresh task token per attempt. moto creates the token once when the state is entered, and its
       `Retry` loop re-evaluates the Task with that same token, whose callback already holds the failure
       that caused the retry: the retried attempt "fails" at once with the old error. Step Functions gives
       each attempt its own token. Seam: `StateTaskService._eval_execution(self, env)`, called once per
       attempt with the attempt's frame; attempts after the first mint a new token and callback endpoint.
    2. A token completed while the Task's Lambda is still running counts. With `HeartbeatSeconds`, moto
       sets the heartbeat endpoint up after the Lambda returned and then waits for a heartbeat, ignoring an
       outcome that arrived earlier (the launch of a replayed wave succeeds its token at once): the Task
       hangs until its heartbeat times out. Seam: `CallbackEndpoint.setup_heartbeat_endpoint`; an endpoint
       that already has an outcome starts notified, so the wait reads the outcome at once.
    """
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.resource import ResourceCondition
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_callback import (
        StateTaskServiceCallback,
    )
    from moto.stepfunctions.parser.asl.eval.callback.callback import CallbackEndpoint

    own_eval = StateTaskServiceCallback.__dict__.get("_eval_execution")
    inherited_eval = StateTaskServiceCallback._eval_execution
    original_setup = CallbackEndpoint.setup_heartbeat_endpoint

    def _eval_execution(self: Any, env: Any) -> None:
        if getattr(self.resource, "condition", None) == ResourceCondition.WaitForTaskToken:
            context = env.states.context_object
            if (context.context_object_data.get("State") or {}).get("RetryCount", 0) > 0:
                env.callback_pool_manager.add(context.update_task_token())
        return inherited_eval(self, env)

    def setup_heartbeat_endpoint(self: Any, heartbeat_seconds: int) -> Any:
        endpoint = original_setup(self, heartbeat_seconds)
        if self.get_outcome() is not None:
            endpoint.notify()
        return endpoint

    StateTaskServiceCallback._eval_execution = _eval_execution
    CallbackEndpoint.setup_heartbeat_endpoint = setup_heartbeat_endpoint
    try:
        yield
    finally:
        CallbackEndpoint.setup_heartbeat_endpoint = original_setup
        if own_eval is None:
            del StateTaskServiceCallback._eval_execution
        else:
            StateTaskServiceCallback._eval_execution = own_eval


class _UnsetCount(int):
    """moto's value (0) of a `ToleratedFailureCount` the Map does not declare, marked as not set."""


class _UnsetPercentage(float):
    """moto's value (0.0) of a `ToleratedFailurePercentage` the Map does not declare, marked as not set."""


def _exceeded(record: Any, failed: int) -> bool:
    """AWS: a Map run fails when its failed children exceed ToleratedFailureCount or ToleratedFailurePercentage
    (of the total number of items), each that is set; with neither set the tolerance is 0 (one failure fails
    it). moto reads an absent field as 0, which `from_state_props` below marks as not set."""
    count, percentage, total = getattr(record, "npa_tolerance", (_UnsetCount(0), _UnsetPercentage(0.0), 0))
    count_set, percentage_set = not isinstance(count, _UnsetCount), not isinstance(percentage, _UnsetPercentage)
    if not count_set and not percentage_set:
        return failed > 0
    return ((count_set and failed > int(count))
            or (percentage_set and total > 0 and failed * 100.0 / total > float(percentage)))


@contextlib.contextmanager
def distributed_map_failures() -> Iterator[None]:
    """Fix 3. Seams: `StateMap.from_state_props(self, state_props)` (a tolerance field the Map does not declare
    keeps moto's default, marked as not set), `DistributedIterationComponent._map_run(self, env, eval_input)`
    (records the Map's tolerance on its map run record) and
    `DistributedItemProcessorWorker._eval_job(self, env, job)`, which counts a failed
    child in `map_run_record.item_counter.failed` and leaves `job.job_output` None. When that failure exceeds the
    tolerance, the job's output becomes a `FailureEventException` named `States.ExceedToleratedFailureThreshold`:
    the job pool then stops handing out items and `_map_run` raises it, so the Map state's Catch (or the
    execution) sees the error AWS reports, with the child's own error and cause in the cause."""
    from moto.stepfunctions.parser.api import ExecutionFailedEventDetails, HistoryEventType
    from moto.stepfunctions.parser.asl.component.common.error_name.failure_event import (
        FailureEvent,
        FailureEventException,
    )
    from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name import StatesErrorName
    from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name_type import (
        StatesErrorNameType,
    )
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration.distributed_iteration_component import (  # noqa: E501
        DistributedIterationComponent,
    )
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration.itemprocessor.distributed_item_processor_worker import (  # noqa: E501
        DistributedItemProcessorWorker,
    )
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.state_map import StateMap
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.tolerated_failure import (
        ToleratedFailureCountDecl,
        ToleratedFailureCountInt,
        ToleratedFailurePercentage,
        ToleratedFailurePercentageDecl,
    )
    from moto.stepfunctions.parser.asl.eval.event.event_detail import EventDetails
    from moto.stepfunctions.parser.asl.eval.program_state import ProgramError

    original_map_run = DistributedIterationComponent._map_run
    original_eval_job = DistributedItemProcessorWorker._eval_job
    original_props = StateMap.__dict__["from_state_props"]

    def from_state_props(self: Any, state_props: Any) -> None:
        original_props(self, state_props)
        if state_props.get(ToleratedFailureCountDecl) is None:
            self.tolerated_failure_count_decl = ToleratedFailureCountInt(_UnsetCount(0))
        if state_props.get(ToleratedFailurePercentageDecl) is None:
            self.tolerated_failure_percentage_decl = ToleratedFailurePercentage(_UnsetPercentage(0.0))

    def _map_run(self: Any, env: Any, eval_input: Any) -> None:
        items = env.stack[-1] if env.stack else []
        eval_input.map_run_record.npa_tolerance = (
            eval_input.tolerated_failure_count, eval_input.tolerated_failure_percentage, len(items or []))
        return original_map_run(self, env, eval_input)

    def _eval_job(self: Any, env: Any, job: Any) -> None:
        record = self._map_run_record
        failed_before = record.item_counter.failed.get()
        original_eval_job(self, env, job)
        failed = record.item_counter.failed.get()
        if failed == failed_before or not _exceeded(record, failed):
            return
        child = env.program_state()
        detail = child.error if isinstance(child, ProgramError) and child.error else {}
        cause = EXCEED_TOLERATED_FAILURE_CAUSE
        if detail.get("error") or detail.get("cause"):
            cause += f" (item {job.job_index}: {detail.get('error', '')}: {detail.get('cause', '')})"
        job.job_output = FailureEventException(FailureEvent(
            env=env,
            error_name=StatesErrorName(typ=StatesErrorNameType.StatesExceedToleratedFailureThreshold),
            event_type=HistoryEventType.MapRunFailed,
            event_details=EventDetails(executionFailedEventDetails=ExecutionFailedEventDetails(
                error=STATES_EXCEED_TOLERATED_FAILURE, cause=cause)),
        ))

    DistributedIterationComponent._map_run = _map_run
    DistributedItemProcessorWorker._eval_job = _eval_job
    StateMap.from_state_props = from_state_props
    try:
        yield
    finally:
        DistributedIterationComponent._map_run = original_map_run
        DistributedItemProcessorWorker._eval_job = original_eval_job
        StateMap.from_state_props = original_props


@contextlib.contextmanager
def map_iteration_errors() -> Iterator[None]:
    """Fix 4: a Map iteration's `States.*` error reaches the Map as itself.

    moto 5.2.5's iteration worker names a failed iteration's error with `CustomErrorName(error)`, whose
    constructor refuses the `States.` prefix (custom names may not use it): the `ValueError` turns the Map's
    failure into `States.Runtime`, so a member that timed out (`States.Timeout`) or whose Lambda failed
    (`States.TaskFailed`) fails its group with moto's complaint instead of the member's error, and the
    group's Catch cannot tell a timeout. Seam: the module-level name `CustomErrorName` in moto's
    `iteration_worker`, replaced by a factory giving a `States.*` name moto's own `StatesErrorName` (any other
    name still a `CustomErrorName`)."""
    from moto.stepfunctions.parser.asl.component.common.error_name.custom_error_name import CustomErrorName
    from moto.stepfunctions.parser.asl.component.common.error_name.error_name import ErrorName
    from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name import StatesErrorName
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration import iteration_worker

    def error_name_of(error_name: str | None) -> ErrorName:
        if error_name is not None and error_name.startswith("States."):
            try:
                return StatesErrorName.from_name(error_name)
            except ValueError:  # a States.* name moto's grammar does not list: keep its text
                named = CustomErrorName(None)
                ErrorName.__init__(named, error_name)
                return named
        return CustomErrorName(error_name)

    original = iteration_worker.CustomErrorName
    iteration_worker.CustomErrorName = error_name_of
    try:
        yield
    finally:
        iteration_worker.CustomErrorName = original


@contextlib.contextmanager
def heartbeat_timeout_name() -> Iterator[None]:
    """Fix 5: a missed heartbeat is `States.HeartbeatTimeout`, not `States.Timeout`.

    moto 5.2.5 raises its `HeartbeatTimeoutError` (a `TimeoutError`) when no heartbeat came within
    `HeartbeatSeconds`, and `StateTask._from_error` names every `TimeoutError` `States.Timeout`. AWS names it
    `States.HeartbeatTimeout` (its TaskTimedOut event carries that error): cleanup then says the watch stopped
    beating, not that the state ran past its deadline. Compiled machines catch `States.ALL`, and cleanup accepts
    both names (`protocol.errors.TIMEOUTS`). Seam: `StateTaskServiceCallback._from_error(self, env, ex)`, which
    every `waitForTaskToken` Task goes through.

    And, as on AWS, `States.Timeout` in a Retry's or Catch's `ErrorEquals` matches the heartbeat's error as well
    (moto compares names for equality, so renaming alone would make a `States.Timeout` retrier miss it). Seam:
    `ErrorEqualsDecl._eval_body(self, env)`, which pops the error name and pushes whether it matches."""
    from moto.stepfunctions.parser.api import HistoryEventType, TaskTimedOutEventDetails
    from moto.stepfunctions.parser.asl.component.common.error_name.error_equals_decl import ErrorEqualsDecl
    from moto.stepfunctions.parser.asl.component.common.error_name.failure_event import FailureEvent
    from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name import StatesErrorName
    from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name_type import (
        StatesErrorNameType,
    )
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_callback import (
        StateTaskServiceCallback,
    )
    from moto.stepfunctions.parser.asl.eval.callback.callback import HeartbeatTimeoutError
    from moto.stepfunctions.parser.asl.eval.event.event_detail import EventDetails

    original = StateTaskServiceCallback.__dict__["_from_error"]
    original_equals = ErrorEqualsDecl.__dict__["_eval_body"]
    name = StatesErrorNameType.StatesHeartbeatTimeout
    heartbeat, timeout = StatesErrorName(typ=name), StatesErrorName(typ=StatesErrorNameType.StatesTimeout)

    def _eval_body(self: Any, env: Any) -> None:
        if env.stack and env.stack[-1] == heartbeat and timeout in self.error_names:
            env.stack.pop()
            env.stack.append(True)
            return
        original_equals(self, env)

    def _from_error(self: Any, env: Any, ex: Exception) -> Any:
        if isinstance(ex, HeartbeatTimeoutError):
            return FailureEvent(
                env=env, error_name=StatesErrorName(typ=name), event_type=HistoryEventType.TaskTimedOut,
                event_details=EventDetails(taskTimedOutEventDetails=TaskTimedOutEventDetails(error=name.to_name())),
            )
        return original(self, env, ex)

    StateTaskServiceCallback._from_error = _from_error
    ErrorEqualsDecl._eval_body = _eval_body
    try:
        yield
    finally:
        StateTaskServiceCallback._from_error = original
        ErrorEqualsDecl._eval_body = original_equals


@contextlib.contextmanager
def stopped_executions_abort() -> Iterator[None]:
    """Fix 6: once an execution is stopped, nothing in it fails or times out any more.

    Seams: `Environment.set_error(self, error)`, which moto calls for a failure whatever the program's state (a
    stopped environment, and its frames, stay stopped: the execution ends ABORTED with `ExecutionAborted`), and
    `ExecutionState._evaluate_with_timeout(self, env)`, where a Task's wait ends with a timeout: in a stopped
    environment its error is dropped (no `TaskTimedOut` event, no Retry or Catch), as on AWS, where the stop
    ends the Task."""
    from moto.stepfunctions.parser.asl.component.state.exec.execute_state import ExecutionState
    from moto.stepfunctions.parser.asl.eval.environment import Environment
    from moto.stepfunctions.parser.asl.eval.program_state import ProgramStopped

    original_set_error = Environment.__dict__["set_error"]
    original_evaluate = ExecutionState.__dict__["_evaluate_with_timeout"]

    def set_error(self: Any, error: Any) -> None:
        if isinstance(self._program_state, ProgramStopped):
            return
        original_set_error(self, error)

    def _evaluate_with_timeout(self: Any, env: Any) -> None:
        try:
            original_evaluate(self, env)
        except Exception:
            if not isinstance(env._program_state, ProgramStopped):
                raise
            env.stack.append(None)  # the state's (never used) result: the program ends at the stop

    Environment.set_error = set_error
    ExecutionState._evaluate_with_timeout = _evaluate_with_timeout
    try:
        yield
    finally:
        Environment.set_error = original_set_error
        ExecutionState._evaluate_with_timeout = original_evaluate
