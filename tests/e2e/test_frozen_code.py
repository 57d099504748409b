"""`npa-workflow run` starts every step in a copy of its code staged when the run starts, as a SkyPilot task
starts in its `file_mounts`: an edit of the folder while the run goes does not reach it, and `run --resume` with
fixed code stages the fix (its report says from which code to which)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from e2e_support import run  # noqa: E402

from npa_workflow.render.code import code_bundle  # noqa: E402

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

SPEC = """apiVersion: npa.workflow/v0.0.1
kind: Workflow
metadata: {name: frozen-code}
initial: edit
states:
  edit: {run: {shell: 'bash steps/edit.sh'}, next: check}
  check: {run: {shell: 'bash steps/check.sh'}, terminal: true}
"""


def _folder(tmp_path: Path) -> tuple[Path, Path]:
    folder = tmp_path / "team"
    (folder / "steps").mkdir(parents=True)
    # The first step edits the folder's own copy of the second step's code, as a developer would mid-run.
    (folder / "steps" / "edit.sh").write_text(f"echo 'echo edited mid-run' > {folder / 'steps' / 'check.sh'}\n")
    (folder / "steps" / "check.sh").write_text("echo check v1; exit 3\n")
    spec = folder / "frozen-code.yaml"
    spec.write_text(SPEC)
    return folder, spec


def _log(home: Path, report: dict, state: str) -> str:
    wave = [w for w in report["waves"] if w["state"] == state][-1]
    return (home / "jobs" / f"{wave['job_id']}.log").read_text()


def test_a_run_runs_the_code_it_started_with_and_a_resume_runs_the_fix(tmp_path: Path) -> None:
    folder, spec = _folder(tmp_path)
    staged = code_bundle(folder)
    home = tmp_path / "home"
    failed = run(spec, home, run_id="frozen-1")
    assert failed["status"] == "FAILED"
    assert _log(home, failed, "check").strip() == "check v1"  # the staged copy, not the folder edited mid-run
    assert (folder / "steps" / "check.sh").read_text().strip() == "echo edited mid-run"
    assert (home / "code" / staged.digest / "steps" / "check.sh").read_text() == "echo check v1; exit 3\n"
    assert failed["notices"] == []
    (folder / "steps" / "check.sh").write_text("echo check v2\n")  # the fix
    resumed = run(spec, home, run_id="frozen-1", resume=True)
    assert resumed["status"] == "SUCCEEDED", resumed["error"]
    assert _log(home, resumed, "check").strip() == "check v2"
    fixed = code_bundle(folder)
    assert [w["replayed"] for w in resumed["waves"] if w["state"] == "edit"] == [True]
    [notice] = resumed["notices"]
    assert f"{staged.digest[:12]} -> {fixed.digest[:12]}" in notice


def test_an_unchanged_folder_is_staged_once_and_the_home_inside_it_is_not_code(tmp_path: Path) -> None:
    folder = tmp_path / "team"
    (folder / "steps").mkdir(parents=True)
    (folder / "steps" / "ok.sh").write_text("pwd\n")
    spec = folder / "once.yaml"
    spec.write_text(SPEC.replace("frozen-code", "once").replace("steps/edit.sh", "steps/ok.sh")
                    .replace("steps/check.sh", "steps/ok.sh"))
    home = folder / "state"  # $NPA_WORKFLOW_HOME inside the folder, under a name the stage does not skip by itself
    first = run(spec, home, run_id="once-1")
    second = run(spec, home, run_id="once-2")
    assert first["status"] == second["status"] == "SUCCEEDED"
    [checkout] = list((home / "code").iterdir())  # one copy for both runs: the home's checkouts are not code
    assert checkout.name == code_bundle(folder, exclude=home).digest
    assert _log(home, second, "check").strip() == str(checkout)
