"""LocalExecutor with real subprocesses: outcomes, env, cancel of whole groups, durability."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from deadlines import deadline as scaled

import npa_workflow
from npa_workflow.local_jobs.executor import (
    CANCELLED,
    FAILED,
    RUNNING,
    SUCCEEDED,
    JobInfo,
    LocalExecutor,
    job_files,
)

PY = sys.executable
ENGINE_ROOT = str(Path(npa_workflow.__file__).resolve().parent.parent)


def wait_terminal(ex: LocalExecutor, job_id: str, timeout: float = 10.0) -> JobInfo:
    timeout = scaled(timeout)  # the idle machine's figure, scaled to this one
    deadline = time.monotonic() + timeout
    while True:
        info = ex.statuses([job_id])[job_id]
        if info.is_terminal:
            return info
        if time.monotonic() > deadline:
            raise AssertionError(f"job {job_id} still {info.status} after {timeout}s")
        time.sleep(0.05)


def wait_for_file(path: Path, timeout: float = 10.0) -> str:
    timeout = scaled(timeout)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            text = path.read_text()
            if text.endswith("\n"):
                return text
        time.sleep(0.02)
    raise AssertionError(f"{path} not written within {timeout}s")


def alive(pid: int) -> bool:
    """True if pid is a live (non-zombie) process."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return state not in ("Z", "X")


@pytest.fixture
def ex(tmp_path: Path) -> Iterator[LocalExecutor]:
    executor = LocalExecutor(tmp_path / "state", grace_seconds=2.0)
    yield executor
    # Never leave processes behind, whatever a test did.
    ids = [p.stem for p in executor.jobs_dir.glob("*.json")]
    executor.cancel(ids, grace_seconds=0.2)
    executor.wait_gone(ids, timeout=5)


def test_success_records_exit_code_log_and_timestamps(ex: LocalExecutor) -> None:
    job_id = ex.launch("hello", [PY, "-c", "print('hello from job')"], env={}, cwd=None)
    info = wait_terminal(ex, job_id)
    assert info.status == SUCCEEDED
    assert info.exit_code == 0
    assert info.error is None
    assert info.name == "hello"
    assert info.submitted_at and info.started_at and info.ended_at
    assert info.submitted_at.endswith("Z") and info.ended_at.endswith("Z")
    assert info.submitted_at <= info.started_at <= info.ended_at
    assert Path(info.log_path) == ex.jobs_dir / f"{job_id}.log"
    assert "hello from job" in ex.log_tail(job_id)
    record = json.loads((ex.jobs_dir / f"{job_id}.json").read_text())
    assert record["status"] == SUCCEEDED and record["pid"] == record["pgid"]


def test_failure_exit_code_and_stderr_in_log(ex: LocalExecutor) -> None:
    code = "import sys; print('boom', file=sys.stderr); sys.exit(3)"
    job_id = ex.launch("fails", [PY, "-c", code], env={}, cwd=None)
    info = wait_terminal(ex, job_id)
    assert info.status == FAILED
    assert info.exit_code == 3
    assert info.error == "exit code 3"
    assert "boom" in ex.log_tail(job_id)


@pytest.mark.parametrize("ahead", [False, True], ids=["started-with-its-job", "started-ahead"])
def test_a_python_job_starts_as_python_starts_though_its_wrapper_skips_site(tmp_path: Path, ahead: bool) -> None:
    """The wrapper runs isolated and without `site` (its start-up is cheaper); the job's own interpreter starts
    with its flags and its site-packages, whichever way the wrapper was started."""
    ex = LocalExecutor(tmp_path / "state", start_ahead=ahead)
    try:
        if ahead:  # the first launch fills the wrapper started ahead; the second takes it
            wait_terminal(ex, ex.launch("fill", ["true"], env={}, cwd=None))
            wait_until_ready = time.monotonic() + scaled(10)
            while ex._ahead._ready is None and time.monotonic() < wait_until_ready:
                time.sleep(0.02)
            assert ex._ahead._ready is not None
        code = ("import sys, site, json; print(json.dumps([sys.flags.no_site, sys.flags.isolated, "
                "any(p.endswith('site-packages') for p in sys.path)]))")
        job_id = ex.launch("site", [PY, "-c", code], env={}, cwd=None)
        info = wait_terminal(ex, job_id)
        assert info.status == SUCCEEDED, ex.log_tail(job_id)
        assert json.loads(ex.log_tail(job_id).strip().splitlines()[-1]) == [0, 0, True]
    finally:
        ex.close()


def test_command_not_found_fails_with_127(ex: LocalExecutor) -> None:
    job_id = ex.launch("missing", ["/nonexistent/npa-no-such-binary"], env={}, cwd=None)
    info = wait_terminal(ex, job_id)
    assert info.status == FAILED
    assert info.exit_code == 127
    assert "cannot start" in (info.error or "")


