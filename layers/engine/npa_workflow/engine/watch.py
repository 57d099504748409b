"""watch: one pass over every active wave of every run — one executor call for their statuses —
completing task tokens (success, `Wave.Failed`, `Wave.InfrastructureFailed`, …) and sending
heartbeats to running ones; then a re-count of every waiting trigger prefix.

A wave succeeds only when its job succeeded *and* every declared output exists and is
non-empty. Every transition goes through the ledger's conditional finish, so the watch pass,
cleanup and reap can race without completing a token twice.

Order (docs/cloud.md, "The watch under load and outages"; bench/watch_outage.py): every due heartbeat
first, from the ledger alone — a slow or unreachable SkyPilot never delays one; then the scheduler round
(capped reconciles, the one batched observation) under a share of the budget; then what it showed,
recorded wave by wave; then the cancels and reaps the heartbeats found due. The whole pass runs inside
`engine.budget.within()`; with a budget it holds the ledger's watch lease, so ticks never overlap.

Scale (docs/cloud.md, bench/watch_scale.py): after the one executor call, each wave is tended on
a thread pool (boto3 clients are thread-safe), finished waves first; the pass stops taking new work
when its budget (the Lambda's remaining time, less a margin) runs out and leaves the rest to the next
tick. A wave costs calls only when something changed: the ledger is written when its status or job
id changes, a heartbeat is sent when one is due (`heartbeat_every_seconds`), not every tick; a wave
needing no call is counted without a trip through the pool, and the active-index Query reads only
`WATCH_FIELDS`. A lost reap is handled once per run per pass (`_Pass.orphan_check`, `_Pass.reap_run`), and so
is a cancel whose StopExecution never came (`_Pass.finish_cancel`, read only when a heartbeat is due).

Isolation: one wave's failure never stops the pass. An output the watch role cannot read (S3 403)
fails that wave alone as `Wave.ConfigurationFailed`, naming the URI and the missing permission; any
other error is reported (`WatchReport.errors`) and the wave is tended again next tick.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import logging
import os
import threading
import time
import uuid
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from npa_workflow.engine import budget, errors
from npa_workflow.engine.cleanup import reap, record_success
from npa_workflow.engine.context import Engine
from npa_workflow.engine.ports import (
    ExecutionNotFound,
    Observation,
    SchedulerUnreachable,
    StoreAccessDenied,
    TrackedJob,
)
from npa_workflow.engine.watermarks import recount_watches
from npa_workflow.ledger import ErrorCategory, RunStatus, WaveAttempt, WaveStatus
from npa_workflow.protocol import environment

LOG = logging.getLogger(__name__)

_FAILURES = {
    "failed": (errors.WAVE_FAILED, ErrorCategory.WORKLOAD),
    "infrastructure_failed": (errors.WAVE_INFRASTRUCTURE_FAILED, ErrorCategory.INFRASTRUCTURE),
    "configuration_failed": (errors.WAVE_CONFIGURATION_FAILED, ErrorCategory.CONFIGURATION),
    "cancelled": (errors.WAVE_CANCELLED, ErrorCategory.CANCELLED),
    "lost": (errors.WAVE_LOST, ErrorCategory.INFRASTRUCTURE),
}
WORKERS = 32  # I/O-bound calls (DynamoDB, Step Functions, S3): threads, not cores
BUDGET_MARGIN_SECONDS = 5.0  # left to the handler after the pass (logging, metrics, the return)
# Of the budget left after the heartbeats, what the scheduler round (reconciles, the observation) may take: the
# rest records what it showed, so a pass against a slow scheduler still advances.
SCHEDULER_SHARE = 0.6
RECONCILES_PER_TICK = 20  # find-by-name calls (one scheduler queue call each) per tick
# Seconds between heartbeats of one token (0 = every pass): see `_heartbeat_every`.
HEARTBEAT_EVERY_ENV = "NPA_WORKFLOW_HEARTBEAT_EVERY_SECONDS"
# What tending a wave reads of its attempt (the rest, e.g. the growing timeline, stays in the table).
WATCH_FIELDS = ("run_id", "wave_key", "state", "attempt", "job_name", "job_id", "request_id", "task_token",
                "status", "outputs")


@dataclass
class WatchReport:
    active: int = 0
    running: int = 0
    succeeded: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    triggers_completed: int = 0
    heartbeats: int = 0
    due: int = 0  # tokens whose heartbeat was due when the pass began (every one is beaten, budget permitting)
    deferred: int = 0  # waves left to the next tick: the pass ran out of budget
    errors: list[str] = field(default_factory=list)  # one line per wave whose tending failed
    reaped: list[str] = field(default_factory=list)  # runs whose ended execution still had jobs (reap missed)
    cancelled: list[str] = field(default_factory=list)  # jobs of runs whose recorded cancel was never carried out
    reconcile_deferred: int = 0  # unknown launch outcomes over this tick's cap (`RECONCILES_PER_TICK`)
    scheduler_unreachable: str = ""  # the scheduler could not be reached this tick: why
    scheduler_unreachable_since: str = ""  # ... and since when (the ledger's outage record)
    skipped: bool = False  # another tick held the watch lease: this one did nothing


class HeartbeatClock:
    """When each token was last heartbeaten (this process: a warm Lambda keeps it across ticks, a cold
    one starts empty and beats every token once — never later than due)."""

    def __init__(self) -> None:
        self._last: dict[str, float] = {}
        self._lock = threading.Lock()

    def due(self, token: str, every: float, now: float) -> bool:
        with self._lock:
            last = self._last.get(token)
        return last is None or every <= 0 or now - last >= every

    def beat(self, token: str, now: float) -> None:
        with self._lock:
            self._last[token] = now

    def keep_only(self, tokens: set[str]) -> None:
        with self._lock:
            for token in set(self._last) - tokens:
                del self._last[token]


_CLOCK = HeartbeatClock()


class _OutageChecks:
    """When a pass that reached the scheduler looks for an outage record to clear: always after this process
    recorded one, else at most every `every` seconds per ledger. A watch Lambda passes once a tick, so it looks
    every pass; the local runtime passes at every job's end, where a consistent GetItem a pass was one ledger
    call more per wave (bench/local_overhead.py). An outage another process recorded is cleared within `every`."""

    def __init__(self, every: float = 30.0) -> None:
        self.every = every
        self._lock = threading.Lock()
        self._looked: weakref.WeakKeyDictionary[Any, float] = weakref.WeakKeyDictionary()  # ledger -> when looked

    def due(self, ledger: Any) -> bool:
        now = time.monotonic()
        with self._lock:
            looked = self._looked.get(ledger)
            if looked is not None and now - looked < self.every:
                return False
            self._looked[ledger] = now
            return True

    def recorded(self, ledger: Any) -> None:
        with self._lock:
            self._looked.pop(ledger, None)


_OUTAGE_CHECKS = _OutageChecks()


def _key(wave: WaveAttempt) -> str:
    return f"{wave.run_id}|{wave.wave_key}|{wave.attempt}"


def missing_outputs(engine: Engine, outputs: list[str]) -> list[str]:
    return [uri for uri in outputs if not engine.store.non_empty(uri)]


EXECUTION_GONE = "DOES_NOT_EXIST"  # `_ExecutionCheck.ended` when DescribeExecution answers ExecutionDoesNotExist


@dataclass(frozen=True)
class _ExecutionCheck:
    ended: str | None  # the ended execution's status; None: still running, or nothing to describe
    execution_arn: str = ""


def _orphan_reason(check: _ExecutionCheck, state: str) -> str:
    execution = check.execution_arn.rsplit(":", 1)[-1]
    if check.ended == EXECUTION_GONE:
        return (f"execution {execution} no longer exists (its state machine was deleted: a deploy removed or "
                f"renamed the spec) and state '{state}' still had a job; cancelled by the watch pass")
    return (f"execution {execution} ended {check.ended} and state '{state}' still had a job: the reap event was "
            "missed; cancelled by the watch pass")


class _Once:
    """A value computed by the first thread that asks; the pool's other threads asking meanwhile wait for it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._value: bool | None = None

    def value(self, compute: Callable[[], bool]) -> bool:
        with self._lock:
            if self._value is None:
                self._value = compute()
            return self._value


