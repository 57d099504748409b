"""`LocalJobExecutor`: the engine's `JobExecutor` port over `LocalExecutor` (real subprocess jobs).

A wave's job is its step's command (`argv`, or `bash -c <shell>`) run in the request's workdir (the spec's
folder; for a run that staged its code, a checkout of that code: `local_jobs.code_checkout`) with a clean environment
(`local_jobs.job_environment`: an allow-list of this process's variables and `--pass-env` names), the request's
environment laid over it, plus each named secret taken from this process's environment.
Outcomes map one to one from the executor's statuses; a job the executor has no
record of is `lost`, and a job whose process vanished without an exit code (killed, machine restarted)
is `infrastructure_failed`, the local stand-in for a preempted cloud job.

Submit adopts before it launches: a job of exactly this name (run, wave and attempt are in the name)
that was started is that wave's job, whatever state the ledger lost; only a name with no started job
(authoritative absence: its record says it never ran) is launched. A failure message's log tail is
redacted of the job's secret values (`npa_workflow.redact`) before it leaves the executor.

GPUs: the step's `accelerators` count (`local_jobs.accelerators`) is what each of its nodes gets to itself on a
machine with GPUs (the job waits `pending` until they are free; more than the machine has, for one node, is a
configuration error). On a machine without GPUs the count is not enforced, and the run says so once (stderr),
the first time one of its steps asks for accelerators.

Nodes: a step with `num_nodes: N > 1` is one job whose command is `local_jobs.gang` running N processes of the
step's command, gang-started and gang-ended, each with SkyPilot's node variables (`SKYPILOT_NODE_RANK`, ...;
a single-node job gets them too, rank 0 of 1, as on SkyPilot). The job holds N times the per-node count of
devices where the machine has that many, else the per-node count, which its nodes then share.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from npa_workflow import redact
from npa_workflow.embedded_aws.step_gate import StepAccess
from npa_workflow.engine.ports import JobRequest, Observation, Submission, SubmitError, TrackedJob
from npa_workflow.local_jobs import gang
from npa_workflow.local_jobs.accelerators import requested_gpus
from npa_workflow.local_jobs.executor import (
    CANCELLED,
    FAILED,
    PENDING,
    RUNNING,
    SUCCEEDED,
    GpuRequestError,
    JobInfo,
    LocalExecutor,
)
from npa_workflow.local_jobs.job_wrapper import REDACT_ENV
from npa_workflow.protocol.environment import JOB_RUN_ID, JOB_WORKFLOW

LOG_TAIL_LINES = 20
MESSAGE_MAX = 2000
_LOST_PREFIX = "process lost"
_NEVER_STARTED = "process lost: the job was never started"
UNENFORCED_NOTICE = ("npa-workflow: accelerators are not enforced locally (no GPU listed by `nvidia-smi -L`): "
                     "jobs run without CUDA_VISIBLE_DEVICES from the runtime")


class LocalJobExecutor:
    """Jobs as local subprocesses whose records live under `state_dir/jobs/` (shared by every process)."""

    def __init__(self, executor: LocalExecutor | str | Path, *, cancel_grace_seconds: float = 5.0,
                 step_access: StepAccess | None = None) -> None:
        # The engine's executor launches every wave: it keeps the next job's wrapper started ahead.
        self.local = executor if isinstance(executor, LocalExecutor) else LocalExecutor(Path(executor),
                                                                                         start_ahead=True)
        self.cancel_grace_seconds = cancel_grace_seconds
        self.step_access = step_access  # the runtime's step gate: each job's own S3 credentials

    def __repr__(self) -> str:
        return f"LocalJobExecutor(state_dir={str(self.local.state_dir)!r})"

    def close(self) -> None:
        self.local.close()

    def submit(self, job: JobRequest) -> Submission:
        command = job.step.command
        if not command:
            raise SubmitError(f"state {job.step.state!r} has no command to run", "configuration")
        workdir = self._code_folder(job) if job.code_uri else job.workdir
        if workdir is not None and not Path(workdir).is_dir():
            raise SubmitError(f"working directory {workdir} does not exist", "configuration")
        env = {str(k): str(v) for k, v in job.env.items()}
        missing = [name for name in job.secret_names if not os.environ.get(name)]
        if missing:
            raise SubmitError(
                f"secret(s) {', '.join(missing)} not set in the environment of the local runtime "
                "(export them before `npa-workflow run`, or where `npa-workflow serve` starts, then restart it)",
                "configuration",
            )
        short = [name for name in job.secret_names if len(os.environ[name]) < redact.MIN_SECRET_LENGTH]
        if short:
            raise SubmitError(
                f"secret(s) {', '.join(short)} shorter than {redact.MIN_SECRET_LENGTH} characters: too short "
                "to redact from logs safely (use the real value)", "configuration",
            )
        per_node = requested_gpus(job.step.resources_profile)
        nodes = max(1, int(job.step.num_nodes or 1))
        machine_gpus = len(self.local.gpus())
        if machine_gpus and per_node > machine_gpus:
            raise SubmitError(
                f"state {job.step.state!r} asks for {per_node} GPU(s) per node (resources {job.step.resources!r}: "
                f"accelerators {job.step.resources_profile.get('accelerators')!r}) but this machine has "
                f"{machine_gpus} (nvidia-smi -L): lower the count or run it in the cloud", "configuration",
            )
        # The nodes' devices: N times the per-node count where the machine has them, else one node's, shared.
        gpus = per_node * nodes if machine_gpus and per_node * nodes <= machine_gpus else per_node
        env.update(gang.node_environment({}, 0, 1, per_node) if nodes == 1 else {})
        if nodes > 1:
            command = [sys.executable, "-I", gang.__file__, "--nodes", str(nodes), "--gpus-per-node", str(per_node),
                       "--", *command]
        if gpus and not machine_gpus:
            self._notice_unenforced(str(job.env.get(JOB_RUN_ID) or job.name))
        adopted = self._adoptable(job.name)
        if adopted is not None:
            return Submission(job_id=adopted)
        env.update({name: os.environ[name] for name in job.secret_names})
        if job.secret_names:  # the wrapper redacts them from the log as it writes it (local_jobs.job_wrapper)
            env[REDACT_ENV] = ",".join(job.secret_names)
        key_id = ""
        if self.step_access is not None:
            # Its own key for the S3 places it is told of (embedded_aws.step_gate), never the embedded AWS's endpoint.
            env.update(self.step_access.credentials(
                str(job.env.get(JOB_RUN_ID, "")), str(job.env.get(JOB_WORKFLOW, "")),
                [json.dumps(job.step.to_json()), json.dumps(job.step.env), job.step.setup, json.dumps(dict(job.env)),
                 job.task_yaml]))
            key_id = env["AWS_ACCESS_KEY_ID"]
        try:
            job_id = self.local.launch(job.name, command, env=env, cwd=workdir,
                                       secret_names=tuple(job.secret_names), gpus=gpus)
        except GpuRequestError as exc:
            if self.step_access is not None:
                self.step_access.revoke_key(key_id)
            raise SubmitError(str(exc), "configuration") from exc
        if self.step_access is not None:
            self.step_access.bind(job_id, key_id)  # revoked when the job is seen to end (observe) or cancelled
        return Submission(job_id=job_id)

    def _code_folder(self, job: JobRequest) -> Path:
        """The run's staged code, checked out under `<home>/code/` (local_jobs.code_checkout): a job of a run that
        staged its code starts there, as its SkyPilot task would, not in the folder's current code."""
        from npa_workflow.local_jobs.code_checkout import CHECKOUTS, CodeCheckoutError, checkout

        try:
            return checkout(job.code_uri, self.local.state_dir / CHECKOUTS)
        except CodeCheckoutError as exc:
            raise SubmitError(str(exc), "configuration") from None

    def _notice_unenforced(self, run_id: str) -> None:
        """Once per run, durably (the launch Lambda builds a new executor per call, in any process)."""
        marker = self.local.state_dir / "runs" / run_id.replace("/", "_").lstrip(".") / "accelerators-not-enforced"
        try:
            marker.parent.mkdir(parents=True, exist_ok=True)
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        except FileExistsError:
            return
        except OSError:
            pass  # cannot remember it: better said twice than never
        print(UNENFORCED_NOTICE, file=sys.stderr, flush=True)

    def _adoptable(self, name: str) -> str | None:
        """The job already started under this exact name, if any (the oldest; later copies are cancelled)."""
        ids = self.local.find_by_name(name)
        if not ids:
            return None
        infos = self.local.statuses(ids)
        started = [i for i in ids if i in infos and not (infos[i].error or "").startswith(_NEVER_STARTED)]
        if not started:
            return None
        extra = [i for i in started[1:] if not infos[i].is_terminal]
        if extra:
            self.local.cancel(extra, grace_seconds=self.cancel_grace_seconds)
        return started[0]

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
        if self.step_access is not None:  # an ended job's key reaches nothing any more
            self.step_access.revoke(i for i in ids if infos.get(i) is not None and infos[i].is_terminal)
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
        redactor = redact.from_environment(info.secret_names)
        # Redact before cutting: a cut through a value would leave a part no search matches.
        tail = redactor(self.local.log_tail(info.job_id, LOG_TAIL_LINES)).strip()
        if tail:
            room = max(MESSAGE_MAX - len(message), 200)
            message += f"; log {info.log_path} ends with:\n{tail[-room:]}"
        return redactor(message)

    def find_by_name(self, name: str) -> list[str]:
        return self.local.find_by_name(name)

    def cancel(self, job_ids: list[str]) -> None:
        if job_ids:
            self.local.cancel(list(job_ids), grace_seconds=self.cancel_grace_seconds)
            if self.step_access is not None:
                self.step_access.revoke(job_ids)

    def confirm_cancelled(self, job_ids: list[str], timeout_seconds: float) -> bool:
        return self.local.wait_gone(list(job_ids), timeout=timeout_seconds)
