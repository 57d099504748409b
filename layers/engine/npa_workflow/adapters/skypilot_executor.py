"""The JobExecutor port over a SkyPilot API server: every wave is one managed job.

Launch is asynchronous on SkyPilot: `submit` returns the server's request id; the watch pass
turns the finished request into the job id (or a classified failure) and then follows the job
in one queue call for all active jobs. Before submitting, a job with exactly this name is
adopted instead (a retried launch never submits twice). Cancels are by exact id and count as
done only once the queue shows the job terminal.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

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
from npa_workflow.engine.ports import JobRequest, Observation, Submission, SubmitError, TrackedJob
from npa_workflow.timestamps import from_epoch


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
            document = job.task_yaml
            if job.secret_names:
                # Here, not at the top: watch, cleanup and reap build this executor but never submit, and
                # rendering brings in PyYAML (~15 ms of their cold start).
                from npa_workflow.render.skypilot import with_secret_values

                document = with_secret_values(job.task_yaml, self.secrets.resolve(job.secret_names))
            return Submission(request_id=self.api.launch(str(document), job.name))
        except SecretMissing as exc:
            raise SubmitError(str(exc), "configuration") from None
        except SkyPilotUnavailable as exc:  # a 503's reason quotes the server's (or a proxy's) body, as below
            if exc.maybe_received:  # the server may have taken the launch: reconcile, never resend
                raise SubmitError(self._redacted(f"launch outcome unknown: {exc}"), "unknown") from None
            raise SubmitError(self._redacted(str(exc)), "infrastructure") from None
        except SkyPilotError as exc:  # the server may quote the document, which holds the secret values
            raise SubmitError(self._redacted(str(exc)), _category(exc)) from None

    def observe(self, jobs: list[TrackedJob]) -> dict[str, Observation]:
        out: dict[str, Observation] = {}
        job_of: dict[str, str] = {}
        for job in jobs:
            if job.job_id:
                job_of[job.key] = job.job_id
                continue
            if not job.request_id:
                continue
            try:
                ids = self.api.launched_job_ids(job.request_id)
            except SkyPilotRequestFailed as exc:
                outcome = classify_error(exc)
                out[job.key] = Observation(outcome, message=self._redacted(f"launch request failed: {exc}"))  # type: ignore[arg-type]
                continue
            except SkyPilotNotFound as exc:
                out[job.key] = Observation("lost", message=str(exc))
                continue
            except SkyPilotError as exc:
                out[job.key] = Observation("pending", message=f"launch request not readable yet: {exc}")
                continue
            if ids is None:
                out[job.key] = Observation("pending", message="launch request in progress")
            else:
                job_of[job.key] = str(ids[0])
        if not job_of:
            return out
        try:
            rows = self.api.queue([int(j) for j in set(job_of.values())])
        except SkyPilotError as exc:
            # A failed query says nothing about the jobs: report them as still pending this tick.
            for key, job_id in job_of.items():
                out[key] = Observation("pending", job_id=job_id, message=f"queue not readable: {exc}")
            return out
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
        return out

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
        deadline = time.monotonic() + timeout_seconds
        while True:
            rows = self.api.queue(ids)
            if all(r.terminal for r in rows):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(self.confirm_poll_seconds)
