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


def test_serve_creates_the_buckets_a_templated_config_names_as_run_does(tmp_path):
    """issue 19: serve skipped every config value holding `{`, so a templated `config.bucket` that `run` created
    failed under serve with NoSuchBucket. Both resolve the config now (`config_buckets`); only what depends on the
    run id is unknown before the run."""
    from npa_workflow.local.embedded_stack import config_buckets
    from npa_workflow.spec.load import load_spec

    (tmp_path / "tools.yaml").write_text("apiVersion: npa.workflow.tools/v1\ntools: {}\n")
    spec = tmp_path / "templated.yaml"
    spec.write_text(
        "apiVersion: npa.workflow/v0.0.1\nkind: Workflow\nmetadata: {name: templated}\n"
        "config:\n  env: dev\n  bucket: 'team-{{config.env}}'\n  models: 's3://models-{{config.env}}/m/'\n"
        "  scratch: 's3://scratch-{{run.id}}/x/'\n"
        "states:\n  a: {run: {shell: 'true'}, terminal: true}\n")
    loaded = load_spec(spec, catalog=tmp_path / "tools.yaml")
    assert config_buckets(loaded) == ["team-dev", "models-dev"]  # serve, before any run
    assert config_buckets(loaded, "r1") == ["team-dev", "models-dev", "scratch-r1"]  # run, for its run id
