"""Specs that mean what they mean in the existing engine: each spec of tests/unit/data/compat/ is planned and its
commands and outputs compared with the plan written beside it (`<name>.plan.json`), which is the existing engine's
reading of the spec (docs/language.md: `params`, "Tokens")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from npa_workflow.errors import SpecError
from npa_workflow.plan.planner import build_plan
from npa_workflow.spec.catalog import EMPTY_CATALOG
from npa_workflow.spec.load import load_spec, load_spec_text

CORPUS = Path(__file__).resolve().parent / "data" / "compat"
SPECS = sorted(CORPUS.glob("*.yaml"))


@pytest.mark.parametrize("spec", SPECS, ids=[s.stem for s in SPECS])
def test_the_plan_of_each_compat_spec_is_the_existing_engines(spec: Path) -> None:
    expected = json.loads(spec.with_suffix(".plan.json").read_text())
    plan = build_plan(load_spec(spec, catalog=EMPTY_CATALOG), run_id="compat")
    got = [{"state": s.state, "argv": s.argv, "outputs": [o["uri"] for o in s.outputs]} for s in plan.steps]
    assert got == expected


def test_the_corpus_is_not_empty() -> None:
    assert SPECS, "tests/unit/data/compat/ holds no spec"


BAKED = ("apiVersion: npa.workflow/v0.0.1\nkind: Workflow\nmetadata: {name: baked}\n"
         "config: {require_baked_npa: 'true', source_sha: ''}\nstates:\n  a: {run: {shell: x}, terminal: true}\n")


def test_the_existing_engines_require_baked_npa_vars_are_accepted() -> None:
    sha = "0123456789abcdef0123456789abcdef01234567"
    loaded = load_spec_text(BAKED, overrides={"source_sha": sha, "require_baked_npa": "1"})
    assert loaded.spec.config["source_sha"] == sha
    with pytest.raises(SpecError, match="config.sourc_sha"):  # a typo of it is still one
        load_spec_text(BAKED, overrides={"sourc_sha": sha})
