"""Local GPU allocation: a real fake `nvidia-smi` on PATH, real jobs through the local executor.

Each job is a tiny python step that prints its CUDA_VISIBLE_DEVICES and waits for a release file (bounded),
so the test decides when a job ends: concurrent jobs get disjoint devices, a job that does not fit waits
PENDING and starts when one ends, and devices come free after cancel and after kill -9.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import textwrap
import time
from pathlib import Path

import pytest
from deadlines import deadline as scaled

from npa_workflow.engine.ports import JobRequest, SubmitError
from npa_workflow.local_jobs.accelerators import requested_gpus
from npa_workflow.local_jobs.executor import PENDING, RUNNING, SUCCEEDED, GpuRequestError, LocalExecutor
from npa_workflow.local_jobs.gpu_devices import NvidiaSmi, parse_nvidia_smi_list
from npa_workflow.local_jobs.job_executor import UNENFORCED_NOTICE, LocalJobExecutor

from .conftest import PY, alive, plan_step, wait_terminal, wait_until

# The job: write its pid and devices, then wait (at most 20 s) for its release file.
JOB = textwrap.dedent("""
    import os, sys, time
    out = sys.argv[1]
    with open(out + ".tmp", "w") as fh:
        fh.write(f"{os.getpid()} [{os.environ.get('CUDA_VISIBLE_DEVICES', '<unset>')}]\\n")
    os.replace(out + ".tmp", out)
    deadline = time.monotonic() + CAP
    while not os.path.exists(out + ".release") and time.monotonic() < deadline:
        time.sleep(0.05)
""").replace("CAP", str(round(scaled(20))))  # at most 20 s on an idle machine, scaled to this one


def fake_nvidia_smi(bin_dir: Path, count: int, exit_code: int = 0) -> Path:
    bin_dir.mkdir(parents=True, exist_ok=True)
    lines = "".join(f'echo "GPU {i}: NVIDIA H100 80GB HBM3 (UUID: GPU-{i:08d}-test-{bin_dir.name})"\n'
                    for i in range(count))
    exe = bin_dir / "nvidia-smi"
    exe.write_text(f"#!/bin/sh\n[ \"$1\" = -L ] || exit 2\n{lines}exit {exit_code}\n")
    exe.chmod(0o755)
    return exe


@pytest.fixture
def gpu_box(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A machine with two GPUs: the fake nvidia-smi first on PATH, a lock folder of its own."""
    fake_nvidia_smi(tmp_path / "bin", 2)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("NPA_WORKFLOW_GPU_LOCK_DIR", str(tmp_path / "gpu-locks"))
    return tmp_path


def executor(tmp_path: Path, name: str = "state") -> LocalExecutor:
    return LocalExecutor(tmp_path / name, env={**os.environ}, grace_seconds=1.0)


def launch(ex: LocalExecutor, tmp_path: Path, name: str, gpus: int) -> tuple[str, Path]:
    out = tmp_path / f"{name}.out"
    return ex.launch(name, [PY, "-c", JOB, str(out)], gpus=gpus), out


def devices_of(out: Path) -> str:
    wait_until(out.exists, 10, f"{out} written")
    return out.read_text().split()[1].strip("[]")


def release(out: Path) -> None:
    Path(f"{out}.release").write_text("")


def cleanup(*executors: LocalExecutor) -> None:
    for ex in executors:
        ids = [p.stem for p in ex.jobs_dir.glob("*.json")]
        ex.cancel(ids, grace_seconds=0.2)
        ex.wait_gone(ids, timeout=5)


def test_nvidia_smi_list_is_parsed_by_index_name_and_uuid() -> None:
    text = ("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-5d1c0a8e-1111)\n"
            "  MIG 1g.10gb     Device  0: (UUID: MIG-aaaa)\n"
            "GPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-77)\n"
            "No devices were found\n")
    gpus = parse_nvidia_smi_list(text)
    assert [(g.index, g.name, g.uuid) for g in gpus] == [
        (0, "NVIDIA H100 80GB HBM3", "GPU-5d1c0a8e-1111"), (1, "NVIDIA A100-SXM4-40GB", "GPU-77")]


def test_the_reader_runs_nvidia_smi_from_path_and_a_failing_or_missing_one_means_no_gpus(tmp_path: Path) -> None:
    fake_nvidia_smi(tmp_path / "three", 3)
    fake_nvidia_smi(tmp_path / "broken", 2, exit_code=9)  # "couldn't communicate with the NVIDIA driver"
    assert [g.index for g in NvidiaSmi(str(tmp_path / "three")).gpus()] == [0, 1, 2]
    assert NvidiaSmi(str(tmp_path / "broken")).gpus() == []
    assert NvidiaSmi(str(tmp_path / "nothing-here")).gpus() == []


