"""`npa-workflow jobs cancel JOB_ID`: stop one job by its exact id.

A run started with `--no-cancel-on-timeout` leaves a timed-out wave's job running on purpose and names
it; this is the command its message names. A local job id (`local-…`) is a job of this machine's
executor, whose state is under `<home>/jobs/` (home: `$NPA_WORKFLOW_HOME`, else `./.npa-workflow`): every
process of the job gets SIGTERM, then SIGKILL after the grace, and the command returns once none is
left. A number is a SkyPilot managed job, cancelled by exact id through the API server named by
`--skypilot-endpoint` / `$SKYPILOT_API_SERVER_ENDPOINT` (token: `$SKYPILOT_SERVICE_ACCOUNT_TOKEN`).
Never by name: a name may match a job of another run.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

from npa_workflow.protocol import environment

jobs_app = typer.Typer(help="Act on one job by its exact id (local or SkyPilot).", no_args_is_help=True)


def _fail(line: str, code: int = 1) -> typer.Exit:
    sys.stderr.write(f"npa-workflow jobs cancel: error: {line}\n")
    return typer.Exit(code)


def cancel_local(job_id: str, grace: float, timeout: float) -> str:
    """Cancel a local job by exact id; returns what happened, in words (raises LookupError if unknown)."""
    from npa_workflow.local.runtime import local_home
    from npa_workflow.local_jobs.executor import LocalExecutor

    home = local_home()
    # No jobs folder (no run started here, or a home that is a file): no such job. The executor would make the
    # folder, and fail with a traceback where it cannot.
    executor = LocalExecutor(home) if (home / "jobs").is_dir() else None
    before = executor.status(job_id) if executor is not None else None
    if executor is None or before is None:
        raise LookupError(f"no local job {job_id!r} under {home / 'jobs'} (run this from the folder the run was "
                          "started in, or set $NPA_WORKFLOW_HOME)")
    if before.is_terminal and before.status != "CANCELLED":
        return f"{job_id}: already ended {before.status}; nothing to cancel"
    executor.cancel([job_id], grace_seconds=grace)
    if not executor.wait_gone([job_id], timeout=timeout):
        raise TimeoutError(f"{job_id}: cancel requested, but a process of the job was still alive after "
                           f"{timeout:.0f} s; run the command again")
    return f"{job_id}: CANCELLED (no process of the job is left)"


def cancel_skypilot(job_id: int, endpoint: str | None) -> str:
    from npa_workflow.adapters.skypilot_api import SkyPilotApi

    if not endpoint:
        raise LookupError(f"job {job_id} is a SkyPilot managed job: name the API server with --skypilot-endpoint "
                          f"URL or ${environment.SKYPILOT_ENDPOINT}")
    api = SkyPilotApi.from_environment({**os.environ, environment.SKYPILOT_ENDPOINT: endpoint})
    api.cancel([job_id])
    rows = api.queue([job_id])
    if not rows:
        raise LookupError(f"the SkyPilot API server at {api.endpoint} has no managed job {job_id}")
    return f"{job_id}: {', '.join(sorted({r.status for r in rows}))} (SkyPilot managed job)"


@jobs_app.command("cancel")
def jobs_cancel_command(
    job_id: Annotated[str, typer.Argument(help="The job's exact id (local-… or a SkyPilot job number)",
                                          show_default=False)],
    grace: Annotated[float, typer.Option("--grace", min=0, max=3600,
                                         help="Seconds between SIGTERM and SIGKILL (local jobs)")] = 5.0,
    timeout: Annotated[float, typer.Option("--timeout", min=1, max=3600,
                                           help="Seconds to wait until no process of the job is left")] = 30.0,
    skypilot_endpoint: Annotated[str | None, typer.Option("--skypilot-endpoint",
                                                          envvar=environment.SKYPILOT_ENDPOINT,
                                                          help="SkyPilot API server URL (for a numeric id)")]
    = None,
) -> None:
    """Cancel one job by its exact id and wait until it has ended."""
    from npa_workflow.adapters.skypilot_api import SkyPilotError

    try:
        if job_id.isdigit():
            said = cancel_skypilot(int(job_id), skypilot_endpoint)
        elif job_id.startswith("local-") and "/" not in job_id:
            said = cancel_local(job_id, grace, timeout)
        else:
            raise _fail(f"{job_id!r} is not a job id (a local job is local-<hex>, a SkyPilot job a number)", 2)
    except (LookupError, TimeoutError, SkyPilotError, ValueError) as exc:
        raise _fail(str(exc)) from None
    sys.stdout.write(said + "\n")
