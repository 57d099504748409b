"""Fault: a step that moves itself out of its job's cgroup (root may write its pid into any cgroup's
`cgroup.procs`) still ends with its job: it keeps the job's marker in its environment, and the job's end and a
cancel look for that too (issue 18, the small items)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from npa_workflow.local_jobs import containment
from npa_workflow.local_jobs.executor import SUCCEEDED, LocalExecutor

from .conftest import PY, alive, read_pid, wait_terminal, wait_until

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(containment.cgroup_root() is None, reason="no cgroup v2 this process may manage"),
]

ESCAPE = textwrap.dedent(
    """
    import os, sys, time
    out, target, then = sys.argv[1], sys.argv[2], sys.argv[3]
    if os.fork() == 0:
        with open(target, "w") as fh:  # out of the job's cgroup, into another one
            fh.write(str(os.getpid()))
        open(out + ".tmp", "w").write(str(os.getpid()))
        os.replace(out + ".tmp", out)
        time.sleep(60)
        os._exit(0)
    while not os.path.exists(out):
        time.sleep(0.01)
    if then == "exit":
        sys.exit(0)
    time.sleep(60)
    """
)


def _escapee(tmp_path: Path, ex: LocalExecutor, then: str) -> tuple[str, int]:
    root = containment.cgroup_root()
    assert root is not None
    script = tmp_path / "escape.py"
    script.write_text(ESCAPE)
    out = tmp_path / f"escaped-{then}.pid"
    job_id = ex.launch(f"escape-{then}", [PY, str(script), str(out), str(root.parent / "cgroup.procs"), then])
    pid = read_pid(out)
    assert str(pid) not in (root / job_id / "cgroup.procs").read_text() if (root / job_id).exists() else True
    return job_id, pid


@pytest.fixture
def cgroup_ex(tmp_path: Path):
    executor = LocalExecutor(tmp_path / "state", grace_seconds=1.0)
    yield executor
    ids = [p.stem for p in executor.jobs_dir.glob("*.json")]
    executor.cancel(ids, grace_seconds=0.2)
    executor.wait_gone(ids, timeout=5)


def test_a_process_that_left_its_jobs_cgroup_ends_when_the_job_exits(cgroup_ex: LocalExecutor, tmp_path: Path):
    job_id, pid = _escapee(tmp_path, cgroup_ex, "exit")
    assert wait_terminal(cgroup_ex, job_id).status == SUCCEEDED
    wait_until(lambda: not alive(pid), 10, "the escaped process ended")


def test_cancel_reaches_a_process_that_left_its_jobs_cgroup(cgroup_ex: LocalExecutor, tmp_path: Path):
    job_id, pid = _escapee(tmp_path, cgroup_ex, "stay")
    cgroup_ex.cancel([job_id], grace_seconds=0.5)
    assert cgroup_ex.wait_gone([job_id], timeout=10)
    assert not alive(pid), "the escaped process outlived the cancel"
