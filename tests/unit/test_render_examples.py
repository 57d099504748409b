"""`npa-workflow render` of every example under both assumptions: each job document loads with
SkyPilot's own loader, and parallel groups become JobGroups batched by maxConcurrency."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from npa_workflow.cli.app import app

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(p for p in (ROOT / "specs").glob("*.yaml") if p.name != "tools.yaml")


@pytest.fixture(scope="module")
def dag_utils():
    pytest.importorskip("sky")
    from sky.utils import dag_utils

    return dag_utils


@pytest.mark.skypilot
@pytest.mark.parametrize("assume", ["promote_checkpoint", "loop_back"])
@pytest.mark.parametrize("spec", EXAMPLES, ids=lambda p: p.stem)
def test_every_rendered_job_loads_with_skypilot(spec: Path, assume: str, tmp_path: Path, dag_utils) -> None:
    result = CliRunner().invoke(app, ["render", str(spec), "--assume-decision", assume, "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    files = sorted(tmp_path.glob("*.yaml"))
    jobs = [f for f in files if not f.name.endswith("-no-job.yaml")]
    assert jobs, "no job documents rendered"
    for f in jobs:
        dag = dag_utils.load_dag_from_yaml_str(f.read_text())
        assert dag.tasks, f.name
        if "execution: parallel" in f.read_text():
            assert dag.is_job_group() and len(dag.tasks) >= 2, f.name


@pytest.mark.skypilot
def test_fanout_group_renders_as_jobgroup_batches_only_on_request(tmp_path: Path, dag_utils) -> None:
    result = CliRunner().invoke(app, ["render", str(ROOT / "specs" / "fanout.yaml"), "--job-groups",
                                      "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    files = sorted(tmp_path.glob("*shards*.yaml"))
    groups = [dag_utils.load_dag_from_yaml_str(f.read_text()) for f in files]
    # 3 members, maxConcurrency 2: a JobGroup of two, then the last member as a plain task.
    assert [(d.is_job_group(), len(d.tasks)) for d in groups] == [(True, 2), (False, 1)]
    assert all(f.read_text().startswith("# The existing engine's shape") for f in files)


def test_render_shows_one_job_per_member_as_launch_submits(tmp_path: Path, dag_utils) -> None:
    result = CliRunner().invoke(app, ["render", str(ROOT / "specs" / "fanout.yaml"), "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    dags = {f.name: dag_utils.load_dag_from_yaml_str(f.read_text()) for f in sorted(tmp_path.glob("*.yaml"))}
    assert [name.split("-01-", 1)[1] for name in dags] == [
        "prepare.yaml", "shard-0.yaml", "shard-1.yaml", "shard-2.yaml", "join.yaml", "done.yaml"]
    assert all(not d.is_job_group() and len(d.tasks) == 1 for d in dags.values())


def test_render_of_an_invalid_spec_exits_1_with_the_path(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: npa.workflow/v0.0.1\nkind: Workflow\nstates:\n  a: {next: nowhere, terminal: true}\n")
    result = CliRunner().invoke(app, ["render", str(bad)])
    assert result.exit_code == 1
    assert f"{bad}: states.a.next:" in result.output


def test_rendered_code_mounts_load_with_skypilot(tmp_path: Path, dag_utils) -> None:
    result = CliRunner().invoke(app, ["render", str(ROOT / "specs" / "gate-loop.yaml"), "--code-bucket", "eng",
                                      "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    for f in sorted(tmp_path.glob("*.yaml")):
        [task] = dag_utils.load_dag_from_yaml_str(f.read_text()).tasks
        assert list(task.file_mounts.values())[0].startswith("s3://eng/code/"), f.name
        assert "cd /npa-workflow/code" in task.run
