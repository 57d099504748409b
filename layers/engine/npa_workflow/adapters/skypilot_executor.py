"""The JobExecutor port over a SkyPilot API server: every wave is one managed job.

Launch is asynchronous on SkyPilot: `submit` returns the server's request id; the watch pass
turns the finished request into the job id (or a classified failure) and then follows the job
in one queue call for all active jobs. Before submitting, a job with exactly this name is
adopted instead (a retried launch never submits twice). Cancels are by exact id and count as
done only once the queue shows the job terminal.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from npa_workflow import redact
from npa_workflow.adapters.secrets import SecretMissing, SecretSource
from npa_workflow.adapters.skypilot_api import (
    SkyPilotApi,
    SkyPilotError,
    SkyPilotNotFound,
    SkyPilotRequestFailed,
    SkyPilotUnavailable,
    classify_error,
    classify_job,
)
from npa_workflow.engine import budget
from npa_workflow.engine.ports import (
    JobRequest,
    Observation,
    SchedulerUnreachable,
    Submission,
    SubmitError,
    TrackedJob,
)
from npa_workflow.timestamps import from_epoch

# Launch request ids per `GET /api/status`: each is a `request_ids=<uuid>` query parameter (~49 bytes), so 200 keep
# the request line near 10 KB, under the 16 KiB that uvicorn (h11) — SkyPilot's server — accepts for a request head.
STATUS_BATCH = 200
RESULT_WORKERS = 8  # concurrent `/api/get` reads of finished launches (each one round trip)


def _iso(epoch: float | None) -> str | None:
    return from_epoch(epoch) if epoch else None


def _category(error: BaseException) -> str:
    return "configuration" if classify_error(error) == "configuration_failed" else "infrastructure"


class SkyPilotExecutor:
    def __init__(self, api: SkyPilotApi, secrets: SecretSource, *, confirm_poll_seconds: float = 5.0) -> None:
        self.api = api
        self.secrets = secrets
        self.confirm_poll_seconds = confirm_poll_seconds

    def submit(self, job: JobRequest) -> Submission:
        try:
            existing = self.api.find_jobs_by_name(job.name)
            if existing:
                return Submission(job_id=str(min(r.job_id for r in existing)))
            document = job.document
            if document is None or document.name != job.name:
                raise SubmitError(f"job {job.name!r}: no SkyPilot document of that name to launch", "configuration")
            # The secrets' values go in as the document is written, once, right before it is sent; its header
            # names the job, so the client sends the text as it is.
            names = document.secret_names
            text = document.text(self.secrets.resolve(names) if names else None)
            return Submission(request_id=self.api.launch(text, job.name, named=True))
        except SecretMissing as exc:
            raise SubmitError(str(exc), "configuration") from None
        except SkyPilotUnavailable as exc:  # a 503's reason quotes the server's (or a proxy's) body, as below
            if exc.maybe_received:  # the server may have taken the launch: reconcile, never resend
                raise SubmitError(self._redacted(f"launch outcome unknown: {exc}"), "unknown") from None
            raise SubmitError(self._redacted(str(exc)), "infrastructure") from None
        except SkyPilotError as exc:  # the server may quote the document, which holds the secret values
            raise SubmitError(self._redacted(str(exc)), _category(exc)) from None

    def observe(self, jobs: list[TrackedJob]) -> dict[str, Observation]:
        """Every job in as few calls as the API allows: the launch requests not yet turned into a job id in one
        ``GET /api/status`` per `STATUS_BATCH` ids (its ``request_ids`` is a list), an ``/api/get`` only for a
        request that status shows finished (once in its life: the next pass has the job id), `RESULT_WORKERS`
        at a time, then one queue call for every job id. The first call that finds the server unreachable ends
        the round (each would wait out its retries): what was read is returned inside `SchedulerUnreachable`,
        the rest as pending. The invocation's budget (engine/budget.py) bounds every call."""
        out: dict[str, Observation] = {}
        job_of: dict[str, str] = {}
        waiting: dict[str, list[str]] = {}  # launch request id → the keys waiting on it
        for job in jobs:
            if job.job_id:
                job_of[job.key] = job.job_id
            elif job.request_id:
                waiting.setdefault(job.request_id, []).append(job.key)
        unreachable: SkyPilotUnavailable | None = None
        finished: list[str] = []
        ids = list(waiting)
        for first in range(0, len(ids), STATUS_BATCH):
            batch = ids[first:first + STATUS_BATCH]
            try:
                statuses = self.api.request_status(batch)
            except SkyPilotUnavailable as exc:
                unreachable = exc
                break  # the later batches (and the queue) wait for the next tick
            except SkyPilotError as exc:
                for rid in batch:
                    self._each(out, waiting[rid], Observation("pending", message=f"launch request not readable: {exc}"))
                continue
            for rid in batch:
                status = statuses.get(rid)
                if status is None:
                    self._each(out, waiting[rid], Observation(
                        "lost", message=f"SkyPilot request {rid} is unknown to {self.api.endpoint} (or purged)"))
                elif status == "CANCELLED":
                    self._each(out, waiting[rid], Observation(
                        "infrastructure_failed", message=f"SkyPilot launch request {rid} was cancelled on the server"))
                elif status in ("SUCCEEDED", "FAILED"):
                    finished.append(rid)
                else:
                    self._each(out, waiting[rid], Observation("pending", message="launch request in progress"))
        if finished and unreachable is None:
            unreachable = self._read_launches(finished, waiting, out, job_of)
        if job_of and unreachable is None:
            try:
                self._follow(job_of, out)
            except SkyPilotUnavailable as exc:
                unreachable = exc
            except SkyPilotError as exc:
                # A failed query says nothing about the jobs: report them as still pending this tick.
                for key, job_id in job_of.items():
                    out[key] = Observation("pending", job_id=job_id, message=f"queue not readable: {exc}")
        if unreachable is None:
            return out
        spent = unreachable.attempts == 0  # not sent: the invocation's budget ran out, the server is not to blame
        why = "not read this tick: its time budget ran out" if spent else f"SkyPilot unreachable: {unreachable}"
        for key, job_id in job_of.items():
            out.setdefault(key, Observation("pending", job_id=job_id, message=why))
        for keys in waiting.values():
            for key in keys:
                out.setdefault(key, Observation("pending", message=why))
        if spent:
            return out
        raise SchedulerUnreachable(f"SkyPilot API server {self.api.endpoint} unreachable: {unreachable}", out)

    @staticmethod
    def _each(out: dict[str, Observation], keys: list[str], obs: Observation) -> None:
        for key in keys:
            out[key] = obs

    def _read_launches(self, finished: list[str], waiting: dict[str, list[str]], out: dict[str, Observation],
                       job_of: dict[str, str]) -> SkyPilotUnavailable | None:
        """The finished launches' results, `RESULT_WORKERS` at a time (each a round trip); stops taking new
        ones once one finds the server unreachable, and returns that."""
        unreachable: list[SkyPilotUnavailable] = []

        def read(rid: str) -> None:
            if unreachable:
                return
            try:
                ids = self.api.finished_launch_job_ids(rid)
            except SkyPilotUnavailable as exc:
                unreachable.append(exc)
                return
            except SkyPilotRequestFailed as exc:
                outcome = classify_error(exc)
                obs = Observation(outcome, message=self._redacted(f"launch request failed: {exc}"))  # type: ignore[arg-type]
            except SkyPilotNotFound as exc:
                obs = Observation("lost", message=str(exc))
            except SkyPilotError as exc:
                obs = Observation("pending", message=f"launch request not readable yet: {exc}")
            else:
                for key in waiting[rid]:
                    job_of[key] = str(ids[0])
                return
            self._each(out, waiting[rid], obs)

        if len(finished) == 1:
            read(finished[0])
        else:
            context = contextvars.copy_context()  # the invocation's budget is a context variable
            with ThreadPoolExecutor(max_workers=min(RESULT_WORKERS, len(finished)),
                                    thread_name_prefix="skypilot-get") as pool:
                list(pool.map(lambda rid: context.copy().run(read, rid), finished))
        return unreachable[0] if unreachable else None

    def _follow(self, job_of: dict[str, str], out: dict[str, Observation]) -> None:
        rows = self.api.queue([int(j) for j in set(job_of.values())])
        by_job: dict[str, list] = {}
        for row in rows:
            by_job.setdefault(str(row.job_id), []).append(row)
        for key, job_id in job_of.items():
            job_rows = by_job.get(job_id)
            if not job_rows:
                out[key] = Observation("lost", job_id=job_id,
                                       message=f"job {job_id} is missing from the SkyPilot queue")
                continue
            outcome = classify_job(job_rows)
            reason = "; ".join(r.failure_reason or "" for r in job_rows if r.failure_reason)
            started = min((r.start_at for r in job_rows if r.start_at), default=None)
            ended = max((r.end_at for r in job_rows if r.end_at), default=None)
            status = ",".join(sorted({r.status for r in job_rows}))
            out[key] = Observation(
                outcome,  # the client's outcome names are the port's
                job_id=job_id, message=self._redacted(reason) if reason else f"SkyPilot status {status}",
                started_at=_iso(started), ended_at=_iso(ended) if outcome != "running" else None,
            )

    def _redacted(self, text: str) -> str:
        """A failure reason is the job's (or the cloud's) words: it may quote a secret the job was given."""
        values = getattr(self.secrets, "values_for_redaction", dict)()
        return redact.Redactor(values)(text) if values else text

    def find_by_name(self, name: str) -> list[str]:
        return sorted({str(r.job_id) for r in self.api.find_jobs_by_name(name)})

    def cancel(self, job_ids: list[str]) -> None:
        ids = [int(j) for j in job_ids if j]
        if ids:
            self.api.cancel(ids)

    def confirm_cancelled(self, job_ids: Sequence[str], timeout_seconds: float) -> bool:
        ids = [int(j) for j in job_ids if j]
        left = budget.remaining()  # never poll past the invocation's budget (cleanup's, the watch's)
        deadline = time.monotonic() + (timeout_seconds if left is None else min(timeout_seconds, left))
        while True:
            rows = self.api.queue(ids)
            if all(r.terminal for r in rows):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(max(0.0, min(self.confirm_poll_seconds, deadline - time.monotonic())))
