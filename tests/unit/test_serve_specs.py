"""`serve` refuses a specs folder where two specs share a metadata.name (one would silently win)."""

from __future__ import annotations

import pytest

from npa_workflow.local.runtime import LocalRunError
from npa_workflow.local.serve import Serve, ServeOptions

SPEC = "apiVersion: npa.workflow/v0.0.1\nkind: Workflow\nmetadata: {name: train-eval}\n" \
       "states:\n  a: {run: {shell: '%s'}, terminal: true}\n"


def test_two_specs_with_one_name_are_an_error_at_start(tmp_path):
    (tmp_path / "tools.yaml").write_text("apiVersion: npa.workflow.tools/v1\ntools: {}\n")
    (tmp_path / "train-eval.yaml").write_text(SPEC % "train")
    serve = Serve(ServeOptions(catalog=tmp_path / "tools.yaml", home=tmp_path / "home"))
    assert [loaded.spec.name for _, loaded in serve._load_specs()] == ["train-eval"]
    (tmp_path / "train-eval-typo.yaml").write_text(SPEC % "trian")
    with pytest.raises(LocalRunError, match="both have metadata.name 'train-eval'"):
        serve._load_specs()