@pytest.mark.parametrize(("accelerators", "count"), [
    (None, 0), ("H100:2", 2), ("H100", 1), ({"H100": 4}, 4), ({"A100": 2, "H100": 1}, 1), ("L4:8", 8),
])
def test_the_count_comes_from_the_profiles_accelerators(accelerators, count) -> None:
    profile = {} if accelerators is None else {"accelerators": accelerators, "num_nodes": 2}
    assert requested_gpus(profile) == count


def test_concurrent_jobs_get_disjoint_devices_and_a_third_waits_pending_until_one_ends(gpu_box: Path) -> None:
    first, second = executor(gpu_box, "run-a"), executor(gpu_box, "run-b")  # two runs, one machine
    try:
        a, a_out = launch(first, gpu_box, "a", 1)
        b, b_out = launch(second, gpu_box, "b", 1)
        assert {devices_of(a_out), devices_of(b_out)} == {"0", "1"}
        c, c_out = launch(first, gpu_box, "c", 1)
        wait_until(lambda: first.status(a).status == RUNNING and second.status(b).status == RUNNING, 5, "a, b running")
        for _ in range(10):  # 0.5 s: the third stays pending while both devices are held
            assert first.status(c).status == PENDING and first.status(c).started_at is None
            assert not c_out.exists()
            time.sleep(0.05)
        release(b_out)
        assert wait_terminal(second, b).status == SUCCEEDED
        assert devices_of(c_out) == second.status(b).devices[0]  # c got the device b gave back
        wait_until(lambda: first.status(c).status == RUNNING, 5, "c running")
        assert first.status(c).devices == (devices_of(c_out),)
        release(a_out)
        release(c_out)
        assert wait_terminal(first, a).status == SUCCEEDED and wait_terminal(first, c).status == SUCCEEDED
    finally:
        cleanup(first, second)


def test_a_job_takes_all_its_devices_at_once_and_zero_means_none(gpu_box: Path) -> None:
    ex = executor(gpu_box)
    try:
        big, big_out = launch(ex, gpu_box, "big", 2)
        assert sorted(devices_of(big_out).split(",")) == ["0", "1"]
        none, none_out = launch(ex, gpu_box, "cpu-only", 0)
        assert devices_of(none_out) == ""  # set, and empty: no device for a step that asked none
        assert ex.status(none).status == RUNNING
        release(big_out)
        release(none_out)
        assert wait_terminal(ex, big).status == SUCCEEDED
    finally:
        cleanup(ex)


def test_devices_are_freed_by_cancel_and_by_kill_9_of_the_jobs_processes(gpu_box: Path) -> None:
    ex = executor(gpu_box)
    try:
        holder, holder_out = launch(ex, gpu_box, "holder", 2)
        devices_of(holder_out)
        waiter, waiter_out = launch(ex, gpu_box, "waiter", 2)
        assert ex.status(waiter).status == PENDING
        ex.cancel([holder], grace_seconds=1.0)
        assert ex.wait_gone([holder], timeout=5)
        assert sorted(devices_of(waiter_out).split(",")) == ["0", "1"]

        # kill -9 of the wrapper alone: its command still runs and still holds the devices (it inherited the
        # locks), so nothing else gets them; when the command ends the kernel frees them.
        wrapper = int(json.loads((ex.jobs_dir / f"{waiter}.json").read_text())["pid"])
        command_pid = int(waiter_out.read_text().split()[0])
        third, third_out = launch(ex, gpu_box, "third", 1)
        os.kill(wrapper, signal.SIGKILL)
        wait_until(lambda: not alive(wrapper), 5, "wrapper gone")
        assert alive(command_pid)
        time.sleep(0.6)  # three lock polls: the third still waits
        assert not third_out.exists() and ex.status(third).status == PENDING
        os.kill(command_pid, signal.SIGKILL)
        assert devices_of(third_out) in {"0", "1"}
        assert ex.status(waiter).status == "FAILED" and "process lost" in (ex.status(waiter).error or "")
        release(third_out)
        assert wait_terminal(ex, third).status == SUCCEEDED
    finally:
        cleanup(ex)


def test_more_devices_than_the_machine_has_is_a_configuration_error(gpu_box: Path) -> None:
    ex = executor(gpu_box)
    with pytest.raises(GpuRequestError, match="asks for 3 GPU"):
        ex.launch("huge", [PY, "-c", "pass"], gpus=3)
    assert list(ex.jobs_dir.glob("*.json")) == []  # nothing recorded, nothing started
    step = plan_step([PY, "-c", "pass"], state="train")
    step = type(step)(**{**step.__dict__, "resources": "big", "resources_profile": {"accelerators": "H100:4"}})
    with pytest.raises(SubmitError) as caught:
        LocalJobExecutor(ex).submit(JobRequest(name="r.train.a1", step=step, env={}))
    assert caught.value.category == "configuration"
    assert "'train' asks for 4 GPU(s)" in str(caught.value) and "this machine has 2" in str(caught.value)