def test_env_and_cwd_passed_through(tmp_path: Path) -> None:
    ex = LocalExecutor(tmp_path / "state", env={**os.environ, "BASE_VAR": "base"})
    work = tmp_path / "work"
    work.mkdir()
    code = "import os; e = os.environ; print(e['JOB_VAR'], e['BASE_VAR'], e['NPA_LOCAL_JOB_ID'], os.getcwd())"
    job_id = ex.launch("env", [PY, "-c", code], env={"JOB_VAR": "job-value"}, cwd=work)
    info = wait_terminal(ex, job_id)
    assert info.status == SUCCEEDED, ex.log_tail(job_id)
    out = ex.log_tail(job_id).split()
    assert out[:3] == ["job-value", "base", job_id]
    assert Path(out[3]).resolve() == work.resolve()


def test_statuses_batch_unknown_ids_absent(ex: LocalExecutor) -> None:
    a = ex.launch("a", [PY, "-c", "pass"], env={}, cwd=None)
    b = ex.launch("b", [PY, "-c", "import time; time.sleep(30)"], env={}, cwd=None)
    wait_terminal(ex, a)
    result = ex.statuses([a, b, "local-doesnotexist", "../etc/passwd"])
    assert set(result) == {a, b}
    assert result[a].status == SUCCEEDED
    assert result[b].status == RUNNING
    assert result[b].exit_code is None and result[b].ended_at is None


def test_find_by_name_exact_match(ex: LocalExecutor) -> None:
    first = ex.launch("run1.train.w0", [PY, "-c", "pass"], env={}, cwd=None)
    other = ex.launch("run1.train.w0-extra", [PY, "-c", "pass"], env={}, cwd=None)
    second = ex.launch("run1.train.w0", [PY, "-c", "pass"], env={}, cwd=None)
    assert ex.find_by_name("run1.train.w0") == [first, second]
    assert ex.find_by_name("run1.train.w0-extra") == [other]
    assert ex.find_by_name("run1.train") == []
    # Another instance on the same state dir sees the same jobs.
    assert LocalExecutor(ex.state_dir).find_by_name("run1.train.w0") == [first, second]


def test_find_by_name_reads_the_name_index_not_every_record(ex: LocalExecutor, monkeypatch: pytest.MonkeyPatch) -> None:
    from npa_workflow.local_jobs import executor as executor_module

    job = ex.launch("run2.a.a1", [PY, "-c", "pass"], env={}, cwd=None)
    for i in range(30):  # other jobs of the home: never read by a lookup of another name
        ex.launch(f"run2.b{i}.a1", [PY, "-c", "pass"], env={}, cwd=None)
    read: list[Path] = []
    real = executor_module._read_json
    monkeypatch.setattr(executor_module, "_read_json", lambda path: read.append(path) or real(path))
    assert ex.find_by_name("run2.a.a1") == [job]
    assert read == [ex.jobs_dir / f"{job}.json"]
    # an entry whose record is gone (or not written yet: the entry comes first) is no job
    (ex.jobs_dir / f"{job}.json").unlink()
    assert ex.find_by_name("run2.a.a1") == []


def test_records_made_before_the_index_are_indexed_once(ex: LocalExecutor) -> None:
    import shutil

    old = ex.launch("run3.a.a1", [PY, "-c", "pass"], env={}, cwd=None)
    wait_terminal(ex, old)
    shutil.rmtree(ex.jobs_dir / "names")  # a home from before the index: records only
    assert LocalExecutor(ex.state_dir).find_by_name("run3.a.a1") == [old]
    assert (ex.jobs_dir / "names" / ".complete").exists()
    new = ex.launch("run3.a.a1", [PY, "-c", "pass"], env={}, cwd=None)
    assert ex.find_by_name("run3.a.a1") == [old, new]
    assert sorted(p.name for p in job_files(ex.jobs_dir, old)) == sorted([
        f"{old}.exit", f"{old}.json", f"{old}.lock", f"{old}.log", old])  # the name entry goes with the job


