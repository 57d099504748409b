"""cfn-lint exceptions on single resources, each with its reason.

cfn-lint reads `Metadata.cfn-lint.config.ignore_checks` of a resource and skips those rules for it alone; the
reason goes beside it (`Metadata.npa-workflow:lint-reasons`) so the template itself says why. The repository's
`.cfnlintrc.yaml` ignores nothing but W3005 stack-wide.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnResource
from constructs import IConstruct

REASONS_KEY = "npa-workflow:lint-reasons"


def ignore_cfn_lint(construct: IConstruct, rule: str, reason: str) -> None:
    resource = construct.node.default_child if not isinstance(construct, CfnResource) else construct
    if not isinstance(resource, CfnResource):
        raise TypeError(f"{construct.node.path} has no CloudFormation resource to put a cfn-lint exception on")
    lint: dict[str, Any] = resource.get_metadata("cfn-lint") or {"config": {"ignore_checks": []}}
    checks = lint["config"]["ignore_checks"]
    if rule not in checks:
        checks.append(rule)
    resource.add_metadata("cfn-lint", lint)
    reasons: dict[str, str] = resource.get_metadata(REASONS_KEY) or {}
    reasons[rule] = reason
    resource.add_metadata(REASONS_KEY, reasons)
