"""A wave whose local job waits for free GPUs is shown WAITING_FOR_GPUS (status, --watch, run's lines), not
LAUNCHING: real jobs through the local executor on a machine whose (fake, on PATH) `nvidia-smi -L` lists one
GPU, so a second job that asks for it is held until the first ends."""

from __future__ import annotations

import io
import os
import sys
import time
from pathlib import Path

import pytest
from deadlines import deadline as scaled
from rich.console import Console

from npa_workflow.cli.progress import WAITING_FOR_GPUS, print_summary, shown_status, wave_dicts, with_gpu_waits
from npa_workflow.cli.run import LineProgress
from npa_workflow.ledger import WaveAttempt, WaveStatus
from npa_workflow.local_jobs.executor import LocalExecutor, waiting_for_gpus
from npa_workflow.protocol import environment

# The job: wait (at most 20 s) for the release file.
HOLD = ("import os, sys, time\nd = time.monotonic() + " + str(round(scaled(20))) + "\n"
        "while not os.path.exists(sys.argv[1]) and time.monotonic() < d:\n    time.sleep(0.05)\n")


def until(predicate, what: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.fixture
def one_gpu_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text('#!/bin/sh\n[ "$1" = -L ] || exit 2\necho "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-wait-test)"\n')
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("NPA_WORKFLOW_GPU_LOCK_DIR", str(tmp_path / "gpu-locks"))
    home = tmp_path / "home"
    monkeypatch.setenv(environment.HOME, str(home))
    return home


def wave(state: str, job_id: str, status: WaveStatus = WaveStatus.LAUNCHING) -> WaveAttempt:
    return WaveAttempt(run_id="r1", wave_key=state, state=state, job_id=job_id, status=status,
                       submitted_at="2026-01-01T00:00:00.000Z")


def test_a_job_held_for_gpus_is_shown_waiting_until_it_starts(one_gpu_home: Path, capsys) -> None:
    ex = LocalExecutor(one_gpu_home, env={**os.environ}, grace_seconds=1.0)
    release = one_gpu_home.parent / "release"
    first = ex.launch("first", [sys.executable, "-c", HOLD, str(release)], gpus=1)
    try:
        until(lambda: ex.status(first).status == "RUNNING", "the first job to hold the GPU")
        second = ex.launch("second", [sys.executable, "-c", HOLD, str(release)], gpus=1)
        time.sleep(0.5)  # time enough to start, had the device been free
        assert ex.status(second).status == "PENDING"
        assert waiting_for_gpus(one_gpu_home, second) == 1 and waiting_for_gpus(one_gpu_home, first) == 0

        # The views: the summary of `status`, the report of `status --json`, `run`'s plain lines.
        assert shown_status("LAUNCHING", second) == WAITING_FOR_GPUS
        assert shown_status("LAUNCHING", first) == "LAUNCHING"
        assert shown_status("FAILED", second) == "FAILED"  # an ended wave is what the ledger says
        report = {"run_id": "r1", "workflow": "w", "status": "RUNNING", "decisions": [], "watermarks": [],
                  "waves": [{"state": s, "iteration": None, "group": "", "attempt": 1, "status": "RUNNING",
                             "job_id": j, "replayed": False, "started_at": None, "ended_at": None}
                            for s, j in (("first", first), ("second", second))]}
        shown = with_gpu_waits(report)
        assert [(w["status"], w.get("waiting_for_gpus")) for w in shown["waves"]] == [
            ("RUNNING", None), (WAITING_FOR_GPUS, True)]
        out = io.StringIO()
        print_summary(shown, Console(file=out, width=120, soft_wrap=True))
        assert WAITING_FOR_GPUS in out.getvalue()
        live = wave_dicts([wave("first", first, WaveStatus.RUNNING), wave("second", second)])  # the live table's
        assert [w["status"] for w in live] == ["RUNNING", WAITING_FOR_GPUS]
        lines = LineProgress()
        lines.update([wave("first", first, WaveStatus.RUNNING), wave("second", second)], "RUNNING")
        printed = capsys.readouterr().out
        assert f"second attempt 1: {WAITING_FOR_GPUS} job {second}" in printed
        assert f"first attempt 1: RUNNING job {first}" in printed

        release.write_text("")  # the first job ends and gives the GPU back: the second starts
        until(lambda: ex.status(second).status in ("RUNNING", "SUCCEEDED"), "the second job to start")
        assert shown_status("LAUNCHING", second) == "LAUNCHING"
    finally:
        release.write_text("")
        ids = [p.stem for p in ex.jobs_dir.glob("*.json")]
        ex.cancel(ids, grace_seconds=0.2)
        ex.wait_gone(ids, timeout=5)
