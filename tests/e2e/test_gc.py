"""`npa-workflow gc`: lists idle local runs (dry run), deletes them with --yes (run folder and job files), and
never touches a run another process holds."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from e2e_support import cli, run, workspace, write_spec  # noqa: E402

from npa_workflow.embedded_aws.durable_aws import DurableAws  # noqa: E402
from npa_workflow.local.gc import find_prunable, find_unused_code  # noqa: E402

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(90)]


def test_gc_lists_then_deletes_idle_runs_and_their_job_files_but_not_a_held_run(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    spec = write_spec(ws, "echo", """\
        initial: hi
        states:
          hi: {run: {argv: ["echo", "hi"]}, terminal: true}
        """)
    home = tmp_path / "home"
    report = run(spec, home, run_id="old-run")
    assert report["status"] == "SUCCEEDED"
    job_id = report["waves"][0]["job_id"]
    assert list((home / "jobs").glob(f"{job_id}.*")) and list((home / "jobs" / "names").glob(f"*/{job_id}"))
    [staged] = list((home / "code").iterdir())  # the run's steps started in a copy of their code
    assert find_unused_code(home, 0, []) == []  # its job's record stays: so does the code it started in
    held = home / "runs" / "held-run" / "aws"
    held_state = DurableAws(held)  # as a running (or resuming) process holds its run
    try:
        assert [r.run_id for r in find_prunable(home, 0)] == ["old-run"]
        dry = cli("gc", "--older-than", "0", "--json", home=home)
        assert dry.returncode == 0, dry.stderr
        listed = json.loads(dry.stdout)
        assert listed["deleted"] is False and [r["run_id"] for r in listed["runs"]] == ["old-run"]
        assert listed["runs"][0]["status"] == "SUCCEEDED" and listed["runs"][0]["job_files"] >= 2
        assert [c["digest"] for c in listed["code"]] == [staged.name]  # no job left after the prune used it
        assert (home / "runs" / "old-run").is_dir() and staged.is_dir()  # a dry run deletes nothing
        recent = json.loads(cli("gc", "--json", home=home).stdout)
        assert recent["runs"] == [] and recent["code"] == []  # not idle for 7 days

        done = cli("gc", "--older-than", "0", "--yes", home=home)
        assert done.returncode == 0 and "deleted old-run" in done.stdout, done.stdout
        assert f"deleted staged code {staged.name[:12]}" in done.stdout and not staged.exists()
        assert not (home / "runs" / "old-run").exists()
        assert not list((home / "jobs").glob(f"{job_id}.*"))
        assert not list((home / "jobs" / "names").glob(f"*/{job_id}"))  # nor its entry in the name index
        assert held.is_dir()
    finally:
        held_state.close()
    assert [r.run_id for r in find_prunable(home, 0)] == ["held-run"]  # released: prunable now


def test_gc_keeps_a_run_whose_job_still_runs(tmp_path: Path) -> None:
    """A job left running (--no-cancel-on-timeout, or one that outlived its launcher) keeps its record: without it
    `npa-workflow jobs cancel` could not find it. Once it has ended, the run is prunable with its job files."""
    from npa_workflow.local_jobs.executor import LocalExecutor

    home = tmp_path / "home"
    local = LocalExecutor(home, env={"PATH": "/usr/bin:/bin"}, grace_seconds=1.0)
    job_id = local.launch("left-running", ["sleep", "30"])
    run_dir = home / "runs" / "left-run"
    run_dir.mkdir(parents=True)
    # The ledger as a run kept it before its stack was durable (gc reads the job ids from it).
    (run_dir / "ledger.json").write_text(json.dumps({"items": [{"job_id": {"S": job_id}}]}), encoding="utf-8")
    try:
        assert find_prunable(home, 0) == []
    finally:
        local.cancel([job_id])
        assert local.wait_gone([job_id], timeout=10)
    found = find_prunable(home, 0)
    assert [r.run_id for r in found] == ["left-run"]
    assert any(p.name == f"{job_id}.json" for p in found[0].job_files)
