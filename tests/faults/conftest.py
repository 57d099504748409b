"""Shared helpers of the fault-injection and hostile-input tests (bounded: every wait has a timeout)."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import npa_workflow
from npa_workflow.local import containment
from npa_workflow.local.executor import JobInfo, LocalExecutor
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
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout}s")
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
    executor.wait_gone(ids, timeout=5)


def plan_step(argv: list[str], state: str = "work") -> PlanStep:
    return PlanStep(state=state, iteration=None, loop_label="", argv=list(argv), shell="", tool_ref="",
                    resources="", resources_profile={}, outputs=[], inputs=[], group="")