class _Pass:
    def __init__(self, engine: Engine, deadline: float | None, heartbeat_every: float, clock: HeartbeatClock,
                 now: Callable[[], float]) -> None:
        self.engine = engine
        self.deadline = deadline
        self.heartbeat_every = heartbeat_every
        self.clock = clock
        self.now = now
        self.report = WatchReport()
        self.lock = threading.Lock()
        self.orphan_lock = threading.Lock()
        self.run_checks: dict[str, _ExecutionCheck] = {}  # see `orphan_check`: each run's execution described once
        self.ended_runs: dict[str, tuple[WaveAttempt, _ExecutionCheck]] = {}  # runs to reap (a wave of each)
        self.cancels: dict[str, _Once] = {}  # see `cancel_recorded`: each run's CANCEL item read once per pass
        self.to_cancel: dict[str, WaveAttempt] = {}  # job id → its wave: a recorded cancel never carried out

    def out_of_time(self) -> bool:
        return self.deadline is not None and self.now() >= self.deadline

    def left(self) -> float:
        return float("inf") if self.deadline is None else max(0.0, self.deadline - self.now())

    def add(self, **deltas: int) -> None:
        with self.lock:
            for name, delta in deltas.items():
                setattr(self.report, name, getattr(self.report, name) + delta)

    def append(self, name: str, value: str) -> None:
        with self.lock:
            getattr(self.report, name).append(value)

    def guarded(self, what: str, call: Callable[[], object]) -> None:
        """One piece of work whose trouble is reported (`WatchReport.errors`) and stops nothing else."""
        try:
            call()
        except Exception as exc:  # noqa: BLE001 - one wave's (or run's) trouble must not stop the others
            LOG.warning("watch: %s: %s", what, exc)
            self.append("errors", f"{what}: {type(exc).__name__}: {exc}")

    # -- the tick ------------------------------------------------------------------------------
    def run(self, workers: int) -> None:
        """Heartbeats first, from the ledger alone (a slow or unreachable scheduler never delays them: a missed
        HeartbeatSeconds fails every waiting Task, healthy jobs included); then the scheduler, in one batched
        observation under a share of the budget; then what it showed, recorded wave by wave; then the cancels
        and reaps the heartbeats found due. Whatever the budget cuts off is the next tick's."""
        engine = self.engine
        waves = [w for w in engine.ledger.active_waves(fields=WATCH_FIELDS) if _followed(w)]
        self.clock.keep_only({w.task_token for w in waves if w.task_token})
        at = self.now()
        due = [w for w in waves if w.task_token and self.clock.due(w.task_token, self.heartbeat_every, at)]
        self.report.due = len(due)
        _pool_each(due, self.heartbeat, workers)
        with budget.within(self.left() * SCHEDULER_SHARE) if self.deadline is not None else contextlib.nullcontext():
            waves = self.reconcile_some(waves)
            active = [w for w in waves if w.job_id or w.request_id]
            self.report.active = len(active)
            observations = self.observe(active) if active else {}
        work = [(w, observations[_key(w)]) for w in active if _key(w) in observations]
        work = [(w, obs) for w, obs in work if not self.quiet(w, obs)]
        # Finished waves first: completing a token moves a run on.
        work.sort(key=lambda pair: pair[1].outcome in ("pending", "running"))
        _pool_each(work, lambda pair: self.tend(*pair), workers)
        for job_id, wave in list(self.to_cancel.items()):
            if wave.run_id not in self.ended_runs:
                self.guarded(f"run {wave.run_id} cancel of job {job_id}", functools.partial(self.finish_cancel, wave))
        for run_id, (wave, check) in list(self.ended_runs.items()):
            self.guarded(f"run {run_id} reap", functools.partial(self.reap_run, wave, check))
        if not self.out_of_time():
            try:
                self.report.triggers_completed = recount_watches(engine)
            except Exception as exc:  # noqa: BLE001 - a trigger's trouble must not hide the waves' results
                LOG.warning("watch: trigger re-count: %s", exc)
                self.report.errors.append(f"trigger re-count: {type(exc).__name__}: {exc}")

    def observe(self, active: list[WaveAttempt]) -> dict[str, Observation]:
        """The one executor call. Unreachable: what it read, every other wave pending, and the outage recorded
        in the ledger (since when, and why) for cleanup to name in a timed-out state's error; reachable again:
        the record cleared."""
        ledger = self.engine.ledger
        tracked = [TrackedJob(key=_key(w), job_id=w.job_id, request_id=w.request_id) for w in active]
        try:
            observations = self.engine.executor.observe(tracked)
        except SchedulerUnreachable as exc:
            self.report.scheduler_unreachable = str(exc)
            _OUTAGE_CHECKS.recorded(ledger)
            try:
                self.report.scheduler_unreachable_since = ledger.record_scheduler_outage(str(exc))
            except Exception as record_exc:  # noqa: BLE001 - the heartbeats went out; the record is a courtesy
                self.append("errors", f"scheduler outage record: {type(record_exc).__name__}: {record_exc}")
            return exc.observations
        if _OUTAGE_CHECKS.due(ledger) and ledger.scheduler_outage() is not None:
            ledger.clear_scheduler_outage()
        return observations

    def heartbeat(self, wave: WaveAttempt) -> None:
        """SendTaskHeartbeat for a due token: the ledger's word alone, no scheduler call. "Gone" (the execution
        ended, or the token was replaced): the run is checked (`orphan_check`, Step Functions only) and, when
        its execution ended, its other waves are not beaten and the run is reaped after the scheduler round."""
        token = wave.task_token
        if not token or wave.run_id in self.ended_runs:
            return  # a run whose execution ended this pass: its tokens are gone
        if self.out_of_time():
            self.add(deferred=1)
            return
        at = self.now()

        def beat() -> None:
            alive = self.engine.callbacks.heartbeat(token)
            self.clock.beat(token, at)
            self.add(heartbeats=1)
            if alive is False:
                self.orphan_check(wave)
            elif wave.job_id and self.cancel_recorded(wave.run_id):
                with self.lock:
                    self.to_cancel.setdefault(wave.job_id, wave)

        self.guarded(f"run {wave.run_id} state '{wave.state}' ({wave.wave_key}) heartbeat", beat)

    def cancel_recorded(self, run_id: str) -> bool:
        """`npa-workflow cancel` wrote the run's CANCEL item. Read when a heartbeat is due (not every tick), once
        per run per pass: the check costs a GetItem per run at the heartbeat's cadence."""
        with self.lock:
            once = self.cancels.setdefault(run_id, _Once())
        return once.value(lambda: self.engine.ledger.cancel_requested(run_id) is not None)

    def finish_cancel(self, wave: WaveAttempt) -> None:
        """A cancel recorded while the run still has a running job: the `cancel` that wrote the CANCEL item died
        before StopExecution (Ctrl-C, kill -9, a lost connection), or the stop's reap has not come yet. Cancel
        the job by its exact id: the next tick sees it CANCELLED and fails its token as `Wave.Cancelled`, which
        the machine does not retry, so its Catch ends the run through cleanup with the cancel's reason (launches
        already refuse). Cancelling a job twice is harmless: the scheduler keeps its first end."""
        LOG.info("watch: run %s was cancelled (CANCEL item) but job %s of state '%s' still runs: cancelling it",
                 wave.run_id, wave.job_id, wave.state)
        self.engine.executor.cancel([wave.job_id or ""])
        self.append("cancelled", wave.job_id or "")

    def orphan_check(self, wave: WaveAttempt) -> None:
        """The heartbeat found the token gone (TaskDoesNotExist / InvalidToken / TaskTimedOut). If the run's
        execution has ended, the reap event was lost (EventBridge delivers "Execution Status Change" best
        effort; async invocations are dropped after two retries): the run is reaped after the scheduler round
        (`reap_run`). A token replaced by a later launch (redrive, resume) is not an orphan.

        Once per run per pass: a lost reap of a 10,000-member group answers 10,000 heartbeats "gone"; the
        run's execution is described once and the run reaped once (reap cancels every job of the run), and
        the other waves of that run cost no heartbeat. Orphans are rare, so they take one lock."""
        with self.orphan_lock:
            if wave.run_id in self.ended_runs:
                return
            if wave.run_id not in self.run_checks:
                self.run_checks[wave.run_id] = self._check_execution(wave.run_id)
            check = self.run_checks[wave.run_id]
            if check.ended is None:
                return  # live (a Task timed out: its Catch, cleanup, ends the attempt), or nothing to describe
            current = self.engine.ledger.get_attempt(wave.run_id, wave.wave_key, wave.attempt)
            if current is not None and current.task_token == wave.task_token:
                self.ended_runs[wave.run_id] = (wave, check)

    def reap_run(self, wave: WaveAttempt, check: _ExecutionCheck) -> None:
        """Cancel the jobs of a run whose execution ended without its reap, by exact id, and record why."""
        ended = check.ended or ""
        if ended == "SUCCEEDED":
            record_success(self.engine, wave.run_id)
        reap(self.engine, wave.run_id, _orphan_reason(check, wave.state),
             RunStatus(ended) if ended not in ("SUCCEEDED", EXECUTION_GONE) else RunStatus.ABORTED)
        self.append("reaped", wave.run_id)

    def _check_execution(self, run_id: str) -> _ExecutionCheck:
        executions = self.engine.executions
        run = self.engine.ledger.get_run(run_id)
        if executions is None or run is None or not run.execution_arn:
            return _ExecutionCheck(None)
        try:
            status = executions.describe(run.execution_arn).status
        except ExecutionNotFound:
            # ExecutionDoesNotExist: AWS deletes a machine's executions with it (a deploy that removed or renamed
            # the spec deletes its machine), and it keeps an ended execution 90 days. Either way nothing will end
            # this run's waves any more: reap them.
            return _ExecutionCheck(EXECUTION_GONE, run.execution_arn)
        return _ExecutionCheck(None if status == "RUNNING" else status, run.execution_arn)

    # -- one wave ------------------------------------------------------------------------------
    def quiet(self, wave: WaveAttempt, obs: Observation) -> bool:
        """True (and counted) when tending the wave would make no call: still pending/running as the ledger
        says, the same job. Most waves of a steady tick; they never reach the thread pool, whose hand-over
        per wave costs more than deciding this (their heartbeats went out first)."""
        if obs.outcome not in ("pending", "running") or (obs.job_id and obs.job_id != wave.job_id):
            return False
        if obs.outcome == "running" and wave.status != WaveStatus.RUNNING:
            return False
        if wave.run_id in self.ended_runs:
            return True
        if obs.outcome == "running":
            self.add(running=1)
        return True

    def tend(self, wave: WaveAttempt, obs: Observation) -> None:
        if self.out_of_time():
            self.add(deferred=1)
            return
        if wave.run_id in self.ended_runs:
            return  # its execution ended: the reap below records its jobs' ends
        self.guarded(f"run {wave.run_id} state '{wave.state}' ({wave.wave_key})", lambda: self._tend(wave, obs))

    def _tend(self, wave: WaveAttempt, obs: Observation) -> None:
        engine = self.engine
        if obs.job_id and obs.job_id != wave.job_id:  # an asynchronous launch produced its job id
            engine.ledger.record_submission(wave.run_id, wave.wave_key, wave.attempt, job_id=obs.job_id)
            wave = wave.model_copy(update={"job_id": obs.job_id})
        if obs.outcome in ("pending", "running"):
            if obs.outcome == "running":
                self.add(running=1)
                if wave.status != WaveStatus.RUNNING:  # unchanged: no write
                    engine.ledger.mark_status(wave.run_id, wave.wave_key, wave.attempt, WaveStatus.RUNNING,
                                              at=obs.started_at)
            return
        self._finish(wave, obs)

    def _finish(self, wave: WaveAttempt, obs: Observation) -> None:
        engine = self.engine
        if obs.outcome == "succeeded":
            try:
                missing = missing_outputs(engine, wave.outputs)
            except StoreAccessDenied as exc:
                # Retrying the job cannot fix a permission: a configuration failure, named precisely.
                self._fail(wave, obs, "configuration_failed",
                           f"its declared output cannot be checked: {exc} — or write the output under the "
                           "stack's bucket ({{run.bucket}})")
                return
            if not missing:
                # The token first, then the ledger: if SendTaskSuccess fails (throttled, a crash), the attempt is
                # still active and the next tick delivers it again; a second delivery answers "gone", harmlessly.
                # (A failure goes the other way round: the ledger first, so the Retry's launch sees it ended.)
                if wave.task_token:
                    engine.callbacks.succeed(wave.task_token, {"state": wave.state, "job_id": wave.job_id})
                if engine.ledger.finish_attempt(wave.run_id, wave.wave_key, wave.attempt, WaveStatus.SUCCEEDED,
                                                started_at=obs.started_at, ended_at=obs.ended_at):
                    self.append("succeeded", wave.wave_key)
                return
            self._fail(wave, obs, "failed", "completed without declared output(s): " + ", ".join(missing))
            return
        self._fail(wave, obs, obs.outcome, obs.message or obs.outcome.replace("_", " "))

    def _fail(self, wave: WaveAttempt, obs: Observation, outcome: str, message: str) -> None:
        error_name, category = _FAILURES[outcome]
        text = f"state '{wave.state}' (job {wave.job_id or '?'}): {message}"
        status = WaveStatus.CANCELLED if outcome == "cancelled" else WaveStatus.FAILED
        if self.engine.ledger.finish_attempt(wave.run_id, wave.wave_key, wave.attempt, status, text, category,
                                             started_at=obs.started_at, ended_at=obs.ended_at):
            self.append("failed", wave.wave_key)
            if wave.task_token:
                self.engine.callbacks.fail(wave.task_token, error_name, text)

    # -- launches whose outcome is unknown ------------------------------------------------------
    def reconcile_some(self, waves: list[WaveAttempt]) -> list[WaveAttempt]:
        """Adopt the job of an unknown launch outcome if the scheduler has exactly one with the attempt's name
        (one queue call each, so at most `RECONCILES_PER_TICK` a tick, and none once the scheduler is
        unreachable or the budget spent); the others wait for a later tick (heartbeaten: their Task's timeout
        bounds the wait)."""
        unknown = [w for w in waves if w.status == WaveStatus.UNKNOWN and not w.job_id and not w.request_id
                   and w.job_name and w.run_id not in self.ended_runs]
        adopted: dict[str, WaveAttempt] = {}
        for wave in unknown[:RECONCILES_PER_TICK]:
            if self.out_of_time():
                break
            try:
                found = self.engine.executor.find_by_name(wave.job_name or "")
            except Exception as exc:  # noqa: BLE001 - unreachable or refused: the next tick asks again
                self.append("errors", f"run {wave.run_id} state '{wave.state}' ({wave.wave_key}) reconcile: "
                                      f"{type(exc).__name__}: {exc}")
                break
            if len(found) == 1:
                self.engine.ledger.record_submission(wave.run_id, wave.wave_key, wave.attempt, job_id=found[0],
                                                     note="adopted by name after an unknown launch outcome")
                adopted[_key(wave)] = wave.model_copy(update={"job_id": found[0]})
        self.report.reconcile_deferred = max(0, len(unknown) - RECONCILES_PER_TICK)
        return [adopted.get(_key(w), w) for w in waves]


