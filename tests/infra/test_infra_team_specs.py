"""Teams' specs and catalogs outside this repository (issue 21, docs/production.md): context `specsDir` names the
folder of workflow specs the stack deploys and `catalogs` the tool catalog file(s) they use, merged into the one
the inbox reads. Checked by a synth of a team's folder in a temporary directory."""

from __future__ import annotations

from pathlib import Path

import pytest
from infra_support import UNIT_CONTEXT, synthesize

from infra.settings import SettingsError
from npa_workflow.errors import SpecError
from npa_workflow.spec.catalog import load_catalog_text

SHARED = """\
apiVersion: npa.workflow.tools/v1
tools:
  shared.publish: {description: publish, argv: ["python", "-m", "publish"], image: "python:3.11-slim"}
"""
TEAM = """\
apiVersion: npa.workflow.tools/v1
tools:
  team.fit: {description: fit, argv: ["python", "fit.py"], image: "python:3.11-slim"}
images: {trainer: "registry.example.com/trainer:1"}
"""
SPEC = """\
apiVersion: npa.workflow/v0.0.1
kind: Workflow
metadata: {name: team-pipeline}
states:
  fit: {toolRef: team.fit, next: publish}
  publish: {toolRef: shared.publish, terminal: true}
"""


def _team(tmp_path: Path) -> tuple[Path, Path, Path]:
    specs = tmp_path / "team-repo" / "workflows"
    specs.mkdir(parents=True)
    (specs / "pipeline.yaml").write_text(SPEC)
    team = tmp_path / "team-repo" / "tools.yaml"
    team.write_text(TEAM)
    shared = tmp_path / "platform" / "tools.yaml"
    shared.parent.mkdir()
    shared.write_text(SHARED)
    return specs, team, shared


def test_a_team_folder_and_two_catalogs_deploy_its_specs_and_publish_the_merged_catalog(tmp_path: Path) -> None:
    specs, team, shared = _team(tmp_path)
    synth = synthesize({**UNIT_CONTEXT, "specsDir": str(specs), "catalogs": f"{team},{shared}"}, tmp_path / "out")
    assert set(synth.stack.workflows.machines) == {"team-pipeline"}  # the team's, none of this repository's
    root = synth.outdir / synth.stack.catalog.asset.asset_path
    published = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}
    assert published == {"specs/team-pipeline.yaml", "tools.yaml", "machines.json"}
    catalog = load_catalog_text((root / "tools.yaml").read_text(), "tools.yaml")  # what the inbox reads
    assert set(catalog.tools) == {"team.fit", "shared.publish"} and catalog.images == {"trainer":
                                                                                       "registry.example.com/trainer:1"}
    assert (root / "specs" / "team-pipeline.yaml").read_text() == SPEC


def test_a_tool_in_two_catalogs_and_a_missing_folder_fail_the_synth_naming_them(tmp_path: Path) -> None:
    specs, team, shared = _team(tmp_path)
    shared.write_text(SHARED + TEAM.split("tools:\n", 1)[1].split("images:")[0])  # team.fit defined twice
    with pytest.raises(SpecError, match="tool 'team.fit' is defined in .*team-repo/tools.yaml too"):
        synthesize({**UNIT_CONTEXT, "specsDir": str(specs), "catalogs": [str(team), str(shared)]}, tmp_path / "o1")
    with pytest.raises(SettingsError, match="context specsDir='.*nowhere': no such folder"):
        synthesize({**UNIT_CONTEXT, "specsDir": str(tmp_path / "nowhere")}, tmp_path / "o2")
    with pytest.raises(SettingsError, match="context catalogs: '.*gone.yaml' is not a file"):
        synthesize({**UNIT_CONTEXT, "specsDir": str(specs), "catalogs": str(tmp_path / "gone.yaml")}, tmp_path / "o3")