def test_cancel_kills_whole_group_including_grandchildren(ex: LocalExecutor, tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    script = f"sleep 60 & echo $! $$ > {pids}.tmp; mv {pids}.tmp {pids}; sleep 60"
    job_id = ex.launch("group", ["bash", "-c", script], env={}, cwd=None)
    grandchild, shell = (int(p) for p in wait_for_file(pids).split())
    record = json.loads((ex.jobs_dir / f"{job_id}.json").read_text())
    wrapper = record["pid"]
    assert alive(grandchild) and alive(shell) and alive(wrapper)
    assert os.getpgid(grandchild) == record["pgid"]

    started = time.monotonic()
    assert ex.cancel([job_id]) == [job_id]
    assert ex.wait_gone([job_id], timeout=5)
    assert time.monotonic() - started < 2.0  # SIGTERM was enough, no grace wait
    for pid in (grandchild, shell, wrapper):
        assert not alive(pid), pid
    info = ex.statuses([job_id])[job_id]
    assert info.status == CANCELLED
    assert info.ended_at is not None
    assert LocalExecutor(ex.state_dir).statuses([job_id])[job_id].status == CANCELLED


def test_cancel_escalates_to_sigkill(ex: LocalExecutor, tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    # SIGTERM is ignored by the shell and (inherited) by its children.
    script = f"trap '' TERM; sleep 60 & echo $! > {pids}.tmp; mv {pids}.tmp {pids}; sleep 60"
    job_id = ex.launch("stubborn", ["bash", "-c", script], env={}, cwd=None)
    grandchild = int(wait_for_file(pids))
    started = time.monotonic()
    ex.cancel([job_id], grace_seconds=0.5)
    assert ex.wait_gone([job_id], timeout=5)
    assert 0.4 < time.monotonic() - started < 3.0
    assert not alive(grandchild)
    assert ex.statuses([job_id])[job_id].status == CANCELLED


def test_cancel_after_success_keeps_outcome(ex: LocalExecutor) -> None:
    job_id = ex.launch("quick", [PY, "-c", "pass"], env={}, cwd=None)
    wait_terminal(ex, job_id)
    assert ex.cancel([job_id]) == []
    assert ex.statuses([job_id])[job_id].status == SUCCEEDED


def test_job_outcome_visible_from_another_process(tmp_path: Path) -> None:
    """A job launched by a process that has exited still gets its exit code recorded."""
    state = tmp_path / "state"
    launcher = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        from npa_workflow.local_jobs.executor import LocalExecutor
        ex = LocalExecutor(Path({str(state)!r}))
        print(ex.launch("detached", [sys.executable, "-c", "import time, sys; time.sleep(0.5); sys.exit(5)"],
                        env={{}}, cwd=None))
        """
    )
    env = {**os.environ, "PYTHONPATH": ENGINE_ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([PY, "-c", launcher], env=env, capture_output=True, text=True, timeout=30, check=True)
    job_id = out.stdout.strip()
    ex = LocalExecutor(state)
    assert ex.statuses([job_id])[job_id].status == RUNNING
    info = wait_terminal(ex, job_id)
    assert info.status == FAILED
    assert info.exit_code == 5
    assert info.name == "detached"


def test_lost_process_is_failed_not_running_forever(ex: LocalExecutor) -> None:
    job_id = ex.launch("doomed", [PY, "-c", "import time; time.sleep(60)"], env={}, cwd=None)
    record = json.loads((ex.jobs_dir / f"{job_id}.json").read_text())
    # SIGKILL the wrapper and its child at once: nobody records an exit code.
    os.killpg(record["pgid"], signal.SIGKILL)
    assert ex.wait_gone([job_id], timeout=5)
    fresh = LocalExecutor(ex.state_dir)  # as after a restart of the runner
    info = fresh.statuses([job_id])[job_id]
    assert info.status == FAILED
    assert info.exit_code is None
    assert info.error and info.error.startswith("process lost")
    assert not (ex.jobs_dir / f"{job_id}.exit").exists()
    # The verdict is durable.
    assert json.loads((ex.jobs_dir / f"{job_id}.json").read_text())["status"] == FAILED


def test_log_tail_returns_last_lines(ex: LocalExecutor) -> None:
    code = "for i in range(5000): print(f'line {i}')"
    job_id = ex.launch("chatty", [PY, "-c", code], env={}, cwd=None)
    wait_terminal(ex, job_id)
    tail = ex.log_tail(job_id, lines=3).splitlines()
    assert tail == ["line 4997", "line 4998", "line 4999"]
    assert ex.log_tail("local-unknown") == ""


def test_empty_command_rejected(ex: LocalExecutor) -> None:
    with pytest.raises(ValueError, match="empty command"):
        ex.launch("empty", [], env={}, cwd=None)


# ---------------------------------------------------------------------------------------------- started ahead
def ready_wrapper(ex: LocalExecutor, timeout: float = 10.0):
    """The wrapper the executor started ahead, once it is ready."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready = ex._ahead._ready
        if ready is not None:
            return ready
        time.sleep(0.01)
    raise AssertionError("no wrapper started ahead")


@pytest.fixture
def ahead(tmp_path: Path) -> Iterator[LocalExecutor]:
    executor = LocalExecutor(tmp_path / "state", grace_seconds=2.0, start_ahead=True)
    yield executor
    executor.close()
    ids = [p.stem for p in executor.jobs_dir.glob("*.json")]
    executor.cancel(ids, grace_seconds=0.2)
    executor.wait_gone(ids, timeout=5)


def test_a_launch_hands_its_job_to_the_wrapper_started_ahead(ahead: LocalExecutor, tmp_path: Path) -> None:
    first = ahead.launch("w.first", [PY, "-c", "pass"], env={}, cwd=None)  # no wrapper ready yet: started now
    ready = ready_wrapper(ahead)
    assert not (ahead.jobs_dir / f"{ready.job_id}.json").exists()  # no record: not a job yet, runs nothing
    work = tmp_path / "work"
    work.mkdir()
    code = "import os; print(os.getcwd(), os.environ.get('GIVEN'), os.environ.get('HOME_SECRET'), flush=True)"
    job = ahead.launch("w.second", [PY, "-c", code], env={"GIVEN": "yes"}, cwd=work)
    assert job == ready.job_id  # the id of the wrapper started ahead
    record = json.loads((ahead.jobs_dir / f"{job}.json").read_text())
    assert record["pid"] == ready.proc.pid and record["pgid"] == ready.proc.pid and record["status"] == RUNNING
    assert wait_terminal(ahead, job).status == SUCCEEDED and wait_terminal(ahead, first).status == SUCCEEDED
    assert ahead.log_tail(job).split() == [str(work), "yes", "None"]  # its cwd, and only the env it was given
    assert ahead.find_by_name("w.second") == [job]


def test_a_wrapper_started_ahead_and_let_go_leaves_nothing(ahead: LocalExecutor) -> None:
    ahead.launch("w.one", [PY, "-c", "pass"], env={}, cwd=None)
    ready = ready_wrapper(ahead)
    ahead.close()
    assert ready.proc.wait(timeout=5) == 0
    assert not list(ahead.jobs_dir.glob(f"{ready.job_id}.*"))  # no record, exit file, log or lock
    later = ahead.launch("w.two", [PY, "-c", "pass"], env={}, cwd=None)  # closed: started with its command
    assert later != ready.job_id and wait_terminal(ahead, later).status == SUCCEEDED
    time.sleep(0.2)
    assert ahead._ahead._ready is None  # and none started ahead any more


def test_a_recorded_job_whose_launcher_stops_before_handing_it_over_never_runs(ahead: LocalExecutor,
                                                                             tmp_path: Path) -> None:
    ahead.launch("w.one", [PY, "-c", "pass"], env={}, cwd=None)
    ready = ready_wrapper(ahead)
    marker = tmp_path / "ran"
    real_write = ready.proc.stdin.write
    ready.proc.stdin.write = lambda data: (_ for _ in ()).throw(BrokenPipeError())  # the launcher dies here
    job = ahead.launch("w.two", [PY, "-c", f"open({str(marker)!r}, 'w')"], env={}, cwd=None)
    ready.proc.stdin.write = real_write
    ready.proc.stdin.close()  # what the launcher's death does to the pipe
    info = wait_terminal(ahead, job)
    assert info.status == FAILED and "never started" in (info.error or "")
    assert not marker.exists()


def test_a_wrapper_started_ahead_that_died_is_not_used(ahead: LocalExecutor) -> None:
    ahead.launch("w.one", [PY, "-c", "pass"], env={}, cwd=None)
    ready = ready_wrapper(ahead)
    os.kill(ready.proc.pid, signal.SIGKILL)
    ready.proc.wait(timeout=5)
    job = ahead.launch("w.two", [PY, "-c", "pass"], env={}, cwd=None)
    assert job != ready.job_id and wait_terminal(ahead, job).status == SUCCEEDED


def test_cancel_ends_every_process_of_a_job_started_ahead(ahead: LocalExecutor, tmp_path: Path) -> None:
    ahead.launch("w.one", [PY, "-c", "pass"], env={}, cwd=None)
    ready_wrapper(ahead)
    pids = tmp_path / "pids"
    script = f"sleep 60 & echo $! $$ > {pids}.tmp; mv {pids}.tmp {pids}; sleep 60"
    job = ahead.launch("w.group", ["bash", "-c", script], env={}, cwd=None)
    grandchild, shell = (int(p) for p in wait_for_file(pids).split())
    assert alive(grandchild) and alive(shell)
    assert ahead.cancel([job], grace_seconds=0.5) == [job]
    assert ahead.wait_gone([job], timeout=10)
    assert not alive(grandchild) and not alive(shell)
    assert wait_terminal(ahead, job).status == CANCELLED