def _number(name: str) -> float | None:
    raw = os.environ.get(name, "").strip()
    try:
        return float(raw) if raw else None
    except ValueError:
        return None


def _heartbeat_every(explicit: float | None) -> float:
    """Explicit, else NPA_WORKFLOW_HEARTBEAT_EVERY_SECONDS, else 40 % of the machines' HeartbeatSeconds
    (NPA_WORKFLOW_HEARTBEAT_SECONDS, what the stack compiled with): with the watch ticking at most every
    H/3 (the stack keeps H ≥ three ticks), two beats are then at most 0.4 H + H/3 < H apart. Neither set:
    every pass (the local runtime, whose heartbeats may be a second)."""
    if explicit is not None:
        return explicit
    every = _number(HEARTBEAT_EVERY_ENV)
    if every is not None:
        return every
    heartbeat = _number(environment.HEARTBEAT_SECONDS)  # the compiled HeartbeatSeconds (infra sets it)
    return 0.4 * heartbeat if heartbeat else 0.0


def _pool_each(items: list[Any], fn: Callable[[Any], None], workers: int) -> None:
    """`fn` on every item, on up to `workers` threads, each in a copy of this thread's context: the invocation's
    budget (engine/budget.py) is a context variable, and a pool's threads do not inherit it."""
    if workers <= 1 or len(items) <= 1:
        for item in items:
            fn(item)
        return
    context = contextvars.copy_context()
    with ThreadPoolExecutor(max_workers=min(workers, len(items)), thread_name_prefix="watch") as pool:
        list(pool.map(lambda item: context.copy().run(fn, item), items))


