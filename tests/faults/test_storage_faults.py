"""What the disk does to a local run (issue 18, item 5): a full disk, a read-only home and damaged state each give
one line naming the path and the fix, no traceback; the run stays resumable and `--resume` after freeing space
succeeds. On small tmpfs mounts (skipped where this process may not mount)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

CLI = [sys.executable, "-c", "from npa_workflow.cli.app import main; main()"]


def _cli(*args: str, home: Path, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, cwd=cwd, timeout=timeout,
                          env={**os.environ, "NPA_WORKFLOW_HOME": str(home)})


def _clean(result: subprocess.CompletedProcess[str]) -> None:
    text = result.stdout + result.stderr
    assert "Traceback" not in text and "internal error" not in text and "please report" not in text, text


@contextlib.contextmanager
def _tmpfs(path: Path, size: str) -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def _spec(ws: Path, body: str) -> Path:
    ws.mkdir(parents=True, exist_ok=True)
    spec = ws / "s.yaml"
    spec.write_text("apiVersion: npa.workflow/v0.0.1\nkind: Workflow\nmetadata: {name: s}\n" + body)
    return spec


@pytest.mark.timeout(300)
def test_a_step_that_fills_the_disk_fails_the_run_in_one_line_and_resume_succeeds(tmp_path: Path) -> None:
    with _tmpfs(tmp_path / "home", "40m") as home:
        filler = home / "filler"
        spec = _spec(tmp_path / "ws", f"""\
initial: fill
states:
  fill: {{run: {{shell: "test -e {filler}.done || head -c 100000000 /dev/zero > {filler}; sleep 1"}}, next: after}}
  after: {{run: {{shell: "echo after"}}, terminal: true}}
""")
        full = _cli("run", str(spec), "--run-id", "full1", home=home, cwd=spec.parent, timeout=200)
        assert full.returncode == 1, full.stdout + full.stderr
        _clean(full)
        errors = [line for line in full.stderr.splitlines() if "error" in line]
        assert len(errors) == 1 and ("No space left on device" in errors[0] or "disk is full" in errors[0]), full.stderr
        assert str(home) in errors[0] and "free space" in errors[0] and "--resume --run-id full1" in errors[0]
        filler.unlink()  # free the space; the step now finds its marker and does not fill it again
        Path(f"{filler}.done").touch()
        resumed = _cli("run", str(spec), "--run-id", "full1", "--resume", home=home, cwd=spec.parent, timeout=200)
        _clean(resumed)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        assert "SUCCEEDED" in resumed.stdout


# The CLI with a disk that fills during a watch pass: once the step has made `FILL_MARKER`, from the call of the
# ledger method `FILL_AT` on (in the watch function), every write of the durable layer is refused as sqlite refuses
# it on a full disk. So the first request to meet the full disk is that call's, which moto answers 500 (botocore
# retries it). `release_watch_lease` (an UpdateItem whose failure fails the function): the order that, under load,
# had the event pump say "watch failed (attempt 1 of 3): ... (500) ... UpdateItem" before the run's one line.
# `note_changes` with a change to note (an UpdateItem the pass survives, warning "watch: noting changed runs: ...
# (500)"): the order that, in a loaded suite, put that warning before the run's one line. With `STOP_IN_CLEANUP`,
# the run stops on the fault only once the Catch's cleanup (the next wave's launch failed on the disk) has started,
# and the cleanup goes on 2 s later: the order that, in CI, had the cleanup meet the backends the run's end reset
# ("cleanup: cancelling the jobs of run full2 failed: ResourceNotFoundException" after the one line).
_WATCH_FILLS_THE_DISK = """\
import os, sqlite3
from pathlib import Path
from npa_workflow.embedded_aws import durable_aws
from npa_workflow.ledger import dynamodb
marker, at, full = Path(os.environ["FILL_MARKER"]), os.environ["FILL_AT"], []
filled_at, record = getattr(dynamodb.DynamoLedger, at), durable_aws.DurableAws._record_item
def filling(self, *args, **kwargs):
    if marker.exists() and (at != "note_changes" or self._changed_runs):
        full.append(True)
    return filled_at(self, *args, **kwargs)
def recording(self, *args, **kwargs):
    if full:
        raise sqlite3.OperationalError("database or disk is full")
    return record(self, *args, **kwargs)
setattr(dynamodb.DynamoLedger, at, filling)
durable_aws.DurableAws._record_item = recording
if os.environ.get("STOP_IN_CLEANUP"):
    import threading, time
    from functions.cleanup import handler as cleanup_handler
    from npa_workflow.local import runtime
    entered, cleanup, wait_for_end = threading.Event(), cleanup_handler.cleanup, runtime.LocalRuntime._wait_for_end
    def late_cleanup(*args, **kwargs):
        entered.set()
        time.sleep(2)  # the run stops meanwhile
        try:
            return cleanup(*args, **kwargs)
        except Exception as exc:
            code = getattr(exc, "response", {}).get("Error", {}).get("Code")  # a ClientError's, if it is one
            Path(f"{marker}.cleanup").write_text(code or type(exc).__name__)
            raise
        finally:
            Path(f"{marker}.cleanup").touch()
    def stops_in_cleanup(self, *args, **kwargs):
        try:
            return wait_for_end(self, *args, **kwargs)
        except sqlite3.OperationalError:
            entered.wait(60)
            raise
    cleanup_handler.cleanup, runtime.LocalRuntime._wait_for_end = late_cleanup, stops_in_cleanup
