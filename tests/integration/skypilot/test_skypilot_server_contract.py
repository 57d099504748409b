"""Contract tests: SkyPilotApi against a real SkyPilot 0.14.1 API server (no cloud).

What a server without a cloud can show: launch → request id → job id; the queue by exact ids;
a job ending FAILED_PRECHECKS (classified configuration_failed); a cancel by id ending
CANCELLED (a log followed meanwhile streams until then); a launch request that FAILS with the server's
error type and message; unknown ids.
The SUCCEEDED path needs a cloud and is covered by the protocol double (unit tests).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from deadlines import deadline as scaled

from npa_workflow.adapters.skypilot_api import (
    API_VERSION,
    SKYPILOT_VERSION,
    JobRow,
    SkyPilotApi,
    SkyPilotNotFound,
    SkyPilotRequestFailed,
    classify_job,
)

# One real server per test session: keep its tests on one xdist worker.
pytestmark = [pytest.mark.skypilot, pytest.mark.xdist_group("skypilot-server")]

LAUNCH_TIMEOUT = 150.0  # the first launch on a fresh server takes 30-60 s on a small machine
JOB_TIMEOUT = 120.0
HOLD_SECONDS = 150  # the held job stays STARTING this long unless cancelled

TASK = """\
name: probe
resources:
  cpus: 1+
run: echo hello from a contract test
"""
HELD_TASK = f"""\
name: probe-held
envs:
  NPA_TEST_HOLD_SECONDS: "{HOLD_SECONDS}"
run: echo never runs
"""
INVALID_TASK = """\
name: probe-invalid
resources:
  cpus: lots