def _followed(wave: WaveAttempt) -> bool:
    """A wave the pass keeps alive: its job (or launch request) is known, or its launch outcome is unknown and
    its job may exist under its exact name (reconciled; heartbeaten meanwhile, its Task's timeout bounds that)."""
    return bool(wave.job_id or wave.request_id or (wave.status == WaveStatus.UNKNOWN and wave.job_name))


def watch_pass(engine: Engine, *, budget_seconds: float | None = None, heartbeat_every_seconds: float | None = None,
               workers: int = WORKERS, clock: HeartbeatClock | None = None) -> WatchReport:
    """One tick. `budget_seconds`: the time this pass may take (the watch Lambda passes its remaining time,
    `context.get_remaining_time_in_millis()`); None = no limit (the local runtime). With a budget the tick
    first takes the ledger's watch lease (`take_watch_lease`) for that long: a tick that finds another one
    running leaves the pass to it (`WatchReport.skipped`), so ticks never overlap."""
    now = time.monotonic
    deadline = None if budget_seconds is None else now() + max(0.0, budget_seconds - BUDGET_MARGIN_SECONDS)
    tick = _Pass(engine, deadline, _heartbeat_every(heartbeat_every_seconds), clock or _CLOCK, now)
    holder = None
    if budget_seconds is not None:
        holder = uuid.uuid4().hex
        if not engine.ledger.take_watch_lease(holder, budget_seconds):
            tick.report.skipped = True
            return tick.report
    try:
        with budget.within(deadline - now()) if deadline is not None else contextlib.nullcontext():
            tick.run(workers)
    finally:
        if holder is not None:
            engine.ledger.release_watch_lease(holder)
    try:  # one write per run whose waves this pass changed: what `status --watch` polls (DynamoLedger.note_changes)
        engine.ledger.note_changes()
    except Exception as exc:  # noqa: BLE001 - a watcher's hint; the waves themselves are recorded
        LOG.warning("watch: noting changed runs: %s", exc)
    return tick.report
