"""launch: the Task of every wave. Submits the wave's job once, records (job id, token), returns.

Idempotent by the ledger's launch lock: a retried Lambda call or a redriven execution adopts
the recorded attempt (new token, same job); a wave already succeeded in this run is replayed
(the token completes at once); only a Step Functions `Retry` after a failure opens a new attempt.

A cancelled run launches nothing: `npa-workflow cancel` records the request in the ledger before it stops
anything, every launch reads it first (and fails its token with `Wave.Cancelled`), and a launch that
submitted while the cancel was being recorded reads it again after recording its job and cancels that job
by exact id. The job's identity (the attempt's job name) is in the ledger before the submit; the local
executor makes the job's own identity durable before it can start (local_jobs/executor.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from npa_workflow.engine import errors
from npa_workflow.engine.context import Engine
from npa_workflow.engine.ports import JobRequest, SubmitError
from npa_workflow.engine.runs import FrozenRun
from npa_workflow.engine.visits import Visit, step_of, visit_of
from npa_workflow.ledger import AttemptExists, ErrorCategory, LedgerConflict, WaveAttempt, WaveStatus
from npa_workflow.plan.model import PlanStep
from npa_workflow.protocol.payloads import WaveTask
from npa_workflow.render import launch_job, launch_job_name

_SUBMIT_FAILURES = {
    "configuration": (errors.WAVE_CONFIGURATION_FAILED, ErrorCategory.CONFIGURATION),
    "infrastructure": (errors.WAVE_INFRASTRUCTURE_FAILED, ErrorCategory.INFRASTRUCTURE),
}


def _workdir(run: Any) -> Path | None:
    """Where a local job starts. A local `run` froze its folder (render.code.spec_code_root); a run the inbox
    started (a `serve` stack) froze none: the spec's `workdir`, else the catalog's, taken relative to the folder
    `serve` works in (the deployed specs' folder, beside its catalog); None: that folder itself. A SkyPilot task
    does not use it: it starts in the staged code (`code_uri`)."""
    if run.options.workdir:
        return Path(run.options.workdir)
    named = run.loaded.spec.workdir or run.loaded.catalog.workdir
    return Path(named) if named else None


def launch(engine: Engine, task: WaveTask | Mapping[str, Any]) -> dict[str, Any]:
    task = WaveTask.of(task)
    run = engine.runs.load(task.run_id, task.execution)
    visit = visit_of(run, task.state, task.loops, task.group)
    token = task.token
    requested = engine.ledger.cancel_requested(visit.run_id)
    if requested:
        message = f"state '{visit.state}': not launched: the run was cancelled (requested at {requested})"
        engine.callbacks.fail(token, errors.WAVE_CANCELLED, message)
        return {"wave_key": visit.wave_key, "cancelled": True, "error": message}
    # Every attempt of the state (all loop rounds): its wave's latest one, and the fence sequence, in one read.
    history = engine.ledger.state_attempts(visit.run_id, visit.state)
    latest = max((a for a in history if a.wave_key == visit.wave_key), key=lambda a: a.attempt, default=None)
    if latest is not None and latest.status == WaveStatus.SUCCEEDED:
        # Resume or redrive: the wave's work is done; record the replay, complete the token.
        engine.ledger.append_timeline(visit.run_id, visit.wave_key, latest.attempt, "REPLAYED",
                                      note=task.execution)
        engine.callbacks.succeed(token, {"state": visit.state, "replayed": True})
        return {"wave_key": visit.wave_key, "attempt": latest.attempt, "replayed": True}
    if latest is not None and latest.status not in (WaveStatus.FAILED, WaveStatus.CANCELLED):
        return _adopt(engine, run, visit, latest, token)
    attempt = 1 if latest is None else latest.attempt + 1
    step = step_of(run, visit)
    try:
        record = engine.ledger.begin_attempt(
            visit.run_id, visit.wave_key, state=visit.state, attempt=attempt, group=visit.group or None,
            iteration=visit.iteration, job_name=_job_name(visit, attempt), task_token=token,
            outputs=[o["uri"] for o in step.outputs],
        )
    except AttemptExists as exc:
        return _adopt(engine, run, visit, exc.existing, token)
    # This attempt is the state's next: none of the state launches while one of its attempts is live.
    return _submit(engine, run, visit, record, token, step, fence_sequence=len(history) + 1)


def _job_name(visit: Visit, attempt: int) -> str:
    return launch_job_name(visit.run_id, visit.state, visit.loops, attempt)


def _fence_sequence(engine: Engine, visit: Visit) -> int:
    """Grows with every wave attempt of this state in the run (loop rounds, retries): a stale job of an
    earlier round is told from the current one. Attempts of one state never launch at once. (A launch that
    began the attempt counts it from what it read before; an adopted attempt without a job, here.)"""
    return engine.ledger.state_attempt_count(visit.run_id, visit.state)


def _secret_names(run: FrozenRun, visit: Visit) -> tuple[str, ...]:
    """`--secret-env` names of the run, plus the `secretEnv` of the state's tool (what the preflight checked)."""
    from npa_workflow.engine.preflight import state_secrets

    return state_secrets(run.loaded, visit.state, run.options.secret_names)


def _submit(
    engine: Engine, run: FrozenRun, visit: Visit, record: WaveAttempt, token: str, step: PlanStep | None = None,
    fence_sequence: int | None = None,
) -> dict[str, Any]:
    step = step or step_of(run, visit)
    name = record.job_name or _job_name(visit, record.attempt)
    secret_names = _secret_names(run, visit)
    document = launch_job(
        step, workflow=run.loaded.spec.name, run_id=visit.run_id, loops=visit.loops, attempt=record.attempt,
        fence_sequence=fence_sequence if fence_sequence is not None else _fence_sequence(engine, visit),
        secret_names=secret_names, extra_env=dict(engine.job_env),
        name=name, code_uri=run.options.code_uri,
    )
    # One environment: a local job is started with exactly the variables the SkyPilot task carries (the
    # catalog's env, the identity of protocol.environment, the engine's job env); secrets travel by name. The
    # document goes on as data: the executor that sends it writes it once.
    request = JobRequest(
        name=name, step=step, env=document.envs, document=document, secret_names=secret_names,
        workdir=_workdir(run), code_uri=run.options.code_uri,
    )
    try:
        submission = engine.executor.submit(request)
    except SubmitError as exc:
        if exc.category == "unknown":
            # Keep the attempt active as UNKNOWN: the watch pass reconciles it by job name.
            engine.ledger.mark_status(visit.run_id, visit.wave_key, record.attempt, WaveStatus.UNKNOWN,
                                      note=str(exc)[:500])
            return {"wave_key": visit.wave_key, "attempt": record.attempt, "unknown": str(exc)}
        error_name, category = _SUBMIT_FAILURES[exc.category]
        message = f"state '{visit.state}': could not launch: {exc}"
        engine.ledger.finish_attempt(visit.run_id, visit.wave_key, record.attempt, WaveStatus.FAILED, message,
                                     category)
        engine.callbacks.fail(token, error_name, message)
        return {"wave_key": visit.wave_key, "attempt": record.attempt, "error": message}
    try:
        engine.ledger.record_submission(
            visit.run_id, visit.wave_key, record.attempt, job_id=submission.job_id,
            request_id=submission.request_id, job_name=name,
        )
    except LedgerConflict:
        # The run was stopped while we submitted: the job must not outlive it.
        if submission.job_id:
            engine.executor.cancel([submission.job_id])
        raise
    if submission.job_id and engine.ledger.cancel_requested(visit.run_id):
        # The cancel was recorded while we submitted: it may have looked for jobs before ours was recorded.
        engine.executor.cancel([submission.job_id])
    return {"wave_key": visit.wave_key, "attempt": record.attempt, "job_id": submission.job_id}


def _adopt(engine: Engine, run: FrozenRun, visit: Visit, attempt: WaveAttempt, token: str) -> dict[str, Any]:
    """A second launch of a live attempt (Lambda retry, redrive, resume): keep its job, take the new token."""
    updated = engine.ledger.set_token(visit.run_id, visit.wave_key, attempt.attempt, token)
    if updated.job_id is None and updated.request_id is None:
        # The first launch died between taking the lock and recording a job. Submit only if the
        # scheduler has no job of this exact name and the earlier submit never reached it (an
        # UNKNOWN outcome may still surface): otherwise leave it to the watch pass to reconcile.
        found = engine.executor.find_by_name(updated.job_name or _job_name(visit, attempt.attempt))
        if not found and updated.status != WaveStatus.UNKNOWN:
            return _submit(engine, run, visit, updated, token)
        if len(found) == 1:
            engine.ledger.record_submission(visit.run_id, visit.wave_key, attempt.attempt, job_id=found[0])
    return {"wave_key": visit.wave_key, "attempt": attempt.attempt, "adopted": True, "job_id": updated.job_id}
