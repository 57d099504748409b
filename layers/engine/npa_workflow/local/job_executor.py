"""`LocalJobExecutor`: the engine's `JobExecutor` port over `LocalExecutor` (real subprocess jobs).

A wave's job is its step's command (`argv`, or `bash -c <shell>`) run in the request's workdir (the spec's
folder) with the request's environment laid over this process's, plus each named secret taken from this
process's environment. Outcomes map one to one from the executor's statuses; a job the executor has no
record of is `lost`, and a job whose process vanished without an exit code (killed, machine restarted)
is `infrastructure_failed`, the local stand-in for a preempted cloud job.
"""

from __future__ import annotations

import os
from pathlib import Path

from npa_workflow.engine.ports import JobRequest, Observation, Submission, SubmitError, TrackedJob
from npa_workflow.local.executor import CANCELLED, FAILED, PENDING, RUNNING, SUCCEEDED, JobInfo, LocalExecutor

LOG_TAIL_LINES = 20
MESSAGE_MAX = 2000
_LOST_PREFIX = "process lost"


class LocalJobExecutor:
    """Jobs as local subprocesses whose records live under `state_dir/jobs/` (shared by every process)."""

    def __init__(self, executor: LocalExecutor | str | Path, *, cancel_grace_seconds: float = 5.0) -> None:
        self.local = executor if isinstance(executor, LocalExecutor) else LocalExecutor(Path(executor))
        self.cancel_grace_seconds = cancel_grace_seconds

    def __repr__(self) -> str:
        return f"LocalJobExecutor(state_dir={str(self.local.state_dir)!r})"

    def submit(self, job: JobRequest) -> Submission:
        command = job.step.command
        if not command:
            raise SubmitError(f"state {job.step.state!r} has no command to run", "configuration")
        if job.workdir is not None and not Path(job.workdir).is_dir():
            raise SubmitError(f"working directory {job.workdir} does not exist", "configuration")
        env = {str(k): str(v) for k, v in job.env.items()}
        missing = [name for name in job.secret_names if name not in os.environ]
        if missing:
            raise SubmitError(
                f"secret(s) {', '.join(missing)} not set in the environment of the local runtime "
                "(export them before `npa-workflow run`)", "configuration",
            )
        env.update({name: os.environ[name] for name in job.secret_names})
        job_id = self.local.launch(job.name, command, env=env, cwd=job.workdir)
        return Submission(job_id=job_id)

    def observe(self, jobs: list[TrackedJob]) -> dict[str, Observation]:
        ids = [j.job_id for j in jobs if j.job_id]
        infos = self.local.statuses(ids) if ids else {}
        result: dict[str, Observation] = {}
        for job in jobs:
            if not job.job_id:
                result[job.key] = Observation("pending", message="no job id recorded yet")
                continue
            info = infos.get(job.job_id)
            result[job.key] = self._observation(info) if info else Observation(
                "lost", job.job_id, f"no local job with id {job.job_id} under {self.local.jobs_dir}"
            )
        return result

    def _observation(self, info: JobInfo) -> Observation:
        times = {"started_at": info.started_at, "ended_at": info.ended_at}
        if info.status == PENDING:
            return Observation("pending", info.job_id, **times)
        if info.status == RUNNING:
            return Observation("running", info.job_id, **times)
        if info.status == SUCCEEDED:
            return Observation("succeeded", info.job_id, **times)
        if info.status == CANCELLED:
            return Observation("cancelled", info.job_id, "cancelled", **times)
        error = info.error or (f"exit code {info.exit_code}" if info.exit_code is not None else "failed")
        outcome = "infrastructure_failed" if error.startswith(_LOST_PREFIX) else "failed"
        if info.status != FAILED:
            error = f"unknown local job status {info.status!r}: {error}"
        return Observation(outcome, info.job_id, self._failure_message(info, error), **times)

    def _failure_message(self, info: JobInfo, error: str) -> str:
        message = f"job {info.job_id} ({info.name}) failed: {error}"
        tail = self.local.log_tail(info.job_id, LOG_TAIL_LINES).strip()
        if tail:
            room = max(MESSAGE_MAX - len(message), 200)
            message += f"; log {info.log_path} ends with:\n{tail[-room:]}"
        return message

    def find_by_name(self, name: str) -> list[str]:
        return self.local.find_by_name(name)

    def cancel(self, job_ids: list[str]) -> None:
        if job_ids:
            self.local.cancel(list(job_ids), grace_seconds=self.cancel_grace_seconds)

    def confirm_cancelled(self, job_ids: list[str], timeout_seconds: float) -> bool:
        return self.local.wait_gone(list(job_ids), timeout=timeout_seconds)
