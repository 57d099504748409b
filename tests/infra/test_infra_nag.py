"""cdk-nag AwsSolutionsChecks runs in the app with zero unacknowledged findings; every acknowledgement is specific."""

from __future__ import annotations

from pathlib import Path

import pytest
from aws_cdk import aws_iam as iam
from infra_support import UNIT_CONTEXT, Synth


@pytest.mark.parametrize("variant", ["default_synth", "ad_hoc_synth"])
def test_no_unacknowledged_nag_errors_or_warnings(variant: str, request: pytest.FixtureRequest) -> None:
    synth: Synth = request.getfixturevalue(variant)
    findings = [
        (v["ruleName"], v["severity"], [c["constructPath"] for c in v["violatingConstructs"]])
        for v in synth.violations("AwsSolutions")
    ]
    assert findings == []
    # Nothing else warns either (e.g. the missing-endpoint annotation: the tests set an endpoint).
    assert synth.report.get("pluginReports", []) == []


@pytest.mark.parametrize("variant", ["default_synth", "ad_hoc_synth"])
def test_each_acknowledgement_is_specific_and_has_a_reason(variant: str, request: pytest.FixtureRequest) -> None:
    synth: Synth = request.getfixturevalue(variant)
    acks = synth.stack.nag_acknowledgements
    assert acks
    stack_path = synth.stack.node.path
    for path, finding, reason in acks:
        assert path != stack_path, f"{finding} acknowledged for the whole stack"
        assert finding.startswith("AwsSolutions-")
        if finding.startswith("AwsSolutions-IAM5"):
            assert finding.startswith("AwsSolutions-IAM5[Resource::") and finding.endswith("]"), finding
        assert len(reason) >= 60, (finding, reason)
    assert len({(p, f) for p, f, _ in acks}) == len(acks), "a finding acknowledged twice"


def test_the_nag_plugin_reports_a_new_wildcard(tmp_path: Path) -> None:
    """Proof that the checks run: an unacknowledged wildcard fails the synth with the nag rule's id."""
    from infra.app import build_app

    app, stack = build_app(UNIT_CONTEXT, outdir=str(tmp_path), validation=False)
    iam.Policy(
        stack,
        "TooWide",
        statements=[iam.PolicyStatement(actions=["s3:GetObject"], resources=["arn:aws:s3:::somebody-elses/*"])],
        roles=[stack.engine.roles["reap"]],
    )
    with pytest.raises(Exception, match="AwsSolutions-IAM5") as err:
        app.synth()
    assert "somebody-elses" in str(err.value)


def test_only_the_expected_kinds_of_findings_are_acknowledged(default_synth: Synth) -> None:
    kinds = {finding.split("[")[0] for _, finding, _ in default_synth.stack.nag_acknowledgements}
    assert kinds == {"AwsSolutions-IAM5", "AwsSolutions-SMG4", "AwsSolutions-SQS3", "AwsSolutions-L1"}


@pytest.mark.parametrize("variant", ["default_synth", "ad_hoc_synth"])
def test_the_runtime_finding_is_acknowledged_only_for_the_catalog_deployment_handler(
    variant: str, request: pytest.FixtureRequest
) -> None:
    """The engine functions run the newest Python; only aws-cdk-lib's BucketDeployment handler (its runtime fixed
    by aws-cdk-lib) is let off AwsSolutions-L1."""
    synth: Synth = request.getfixturevalue(variant)
    runtime = [path for path, finding, _ in synth.stack.nag_acknowledgements if finding == "AwsSolutions-L1"]
    assert runtime == [synth.stack.catalog.handler.node.path]


def test_catalog_acknowledgements_name_the_catalog_prefix_only(default_synth: Synth, ad_hoc_synth: Synth) -> None:
    bucket = f"<{default_synth.logical_id(default_synth.stack.storage.bucket)}.Arn>"
    stack = default_synth.stack
    by_path: dict[str, set[str]] = {}
    for path, finding, _ in stack.nag_acknowledgements:
        by_path.setdefault(path, set()).add(finding)
    assert by_path[stack.catalog.role.node.path] == {f"AwsSolutions-IAM5[Resource::{bucket}/catalog/*]"}
    assert f"AwsSolutions-IAM5[Resource::{bucket}/catalog/*]" in by_path[stack.engine.roles["inbox"].node.path]
    ad_hoc = ad_hoc_synth.stack
    ad_hoc_role = {f for p, f, _ in ad_hoc.nag_acknowledgements if p == ad_hoc.ad_hoc_role.node.path}
    arn = "arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>"
    assert ad_hoc_role == {
        "AwsSolutions-IAM5[Resource::*]",
        f"AwsSolutions-IAM5[Resource::{arn}:stateMachine:NpaWorkflow_adhoc_*]",
        f"AwsSolutions-IAM5[Resource::{arn}:execution:NpaWorkflow_adhoc_*:*]",
        f"AwsSolutions-IAM5[Resource::{arn}:execution:NpaWorkflow_adhoc_*/*:*]",
        f"AwsSolutions-IAM5[Resource::{bucket}/runs/*]",
    }
