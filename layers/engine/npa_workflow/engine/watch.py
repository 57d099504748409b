"""watch: one pass over every active wave of every run — one executor call for their statuses —
completing task tokens (success, `Wave.Failed`, `Wave.InfrastructureFailed`, …) and sending
heartbeats to running ones; then a re-count of every waiting trigger prefix.

A wave succeeds only when its job succeeded *and* every declared output exists and is
non-empty. Every transition goes through the ledger's conditional finish, so the watch pass,
cleanup and reap can race without completing a token twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from npa_workflow.engine import errors
from npa_workflow.engine.context import Engine
from npa_workflow.engine.ports import Observation, TrackedJob
from npa_workflow.engine.watermarks import recount_watches
from npa_workflow.ledger import ErrorCategory, WaveAttempt, WaveStatus

_FAILURES = {
    "failed": (errors.WAVE_FAILED, ErrorCategory.WORKLOAD),
    "infrastructure_failed": (errors.WAVE_INFRASTRUCTURE_FAILED, ErrorCategory.INFRASTRUCTURE),
    "configuration_failed": (errors.WAVE_CONFIGURATION_FAILED, ErrorCategory.CONFIGURATION),
    "cancelled": (errors.WAVE_CANCELLED, ErrorCategory.CANCELLED),
    "lost": (errors.WAVE_LOST, ErrorCategory.INFRASTRUCTURE),
}


@dataclass
class WatchReport:
    active: int = 0
    running: int = 0
    succeeded: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    triggers_completed: int = 0


def _key(wave: WaveAttempt) -> str:
    return f"{wave.run_id}|{wave.wave_key}|{wave.attempt}"


def missing_outputs(engine: Engine, outputs: list[str]) -> list[str]:
    return [uri for uri in outputs if not engine.store.non_empty(uri)]


def _finish(engine: Engine, wave: WaveAttempt, obs: Observation, report: WatchReport) -> None:
    if obs.outcome == "succeeded":
        missing = missing_outputs(engine, wave.outputs)
        if not missing:
            if engine.ledger.finish_attempt(wave.run_id, wave.wave_key, wave.attempt, WaveStatus.SUCCEEDED,
                                            started_at=obs.started_at, ended_at=obs.ended_at):
                report.succeeded.append(wave.wave_key)
                if wave.task_token:
                    engine.callbacks.succeed(wave.task_token, {"state": wave.state, "job_id": wave.job_id})
            return
        outcome, message = "failed", "completed without declared output(s): " + ", ".join(missing)
    else:
        outcome, message = obs.outcome, obs.message or obs.outcome.replace("_", " ")
    error_name, category = _FAILURES[outcome]
    text = f"state '{wave.state}' (job {wave.job_id or '?'}): {message}"
    status = WaveStatus.CANCELLED if outcome == "cancelled" else WaveStatus.FAILED
    if engine.ledger.finish_attempt(wave.run_id, wave.wave_key, wave.attempt, status, text, category,
                                    started_at=obs.started_at, ended_at=obs.ended_at):
        report.failed.append(wave.wave_key)
        if wave.task_token:
            engine.callbacks.fail(wave.task_token, error_name, text)


def _reconcile_unknown(engine: Engine, waves: list[WaveAttempt]) -> None:
    """A launch whose outcome is unknown: adopt the job if the scheduler has exactly one with the
    attempt's name; otherwise keep waiting (heartbeat) — the Task's timeout bounds the wait."""
    for wave in waves:
        if wave.status != WaveStatus.UNKNOWN or wave.job_id or wave.request_id or not wave.job_name:
            continue
        found = engine.executor.find_by_name(wave.job_name)
        if len(found) == 1:
            engine.ledger.record_submission(wave.run_id, wave.wave_key, wave.attempt, job_id=found[0],
                                            note="adopted by name after an unknown launch outcome")
        elif wave.task_token:
            engine.callbacks.heartbeat(wave.task_token)


def watch_pass(engine: Engine) -> WatchReport:
    report = WatchReport()
    _reconcile_unknown(engine, engine.ledger.active_waves())
    active = [w for w in engine.ledger.active_waves() if w.job_id or w.request_id]
    report.active = len(active)
    if active:
        observations = engine.executor.observe(
            [TrackedJob(key=_key(w), job_id=w.job_id, request_id=w.request_id) for w in active]
        )
        for wave in active:
            obs = observations.get(_key(wave))
            if obs is None:
                continue
            if obs.job_id and obs.job_id != wave.job_id:  # an asynchronous launch produced its job id
                engine.ledger.record_submission(wave.run_id, wave.wave_key, wave.attempt, job_id=obs.job_id)
                wave = wave.model_copy(update={"job_id": obs.job_id})
            if obs.outcome in ("pending", "running"):
                if obs.outcome == "running":
                    report.running += 1
                    engine.ledger.mark_status(wave.run_id, wave.wave_key, wave.attempt, WaveStatus.RUNNING,
                                              at=obs.started_at)
                if wave.task_token:
                    engine.callbacks.heartbeat(wave.task_token)
                continue
            _finish(engine, wave, obs, report)
    report.triggers_completed = recount_watches(engine)
    return report
