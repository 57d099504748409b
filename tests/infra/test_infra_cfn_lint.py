"""cfn-lint on the synthesized templates, with the repository's .cfnlintrc.yaml (W3005 ignored, nothing else)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from infra_support import REPO_ROOT, Synth


def _cfn_lint() -> list[str]:
    exe = Path(sys.executable).with_name("cfn-lint")
    if exe.exists():
        return [str(exe)]
    found = shutil.which("cfn-lint")
    if not found:
        pytest.fail("cfn-lint is not installed (it is in the dev extra: pip install -e '.[dev]')")
    return [found]


def test_config_ignores_only_w3005() -> None:
    config = yaml.safe_load((REPO_ROOT / ".cfnlintrc.yaml").read_text())
    assert config["ignore_checks"] == ["W3005"]


def test_synthesized_templates_are_cfn_lint_clean(default_synth: Synth, ad_hoc_synth: Synth) -> None:
    templates = [
        str(synth.outdir / f"{synth.stack.artifact_id}.template.json") for synth in (default_synth, ad_hoc_synth)
    ]
    result = subprocess.run(
        [*_cfn_lint(), "--config-file", str(REPO_ROOT / ".cfnlintrc.yaml"), "--", *templates],
        capture_output=True, text=True, cwd=REPO_ROOT, timeout=300, check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
