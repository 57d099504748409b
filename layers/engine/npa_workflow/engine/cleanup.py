"""cleanup and reap: never leave a job running after a failure, a timeout or an abort.

`cleanup` is the Catch target inside an execution: it records the root cause (the first failed
wave's recorded error — Step Functions may not carry it: moto drops `cause`) in the ledger first, then
cancels every active job of the run by exact id and waits until the scheduler confirms they ended —
best effort, within its own budget: the scheduler's trouble never becomes the execution's error.
`reap` does the same for an execution stopped from outside (EventBridge status change).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any, TypedDict

from npa_workflow.engine import budget
from npa_workflow.engine.context import Engine
from npa_workflow.engine.errors import RUN_FAILED, WAVE_FAILED, WAVE_TIMED_OUT
from npa_workflow.engine.ports import Observation, TrackedJob
from npa_workflow.ledger import ErrorCategory, RunError, RunStatus, WaveAttempt, WaveStatus
from npa_workflow.protocol import errors
from npa_workflow.protocol.payloads import CleanupTask

LOG = logging.getLogger(__name__)
# What cleanup's cancel may take (the cleanup function's timeout is 300 s: this, plus the one SkyPilot exchange in
# flight when it runs out — connect 5 s + read 30 s — plus the ledger writes, stays well inside it).
CANCEL_BUDGET_SECONDS = 120.0


class _JobTimes(TypedDict, total=False):
    """When a cancelled wave's job started and ended, as the executor saw it (`Ledger.finish_attempt`'s keywords)."""

    started_at: str | None
    ended_at: str | None


def cancel_active(engine: Engine, run_id: str, reason: str) -> list[str]:
    """Cancel every active wave of the run by exact job id; returns the job ids cancelled (a job found to have
    ended on its own before the signal reached it is recorded as it ended, and is not among them).

    Only a cancel the scheduler confirms ends the attempts; otherwise they stay active as UNKNOWN,
    so nothing relaunches the wave while its job may still run, and the watch pass keeps looking.
    """
    waves = engine.ledger.open_attempts(run_id)
    job_of = {w.wave_key: w.job_id for w in waves if w.job_id}
    for w in waves:  # a launch with an unknown outcome: its job, if any, is found by its exact name
        if not w.job_id and w.job_name:
            found = engine.executor.find_by_name(w.job_name)
            if len(found) == 1:
                job_of[w.wave_key] = found[0]
    job_ids = list(dict.fromkeys(job_of.values()))
    confirmed = True
    if job_ids:
        engine.executor.cancel(job_ids)
        confirmed = engine.executor.confirm_cancelled(job_ids, engine.cancel_confirm_seconds)
    ended = _real_ends(engine, job_of) if job_ids and confirmed else {}
    not_cancelled: set[str] = set()
    for w in waves:
        if w.wave_key in job_of and not confirmed:
            engine.ledger.mark_status(w.run_id, w.wave_key, w.attempt, WaveStatus.UNKNOWN,
                                      note=f"{reason}: cancel requested, not yet confirmed by the scheduler")
            continue
        seen = ended.get(w.wave_key)
        times: _JobTimes = {"started_at": seen.started_at, "ended_at": seen.ended_at} if seen else {}
        if seen is not None and seen.outcome not in ("cancelled", "running", "pending"):
            not_cancelled.add(job_of[w.wave_key])
        if seen is not None and seen.outcome == "succeeded":
            # The job exited 0 before the signal reached it: say so, never "cancelled". SUCCEEDED only with its
            # declared outputs present, as the watch would record it (a resume replays a SUCCEEDED wave unchecked).
            missing = _missing_outputs(engine, w.outputs)
            if not missing:
                engine.ledger.finish_attempt(w.run_id, w.wave_key, w.attempt, WaveStatus.SUCCEEDED,
                                             note=f"{reason}: the job had already exited 0", **times)
            else:
                engine.ledger.finish_attempt(w.run_id, w.wave_key, w.attempt, WaveStatus.FAILED,
                                             f"{reason}; the job had already exited 0 {missing}",
                                             ErrorCategory.CANCELLED, **times)
            continue
        if seen is not None and seen.outcome not in ("cancelled", "running", "pending"):
            engine.ledger.finish_attempt(w.run_id, w.wave_key, w.attempt, WaveStatus.FAILED,
                                         f"{reason}; the job had already ended: {seen.message or seen.outcome}",
                                         ErrorCategory.CANCELLED, **times)
            continue
        status = WaveStatus.CANCELLED if w.wave_key in job_of else WaveStatus.FAILED
        engine.ledger.finish_attempt(w.run_id, w.wave_key, w.attempt, status, reason, ErrorCategory.CANCELLED,
                                     **times)
    for mark in engine.ledger.watermarks(run_id):
        if mark.task_token and not mark.satisfied:
            engine.ledger.put_watermark(mark.model_copy(update={"task_token": None}))
    return [j for j in job_ids if j not in not_cancelled]


def _real_ends(engine: Engine, job_of: Mapping[str, str]) -> dict[str, Observation]:
    """What the scheduler says each job really did, once the cancel is confirmed: a job that finished on its
    own before the signal is recorded as it ended. Unreadable: `{}` (every attempt is recorded CANCELLED)."""
    try:
        return engine.executor.observe([TrackedJob(key=k, job_id=j, request_id=None) for k, j in job_of.items()])
    except Exception:  # noqa: BLE001 - the jobs are confirmed gone; only the wording of their end is lost
        return {}


def _missing_outputs(engine: Engine, outputs: list[str]) -> str:
    """'' when every declared output exists, else what is wrong (for the attempt's error)."""
    from npa_workflow.engine.watch import missing_outputs  # watch imports this module

    try:
        missing = missing_outputs(engine, outputs)
    except Exception as exc:  # noqa: BLE001 - unreadable is not "present": the wave is not SUCCEEDED
        return f"but its declared outputs cannot be checked: {exc}"
    return f"without declared output(s): {', '.join(missing)}" if missing else ""


def _root_cause(engine: Engine, run_id: str) -> tuple[str, str] | None:
    """The first failure among each wave's latest attempt: a failed attempt that a later one of the same wave
    replaced (a Step Functions Retry, or a resume after a revoked decision) is not what failed this time."""
    latest: dict[str, WaveAttempt] = {}
    for w in engine.ledger.attempts(run_id):
        if w.wave_key not in latest or w.attempt > latest[w.wave_key].attempt:
            latest[w.wave_key] = w
    failed = [w for w in latest.values()
              if w.status == WaveStatus.FAILED and w.error and w.error_category != ErrorCategory.CANCELLED]
    if not failed:
        return None
    first = min(failed, key=lambda w: w.ended_at or "")
    return first.state, first.error or ""


def _readable_cause(cause: str) -> str:
    """A Lambda error arrives as its JSON error body: keep the message a person can act on."""
    try:
        body = json.loads(cause)
    except ValueError:
        return cause
    if isinstance(body, dict) and body.get("errorMessage"):
        return str(body["errorMessage"])
    return cause


def leave_running(engine: Engine, run_id: str, reason: str) -> list[str]:
    """--no-cancel-on-timeout: end the attempts in the ledger (so reap skips them) but keep the jobs."""
    waves = engine.ledger.open_attempts(run_id)
    for w in waves:
        engine.ledger.finish_attempt(w.run_id, w.wave_key, w.attempt, WaveStatus.FAILED, reason,
                                     ErrorCategory.TIMEOUT)
    return [w.job_id for w in waves if w.job_id]


def left_running_text(job_ids: list[str]) -> str:
    """What a run left running on purpose says: which jobs, and the command that stops each by exact id."""
    # A SkyPilot job id is a number; cancelling it needs the API server (a local job id starts `local-`).
    commands = "; ".join(f"`npa-workflow jobs cancel {j}{' --skypilot-endpoint URL' if j.isdigit() else ''}`"
                         for j in job_ids)
    return f"job(s) still running (--no-cancel-on-timeout): {', '.join(job_ids)}; stop with {commands}"


def _member_failure(cause: str) -> tuple[str, str] | None:
    """The failed child's (error, cause) a Map's `States.ExceedToleratedFailureThreshold` cause carries, as the twin
    writes it (`… (item N: ERROR: CAUSE)`, embedded_aws/moto_fixes.py); None when it names none (AWS's own cause)."""
    head, found, detail = cause.partition(" (item ")
    if not found or not detail.endswith(")"):
        return None
    _, _, rest = detail[:-1].partition(": ")
    error, _, text = rest.partition(": ")
    return (error.strip(), _readable_cause(text.strip())) if error.strip() else None


def _deadline_text(owner: str, error_name: str, deadline: dict[str, Any], member_of_map: bool) -> str:
    """Which state ran past which deadline, and how to raise it."""
    timeout, heartbeat = deadline.get("timeoutSeconds"), deadline.get("heartbeatSeconds")
    who = f"a member of group '{owner}'" if member_of_map else f"state '{owner}'"
    if error_name == errors.STATES_HEARTBEAT_TIMEOUT:
        return (f"{who} sent no heartbeat for {heartbeat or '?'} s (States.HeartbeatTimeout): the watch function "
                "did not see its job alive — check the watch schedule and the watch function's logs")
    limit = f" of {timeout} s" if timeout else ""
    # AWS's cause names no member: say what is known, no more
    if member_of_map and error_name == errors.STATES_EXCEED_TOLERATED_FAILURE:
        return (f"{who} ended its child execution without recording a wave failure ({error_name}), as a member "
                f"past its deadline{limit} does: its own error is in the group's Map Run (failed child executions); "
                "if it timed out, raise `timeoutSeconds` on the state, or `--max-wait-seconds` for the run")
    return (f"{who} timed out: it ran past its deadline{limit} ({error_name}); raise it with `timeoutSeconds` "
            "on the state, or `--max-wait-seconds` for the run")


def _best_effort_cancel(engine: Engine, run_id: str, reason: str) -> tuple[list[str], str]:
    """`cancel_active` within `CANCEL_BUDGET_SECONDS`, never raising: (job ids cancelled, '' or what went wrong).
    A cancel that could not be carried out (the scheduler unreachable, the budget spent) leaves the attempts
    active: the watch follows their jobs, and reap (the execution's end event) and the watch's lost-reap check
    cancel them later by exact id. The run's end is the root cause, never the scheduler's trouble."""
    try:
        with budget.within(CANCEL_BUDGET_SECONDS):
            return cancel_active(engine, run_id, reason), ""
    except Exception as exc:  # noqa: BLE001 - the scheduler's (or network's) trouble must not become the run's error
        LOG.warning("cleanup: cancelling the jobs of run %s failed: %s: %s", run_id, type(exc).__name__, exc)
        return [], (f"cancelling its job(s) did not complete ({type(exc).__name__}: {exc}); the watch and reap "
                    "cancel them by exact id once the scheduler answers")


def cleanup(engine: Engine, task: CleanupTask | Mapping[str, Any]) -> dict[str, str]:
    """The Catch target. Returns the `{"error", "cause"}` that `run.failed` fails the execution with; the
    error is always a project name (`Wave.*`, `Decision.*`, …), never a `States.*` one.

    The root cause is recorded in the ledger first; cancelling the run's jobs comes after, best effort within its
    own budget (`_best_effort_cancel`): a scheduler that is down never turns the run's end into its error."""
    task = CleanupTask.of(task)
    run_id, owner = task.run_id, task.state
    cancelled_text = cancel_reason(engine, run_id)
    if cancelled_text is not None:
        # A cancelled run's Task fails with whatever ended its wait (the failed token, or its heartbeat/timeout
        # expiring: States.Timeout): that is not the run's story. It was cancelled; say so, once.
        run = engine.ledger.get_run(run_id)
        if run is not None and run.status == RunStatus.RUNNING:
            engine.ledger.update_run_status(run_id, RunStatus.ABORTED, RunError(state=None, message=cancelled_text))
        _best_effort_cancel(engine, run_id, cancelled_text)
        return {"error": errors.RUN_CANCELLED, "cause": cancelled_text}
    run = engine.ledger.get_run(run_id)
    if run is not None and run.status == RunStatus.ABORTED:
        # Stopped, and reaped already (AWS runs no Catch after StopExecution; moto does): keep the recorded end.
        _best_effort_cancel(engine, run_id, run.error.message if run.error else "the execution was stopped")
        return {"error": errors.RUN_INTERRUPTED, "cause": run.error.message if run.error else "stopped"}
    error = task.error
    error_name = str(error.get("Error") or errors.STATES_RUNTIME)
    cause = _readable_cause(str(error.get("Cause") or ""))
    root = _root_cause(engine, run_id)
    # A Distributed Map whose member failed fails as a whole with States.ExceedToleratedFailureThreshold (tolerated
    # failures: 0). A member that failed as a wave left its error in the ledger; one that timed out inside its
    # child execution did not.
    map_failed = error_name == errors.STATES_EXCEED_TOLERATED_FAILURE and root is None
    member = _member_failure(cause) if map_failed else None
    # A member that failed without a wave failure in the ledger: a timeout only when its own error says so (or,
    # as AWS's cause names no member, when nothing says otherwise); any other error is reported as itself.
    # (errors.TIMEOUTS: AWS names a missed heartbeat States.HeartbeatTimeout; moto and LocalStack say
    # States.Timeout for both.)
    member_timeout = map_failed and (member is None or member[0] in errors.TIMEOUTS)
    timed_out = error_name in errors.TIMEOUTS or member_timeout
    if timed_out:
        text = _deadline_text(owner, member[0] if member else error_name, task.deadline, member_timeout)
        state, message, name = owner, text + _outage_text(engine), WAVE_TIMED_OUT
    elif root is not None:
        (state, message), name = root, (error_name if not error_name.startswith("States.") else WAVE_FAILED)
    elif member is not None:
        member_error, member_cause = member
        state, name = owner, WAVE_FAILED
        message = f"a member of group '{owner}' failed: {member_error}" + (f": {member_cause}" if member_cause else "")
    else:
        state, message = owner, cause or f"state '{owner}' failed with {error_name}"
        name = RUN_FAILED if error_name.startswith("States.") else error_name
    failed = engine.ledger.update_run_status(run_id, RunStatus.FAILED, RunError(state=state, message=message))
    requested = engine.ledger.cancel_requested(run_id)
    if requested is not None and requested <= (failed.ended_at or ""):
        cancelled_text = f"cancelled with npa-workflow cancel (requested at {requested})"
        # `npa-workflow cancel` was recorded while this cleanup ran (after its first look): the run was ended by
        # the cancel, whatever its Task failed with. ABORTED, as every other interleaving records it.
        engine.ledger.update_run_status(run_id, RunStatus.ABORTED, RunError(state=None, message=cancelled_text))
        _best_effort_cancel(engine, run_id, cancelled_text)
        return {"error": errors.RUN_CANCELLED, "cause": cancelled_text}
    if timed_out and not engine.runs.options(run_id).cancel_on_timeout:
        left = leave_running(engine, run_id, f"state '{owner}' timed out; {errors.JOB_LEFT_RUNNING}")
        jobs, trouble = (left_running_text(left) if left else "no job was running"), ""
    else:
        reason = f"state '{owner}' {'timed out' if timed_out else 'failed'}: cancelled by cleanup"
        open_before = engine.ledger.open_attempts(run_id) if timed_out else []
        cancelled, trouble = _best_effort_cancel(engine, run_id, reason)
        jobs = f"cancelled job(s): {', '.join(cancelled) or 'none'}"
        finished = _succeeded_meanwhile(engine, open_before)
        if finished:
            # The job did its work within its deadline; what ran out was the wait for someone to say so. Blaming
            # the watch schedule or the deadline would send the user to the wrong place.
            message = (f"state '{owner}': its job {', '.join(finished)} exited 0, but the Task's wait ended "
                       f"({error_name}) before its end was reported (locally: the runtime was paused or starved; in "
                       "the cloud: the watch function's logs say why it did not report); the wave is recorded "
                       "SUCCEEDED: resume the run to go on from it")
    if timed_out or trouble:
        message = "; ".join(part for part in (message, jobs if timed_out else "", trouble) if part)
        engine.ledger.update_run_status(run_id, RunStatus.FAILED, RunError(state=state, message=message))
    return {"error": name, "cause": message}


def _succeeded_meanwhile(engine: Engine, attempts: list[Any]) -> list[str]:
    """The jobs among these open attempts that cleanup found to have exited 0 (it records them SUCCEEDED)."""
    done = []
    for w in attempts:
        now = engine.ledger.get_attempt(w.run_id, w.wave_key, w.attempt)
        if now is not None and now.status == WaveStatus.SUCCEEDED and now.job_id:
            done.append(now.job_id)
    return done


def _outage_text(engine: Engine) -> str:
    """A state that timed out while the watch could not reach the scheduler: say since when (the ledger's outage
    record, written by the watch pass) — the job itself may have been healthy."""
    try:
        outage = engine.ledger.scheduler_outage()
    except Exception:  # noqa: BLE001 - only the wording is lost
        return ""
    if outage is None:
        return ""
    since, last_error = outage
    return (f"; the SkyPilot API server was unreachable since {since} (last: {last_error[:200]}), so the watch "
            "could not follow the job")


def cancel_reason(engine: Engine, run_id: str) -> str | None:
    """The run's end when `npa-workflow cancel` asked for it (the ledger's CANCEL item), else None."""
    requested = engine.ledger.cancel_requested(run_id)
    return f"cancelled with npa-workflow cancel (requested at {requested})" if requested else None


def reap(engine: Engine, run_id: str, reason: str, status: RunStatus = RunStatus.ABORTED) -> list[str]:
    """End what is left of a run whose execution ended: its jobs, and its status if nothing recorded one. A run
    with a recorded cancel is ABORTED however its execution ended (FAILED through its Catch, TIMED_OUT, stopped),
    and a FAILED a cleanup wrote after the cancel was recorded becomes ABORTED too (`cancel` then reports it
    cancelled); a run that had ended before the cancel keeps its end."""
    requested = engine.ledger.cancel_requested(run_id)
    before = engine.ledger.get_run(run_id)
    ended_first = (before is not None and before.status != RunStatus.RUNNING
                   and (before.ended_at or "") < (requested or ""))
    by_cancel = requested is not None and not ended_first
    if by_cancel:
        reason, status = f"cancelled with npa-workflow cancel (requested at {requested})", RunStatus.ABORTED
    cancelled = cancel_active(engine, run_id, reason)
    run = engine.ledger.get_run(run_id)
    if run is not None and (run.status == RunStatus.RUNNING or (by_cancel and run.status == RunStatus.FAILED)):
        engine.ledger.update_run_status(run_id, status, RunError(state=None, message=reason))
    return cancelled


def record_success(engine: Engine, run_id: str) -> None:
    """The execution succeeded: the run's ledger item says so (status, list and report read it)."""
    run = engine.ledger.get_run(run_id)
    if run is not None and run.status == RunStatus.RUNNING:
        engine.ledger.update_run_status(run_id, RunStatus.SUCCEEDED)
