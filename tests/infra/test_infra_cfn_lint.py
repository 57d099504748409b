"""cfn-lint on the synthesized templates, with the repository's .cfnlintrc.yaml (W3005 ignored, nothing else)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from infra_support import REPO_ROOT, Synth

from infra.lint import REASONS_KEY


def _cfn_lint() -> list[str]:
    exe = Path(sys.executable).with_name("cfn-lint")
    if exe.exists():
        return [str(exe)]
    found = shutil.which("cfn-lint")
    if not found:
        pytest.fail("cfn-lint is not installed (it is in the dev extra: pip install -e '.[dev]')")
    return [found]


def test_config_ignores_only_w3005_and_adds_the_serverless_rules() -> None:
    config = yaml.safe_load((REPO_ROOT / ".cfnlintrc.yaml").read_text())
    assert config["ignore_checks"] == ["W3005"]
    assert config["append_rules"] == ["cfn_lint_serverless.rules"]


def test_every_resource_level_exception_has_a_reason(default_synth: Synth, ad_hoc_synth: Synth) -> None:
    """Only rules that misread this template are skipped, and only on the resource they misread."""
    allowed = {"WS1004", "WS1000", "ES1007", "ES6000"}
    for synth in (default_synth, ad_hoc_synth):
        for logical_id, resource in synth.template["Resources"].items():
            ignored = resource.get("Metadata", {}).get("cfn-lint", {}).get("config", {}).get("ignore_checks", [])
            reasons = resource.get("Metadata", {}).get(REASONS_KEY, {})
            assert set(ignored) <= allowed, logical_id
            assert set(ignored) == set(reasons) and all(len(r) > 40 for r in reasons.values()), logical_id


def test_every_function_logs_to_a_log_group_with_retention(default_synth: Synth) -> None:
    """What WS1004 means, checked the way these functions log (LoggingConfig.LogGroup, not /aws/lambda/<name>)."""
    resources = default_synth.template["Resources"]
    for logical_id, fn in default_synth.resources("AWS::Lambda::Function").items():
        group = fn["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]
        assert resources[group]["Properties"]["RetentionInDays"] >= 30, logical_id


def test_synthesized_templates_are_cfn_lint_clean(default_synth: Synth, ad_hoc_synth: Synth) -> None:
    templates = [
        str(synth.outdir / f"{synth.stack.artifact_id}.template.json") for synth in (default_synth, ad_hoc_synth)
    ]
    result = subprocess.run(
        [*_cfn_lint(), "--config-file", str(REPO_ROOT / ".cfnlintrc.yaml"), "--", *templates],
        capture_output=True, text=True, cwd=REPO_ROOT, timeout=300, check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