run: echo never runs
"""


@dataclass(frozen=True)
class Launched:
    name: str
    held_name: str
    job_id: int
    held_job_id: int
    invalid_request_id: str
    launch_seconds: float


def wait_until(what: str, probe: Callable[[], object | None], timeout: float, interval: float = 2.0) -> object:
    """Call ``probe`` until it returns something truthy; fail with ``what`` after ``timeout`` (the idle machine's
    figure, scaled to this one: tests/deadlines.py)."""
    timeout = scaled(timeout)
    deadline = time.monotonic() + timeout
    last: object | None = None
    while True:
        last = probe()
        if last:
            return last
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}; last observation: {last!r}")
        time.sleep(interval)


@pytest.fixture(scope="module")
def launched(sky_api: SkyPilotApi) -> Launched:
    """Three launches submitted together (the server runs them in parallel)."""
    name = f"npa-ct-{uuid.uuid4().hex[:8]}"
    held_name = f"{name}-held"  # contains `name`: the server's name filter matches both
    started = time.monotonic()
    rid = sky_api.launch(TASK, name)
    held_rid = sky_api.launch(HELD_TASK, held_name)
    invalid_rid = sky_api.launch(INVALID_TASK, f"{name}-invalid")

    def both_done() -> bool:
        statuses = sky_api.request_status([rid, held_rid])
        return all(statuses.get(r) in ("SUCCEEDED", "FAILED", "CANCELLED") for r in (rid, held_rid)) or False

    wait_until("the two launch requests to finish", both_done, LAUNCH_TIMEOUT)
    job_ids = sky_api.launched_job_ids(rid)
    held_ids = sky_api.launched_job_ids(held_rid)
    assert job_ids is not None and len(job_ids) == 1, job_ids
    assert held_ids is not None and len(held_ids) == 1, held_ids
    return Launched(
        name=name,
        held_name=held_name,
        job_id=job_ids[0],
        held_job_id=held_ids[0],
        invalid_request_id=invalid_rid,
        launch_seconds=time.monotonic() - started,
    )


def test_health_reports_the_pinned_versions(sky_api: SkyPilotApi) -> None:
    health = sky_api.health()
    assert health.healthy
    assert health.status == "healthy"
    assert health.api_version == str(API_VERSION)
    assert health.version == SKYPILOT_VERSION


def test_launch_gives_a_job_id_and_the_queue_shows_it(sky_api: SkyPilotApi, launched: Launched) -> None:
    print(f"\nlaunch requests finished in {launched.launch_seconds:.1f} s")
    rows = sky_api.queue([launched.job_id])
    assert [r.job_id for r in rows] == [launched.job_id]
    row = rows[0]
    assert row.job_name == launched.name, "the job must carry the launch name (header document)"
    # A single-task job: the server renames the task after the job (SDK semantics too).
    assert row.task_name == launched.name
    assert row.task_id == 0
    assert row.user_hash == sky_api.user_id
    assert row.submitted_at is None or row.submitted_at > 0


def test_job_without_cloud_fails_prechecks_and_is_a_configuration_failure(
    sky_api: SkyPilotApi, launched: Launched
) -> None:
    def terminal_rows() -> list[JobRow] | None:
        rows = sky_api.queue([launched.job_id])
        return rows if rows and all(r.terminal for r in rows) else None

    rows = wait_until(f"job {launched.job_id} to end", terminal_rows, JOB_TIMEOUT)
    assert isinstance(rows, list)
    (row,) = rows
    assert row.status == "FAILED_PRECHECKS"
    assert row.outcome == "configuration_failed"
    assert classify_job(rows) == "configuration_failed"
    assert row.failure_reason is not None and "NoCloudAccessError" in row.failure_reason
    assert "\x1b" not in row.failure_reason, "colour codes are stripped"
    assert row.end_at is not None


def test_cancel_by_id_ends_cancelled(sky_api: SkyPilotApi, launched: Launched) -> None:
    before = sky_api.queue([launched.held_job_id])
    assert [r.status for r in before] != [] and not before[0].terminal, before
    # `logs --follow` of a job that has not ended: the stream stays open (only control lines while the job
    # waits) and the server ends it when the job ends, here by the cancel.
    followed: list[str] = []
    follower = threading.Thread(target=sky_api.follow_job_logs, args=(launched.held_job_id, followed.append),
                                daemon=True)
    follower.start()
    time.sleep(3.0)
    assert follower.is_alive(), f"the follow stream of a STARTING job ended by itself: {followed!r}"
    sky_api.cancel([launched.held_job_id])

    def terminal_rows() -> list[JobRow] | None:
        rows = sky_api.queue([launched.held_job_id])
        return rows if rows and all(r.terminal for r in rows) else None

    rows = wait_until(f"job {launched.held_job_id} to end after cancel", terminal_rows, JOB_TIMEOUT)
    assert isinstance(rows, list)
    assert [r.status for r in rows] == ["CANCELLED"]
    assert "Cancellation requested by user" in (rows[0].details or ""), rows[0].details
    assert classify_job(rows) == "cancelled"
    follower.join(JOB_TIMEOUT)
    assert not follower.is_alive(), "the follow stream did not end with the job"
    assert all("<sky-payload" not in text and "\x1b" not in text for text in followed), followed
    # A second cancel of a terminal job is accepted and changes nothing.
    sky_api.cancel([launched.held_job_id])


def test_invalid_task_fails_the_launch_request_with_the_server_error(sky_api: SkyPilotApi, launched: Launched) -> None:
    rid = launched.invalid_request_id
    wait_until(
        "the invalid launch request to finish",
        lambda: sky_api.request_status([rid]).get(rid) in ("SUCCEEDED", "FAILED", "CANCELLED"),
        LAUNCH_TIMEOUT,
    )
    assert sky_api.request_status([rid]) == {rid: "FAILED"}
    with pytest.raises(SkyPilotRequestFailed) as caught:
        sky_api.request_result(rid)
    err = caught.value
    assert err.request_id == rid
    assert err.request_name == "sky.jobs.launch"
    assert err.error_type and err.error_message
    assert err.failure_class == "configuration_failed", (err.error_type, err.error_message)


def test_unknown_ids(sky_api: SkyPilotApi) -> None:
    assert sky_api.queue([987654]) == []
    unknown = str(uuid.uuid4())
    assert sky_api.request_status([unknown]) == {}
    with pytest.raises(SkyPilotNotFound):
        sky_api.request_result(unknown)
    with pytest.raises(SkyPilotNotFound):
        sky_api._get_result(unknown)  # the real /api/get 404 contract


def test_find_jobs_by_name_matches_exact_names_only(sky_api: SkyPilotApi, launched: Launched) -> None:
    # The server's name filter (SQL LIKE %name%) matches both jobs; only the exact name is kept.
    assert [r.job_id for r in sky_api.find_jobs_by_name(launched.name)] == [launched.job_id]
    assert sky_api.find_jobs_by_name(launched.name[:-1]) == []



def test_job_logs_by_exact_id_are_a_bounded_stream_without_control_lines(
    sky_api: SkyPilotApi, launched: Launched, capsys: pytest.CaptureFixture[str]
) -> None:
    """`POST /jobs/logs` (follow off) streams the job's log as the response body. A job without a cloud
    never ran, so what the real server streams is its terminal-state notice and failure reason."""
    from npa_workflow.cli.logs import LogSource, show

    def ended() -> bool:
        rows = sky_api.queue([launched.job_id])
        return bool(rows) and all(r.terminal for r in rows)

    wait_until(f"job {launched.job_id} to end", ended, JOB_TIMEOUT)
    logs = sky_api.job_logs(launched.job_id, max_bytes=4096)
    assert logs.job_id == launched.job_id and logs.complete and logs.request_id
    assert f"Job {launched.job_id} is already in terminal state FAILED_PRECHECKS" in logs.text, logs.text
    assert "NoCloudAccessError" in logs.text
    assert "<sky-payload" not in logs.text and "\x1b" not in logs.text, "control lines and colours are removed"
    assert logs.skipped_bytes == 0

    small = sky_api.job_logs(launched.job_id, max_bytes=16)
    assert small.complete and len(small.text.encode()) <= 16 and small.skipped_bytes > 0
    assert logs.text.endswith(small.text), (small.text, logs.text)  # the tail, not the head

    assert "Job 987654 not found." in sky_api.job_logs(987654, max_bytes=4096).text

    # Following a job that has ended ends at once, with what the plain read gave.
    followed: list[str] = []
    assert sky_api.follow_job_logs(launched.job_id, followed.append)
    assert f"Job {launched.job_id} is already in terminal state FAILED_PRECHECKS" in "".join(followed)

    # `npa-workflow logs --stack … --skypilot-endpoint …` prints it through the same call.
    source = LogSource("work", None, 1, "FAILED", str(launched.job_id), None, "SkyPilot managed job")
    capsys.readouterr()
    show(source, 4096, header=False, sky=sky_api)
    assert capsys.readouterr().out == logs.text
