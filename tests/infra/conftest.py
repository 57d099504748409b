"""Shared synths of the CDK app for the infra tests.

Unit tests synthesize in-process with bundling skipped (context `aws:cdk:bundling-stacks: []`) and CDK's built-in
CloudFormation validation off; each configuration is synthesized once per session. The CLI tests
(`test_infra_cli.py`) run the real pinned `node_modules/.bin/cdk` with bundling, offline.
"""

from __future__ import annotations

import pytest

pytest.importorskip("aws_cdk", reason="the infra extra is not installed (pip install -e '.[infra]')")

from infra_support import AD_HOC_CONTEXT, UNIT_CONTEXT, Synth, synthesize  # noqa: E402


@pytest.fixture(scope="session")
def default_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return synthesize(UNIT_CONTEXT, tmp_path_factory.mktemp("cdk-default"))


@pytest.fixture(scope="session")
def ad_hoc_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return synthesize(AD_HOC_CONTEXT, tmp_path_factory.mktemp("cdk-adhoc"))
