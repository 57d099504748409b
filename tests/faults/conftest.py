"""Shared helpers of the fault-injection and hostile-input tests (bounded: every wait has a timeout)."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from deadlines import deadline as scaled  # noqa: E402

import npa_workflow
from npa_workflow.local_jobs import containment
from npa_workflow.local_jobs.executor import JobInfo, LocalExecutor
from npa_workflow.plan.model import PlanStep

PY = sys.executable
ENGINE_ROOT = str(Path(npa_workflow.__file__).resolve().parent.parent)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def wait_until(predicate, timeout: float = 10.0, what: str = "condition") -> None:
    """Polls `predicate` until it is true; `timeout` is what the work needs on the idle reference machine,
    scaled to this one (tests/deadlines.py)."""
    timeout = scaled(timeout)
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout:.0f} s")
        time.sleep(0.05)


def wait_terminal(ex: LocalExecutor, job_id: str, timeout: float = 15.0) -> JobInfo:
    info: list[JobInfo] = []

    def done() -> bool:
        info[:] = [ex.statuses([job_id])[job_id]]
        return info[0].is_terminal

    wait_until(done, timeout, f"job {job_id} terminal")
    return info[0]


def read_pid(path: Path, timeout: float = 10.0) -> int:
    wait_until(lambda: path.exists() and path.read_text().strip().isdigit(), timeout, f"{path} written")
    return int(path.read_text().strip())


CONTAINMENT_MODES = ["cgroup", "marker"] if containment.cgroup_root() else ["marker"]


@pytest.fixture(params=CONTAINMENT_MODES)
def mode(request, monkeypatch) -> str:
    if request.param == "marker":
        monkeypatch.setenv(containment.CGROUPS_ENV, "off")
    return request.param


@pytest.fixture
def ex(tmp_path: Path, mode: str) -> Iterator[LocalExecutor]:
    executor = LocalExecutor(tmp_path / "state", env={**os.environ}, grace_seconds=1.0)
    assert (getattr(executor, "_cgroups", None) is not None) == (mode == "cgroup") or not hasattr(executor, "_cgroups")
    yield executor
    ids = [p.stem for p in executor.jobs_dir.glob("*.json")]
    executor.cancel(ids, grace_seconds=0.2)
    executor.wait_gone(ids, timeout=scaled(5))


def plan_step(argv: list[str], state: str = "work") -> PlanStep:
    return PlanStep(state=state, iteration=None, loop_label="", argv=list(argv), shell="", tool_ref="",
                    resources="", resources_profile={}, outputs=[], inputs=[], group="")


class RecordingCallbacks:
    """The TaskCallbacks port, recording (the state machine is exercised end to end in tests/e2e)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, object]] = []

    def succeed(self, token, output):
        self.calls.append(("succeed", token, output))
        return True

    def fail(self, token, error, cause):
        self.calls.append(("fail", token, (error, cause)))
        return True

    def heartbeat(self, token):
        return True


@pytest.fixture
def moto_engine(tmp_path: Path, monkeypatch):
    """An engine on moto S3 + DynamoDB (in-process) with real local jobs; buckets `engine` and `data`."""
    import boto3
    from moto import mock_aws

    from npa_workflow.adapters.s3_store import S3Store
    from npa_workflow.engine.context import Engine
    from npa_workflow.engine.runs import RunStore
    from npa_workflow.ledger import DynamoLedger
    from npa_workflow.local_jobs.job_executor import LocalJobExecutor

    dummy = {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x", "AWS_DEFAULT_REGION": "us-east-1"}
    for key, value in dummy.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        s3 = boto3.client("s3")
        for bucket in ("engine", "data"):
            s3.create_bucket(Bucket=bucket)
        ledger = DynamoLedger("ledger")
        ledger.create_table()
        store = S3Store(s3)
        engine = Engine(ledger=ledger, runs=RunStore(store, "engine"), store=store,
                        executor=LocalJobExecutor(tmp_path / "jobs", cancel_grace_seconds=0.5),
                        callbacks=RecordingCallbacks(), cancel_confirm_seconds=5)
        yield engine
        jobs = engine.executor.local
        ids = [p.stem for p in jobs.jobs_dir.glob("*.json")]
        jobs.cancel(ids, grace_seconds=0.2)
        jobs.wait_gone(ids, timeout=5)