from npa_workflow.cli.app import main
main()
"""


@pytest.mark.timeout(180)
@pytest.mark.parametrize("fill_at,stop_in_cleanup", [("release_watch_lease", ""), ("note_changes", ""),
                                                     ("note_changes", "1")])
def test_a_disk_the_watch_finds_full_first_is_still_one_line(tmp_path: Path, fill_at: str,
                                                             stop_in_cleanup: str) -> None:
    marker = tmp_path / "filled"
    spec = _spec(tmp_path / "ws", f"""\
initial: fill
states:
  fill: {{run: {{shell: "sleep 1; touch {marker}"}}, next: after}}
  after: {{run: {{shell: "echo after"}}, terminal: true}}
""")
    home = tmp_path / "home"
    full = subprocess.run([sys.executable, "-c", _WATCH_FILLS_THE_DISK, "run", str(spec), "--run-id", "full2"],
                          capture_output=True, text=True, cwd=spec.parent, timeout=150,
                          env={**os.environ, "NPA_WORKFLOW_HOME": str(home), "FILL_MARKER": str(marker),
                               "FILL_AT": fill_at, "STOP_IN_CLEANUP": stop_in_cleanup})
    assert full.returncode == 1, full.stdout + full.stderr
    _clean(full)
    [line] = [ln for ln in full.stderr.splitlines() if ln.strip()]  # no retry notice nor warning before it
    assert "database or disk is full" in line and str(home) in line, full.stderr
    assert "free space" in line and "--resume --run-id full2" in line, full.stderr
    if stop_in_cleanup:  # the cleanup in flight ended on the embedded AWS it started on (refusing writes), not reset
        ended = tmp_path / "filled.cleanup"
        assert ended.exists(), "the cleanup never ran, or never ended: the run's end did not wait for it"
        met = ended.read_text()
        assert met != "ResourceNotFoundException", "the cleanup in flight met the backends the run's end reset"


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> tuple[Path, Path]:
    """A home with one finished run (its state kept as the runtime keeps it)."""
    base = tmp_path_factory.mktemp("finished")
    spec = _spec(base / "ws", 'initial: a\nstates:\n  a: {run: {shell: "echo hello"}, terminal: true}\n')
    home = base / "home"
    done = _cli("run", str(spec), "--run-id", "r1", home=home, cwd=spec.parent)
    assert done.returncode == 0, done.stdout + done.stderr
    return spec, home


def _damaged_copy(finished_run, tmp_path: Path) -> tuple[Path, Path, Path]:
    spec, home = finished_run
    copy = tmp_path / "home"
    shutil.copytree(home, copy, symlinks=True)
    return spec, copy, copy / "runs" / "r1"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("damage", ["malformed meta.json", "malformed state file", "emptied state file"])
def test_damaged_state_is_one_line_naming_the_file_and_the_fix(finished_run, tmp_path: Path, damage: str) -> None:
    spec, home, run_dir = _damaged_copy(finished_run, tmp_path)
    target = run_dir / ("meta.json" if "meta" in damage else "aws/state.sqlite")
    for wal in run_dir.glob("aws/state.sqlite-*"):
        wal.unlink()
    target.write_bytes(b"" if "emptied" in damage else b'{"run_id": "r1", "spec": ' + b"\x00" * 64)
    result = _cli("run", str(spec), "--run-id", "r1", "--resume", home=home, cwd=spec.parent)
    _clean(result)
    assert result.returncode == 1
    [line] = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert str(target) in line and "fix:" in line, line
    if "emptied" in damage:
        assert "holds no record of run 'r1'" in line and "start it over as a new run" in line
    assert not (run_dir / "aws" / "lock").exists() or "execution" not in result.stdout  # nothing started


@pytest.mark.timeout(180)
def test_a_read_only_home_is_read_without_tracebacks(finished_run, tmp_path: Path) -> None:
    spec, home = finished_run
    with _tmpfs(tmp_path / "ro", "20m") as mount:
        shutil.copytree(home, mount / "home", symlinks=True)
        if subprocess.run(["mount", "-o", "remount,ro", str(mount)], capture_output=True).returncode != 0:
            pytest.skip("cannot remount the tmpfs read-only")
        ro_home = mount / "home"
        logs = _cli("logs", "r1", home=ro_home, cwd=tmp_path)
        _clean(logs)
        assert logs.returncode == 0 and logs.stdout == "hello\n", logs.stderr
        listed = _cli("list", home=ro_home, cwd=tmp_path)
        _clean(listed)
        assert listed.returncode == 0 and "r1" in listed.stdout, listed.stderr
        gc = _cli("gc", "--older-than", "0", "--yes", home=ro_home, cwd=tmp_path)
        _clean(gc)
        assert gc.returncode == 1 and "Read-only file system" in gc.stderr and "fix:" in gc.stderr, gc.stderr
        run = _cli("run", str(spec), "--run-id", "r2", home=ro_home, cwd=spec.parent)
        _clean(run)
        assert run.returncode != 0 and str(ro_home) in run.stderr, run.stderr