def test_without_gpus_the_run_says_once_that_accelerators_are_not_enforced(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("PATH", str(Path(PY).parent) + os.pathsep + "/usr/bin:/bin")  # no nvidia-smi here
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    step = plan_step([PY, "-c", "import os; print('CVD', os.environ.get('CUDA_VISIBLE_DEVICES', '<unset>'))"])
    step = type(step)(**{**step.__dict__, "resources_profile": {"accelerators": "H100:1"}})
    ids = []
    for attempt in (1, 2):  # a new executor per launch, as the launch Lambda builds one per call
        jobs = LocalJobExecutor(tmp_path / "state")
        ids.append(jobs.submit(JobRequest(name=f"r1.work.a{attempt}", step=step,
                                          env={"NPA_WORKFLOW_RUN_ID": "r1"})).job_id)
    assert capsys.readouterr().err.count(UNENFORCED_NOTICE) == 1
    LocalJobExecutor(tmp_path / "state").submit(JobRequest(name="r2.work.a1", step=step,
                                                           env={"NPA_WORKFLOW_RUN_ID": "r2"}))
    assert capsys.readouterr().err.count(UNENFORCED_NOTICE) == 1  # the next run says it again, once
    ex = LocalExecutor(tmp_path / "state")
    info = wait_terminal(ex, ids[0])
    assert info.status == SUCCEEDED and "CVD <unset>" in ex.log_tail(ids[0])


def test_a_lock_folder_that_cannot_be_made_fails_the_job_with_the_reason(gpu_box: Path) -> None:
    (gpu_box / "not-a-folder").write_text("")
    ex = LocalExecutor(gpu_box / "state", env={**os.environ}, gpu_lock_dir=gpu_box / "not-a-folder" / "locks")
    info = wait_terminal(ex, ex.launch("job", [PY, "-c", "pass"], gpus=1))
    assert info.status == "FAILED" and info.exit_code == 126
    assert "cannot take GPUs under" in (info.error or "")


LAUNCHER = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    from npa_workflow.local_jobs.executor import LocalExecutor
    ex = LocalExecutor(Path(sys.argv[1]), env={**os.environ})
    print(ex.launch("held", [sys.executable, "-c", sys.argv[2], sys.argv[3]], gpus=2), flush=True)
    time.sleep(30)
""")


def test_the_devices_of_a_job_stay_taken_after_kill_9_of_the_runtime_and_free_when_the_job_ends(
        gpu_box: Path) -> None:
    held_out = gpu_box / "held.out"
    runtime = subprocess.Popen([PY, "-c", LAUNCHER, str(gpu_box / "state"), JOB, str(held_out)],
                               stdout=subprocess.PIPE, text=True, env={**os.environ})
    ex = executor(gpu_box)
    try:
        assert runtime.stdout is not None
        held = runtime.stdout.readline().strip()
        assert sorted(devices_of(held_out).split(",")) == ["0", "1"]
        runtime.kill()  # kill -9 of the process that launched it (the runtime)
        runtime.wait(timeout=5)
        after, after_out = launch(ex, gpu_box, "after", 1)
        time.sleep(0.6)
        assert ex.status(held).status == RUNNING and ex.status(after).status == PENDING
        release(held_out)
        assert wait_terminal(ex, held).status == SUCCEEDED
        assert devices_of(after_out) in {"0", "1"}
        release(after_out)
        assert wait_terminal(ex, after).status == SUCCEEDED
    finally:
        runtime.kill()
        runtime.wait(timeout=5)
        cleanup(ex)


def test_a_job_cancelled_while_it_waits_for_devices_never_runs(gpu_box: Path) -> None:
    ex = executor(gpu_box)
    try:
        holder, holder_out = launch(ex, gpu_box, "holder", 2)
        devices_of(holder_out)
        waiter, waiter_out = launch(ex, gpu_box, "waiter", 1)
        assert ex.status(waiter).status == PENDING
        assert ex.cancel([waiter], grace_seconds=1.0) == [waiter] and ex.wait_gone([waiter], timeout=5)
        assert ex.status(waiter).status == "CANCELLED"
        release(holder_out)
        assert wait_terminal(ex, holder).status == SUCCEEDED
        time.sleep(0.3)
        assert not waiter_out.exists()  # its command never started, even once the devices came free
    finally:
        cleanup(ex)
