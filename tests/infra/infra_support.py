"""What the infra tests share: the repository root on sys.path, the contexts they synthesize with, and `Synth`.

(A module of its own rather than conftest.py, whose name other test folders use too.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))


def _node_major() -> str:
    try:
        out = subprocess.run(["node", "--version"], capture_output=True, text=True, check=False).stdout
    except OSError:
        return ""
    return out.strip().lstrip("v").split(".")[0]


# jsii prints a banner per process on an end-of-life Node; the tests read stderr, so keep it out of the way.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", _node_major())
os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")

from aws_cdk.assertions import Template  # noqa: E402

ENDPOINT = "https://skypilot.example.com"
SECRET_ARN = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:npa/skypilot-token-AbCdEf"
STEP_SECRETS_ARN = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:npa/step-secrets"  # no suffix: partial
TOKEN_KEY_ARN = "arn:aws:kms:eu-west-1:123456789012:key/11111111-1111-1111-1111-111111111111"
STEP_SECRETS_KEY_ARN = "arn:aws:kms:eu-west-1:123456789012:key/22222222-2222-2222-2222-222222222222"
DATA_KEY_ARN = "arn:aws:kms:eu-west-1:123456789012:key/33333333-3333-3333-3333-333333333333"
UNIT_CONTEXT: dict[str, Any] = {"aws:cdk:bundling-stacks": [], "skypilotEndpoint": ENDPOINT}
AD_HOC_CONTEXT: dict[str, Any] = {
    **UNIT_CONTEXT,
    "allowAdHocSpecs": "true",  # as `-c allowAdHocSpecs=true` gives it: a string
    "dataBuckets": "team-data,team-models",
    "skypilotTokenSecretArn": SECRET_ARN,
    "watchIntervalMinutes": 5,
    "retentionDays": 90,
    "alarmTopicArn": "arn:aws:sns:eu-west-1:123456789012:oncall",
    "stepSecretsArn": STEP_SECRETS_ARN,
    "skypilotTokenKmsKeyArn": TOKEN_KEY_ARN,
    "stepSecretsKmsKeyArn": STEP_SECRETS_KEY_ARN,
    "dataBucketKmsKeyArns": DATA_KEY_ARN,
    "triggerEventBuckets": "team-data",
}


@dataclass
class Synth:
    stack: Any
    outdir: Path
    template: dict[str, Any]
    report: dict[str, Any]

    @property
    def assertions(self) -> Template:
        return Template.from_json(self.template)

    def resources(self, kind: str) -> dict[str, dict[str, Any]]:
        return {lid: r for lid, r in self.template["Resources"].items() if r["Type"] == kind}

    def logical_id(self, construct: Any) -> str:
        return self.stack.resolve(self.stack.get_logical_id(construct.node.default_child))

    def definition_text(self, machine: Any) -> str:
        """A machine's definition as deployed: the asset file `DefinitionS3Location` names (the synth copied it)."""
        props = self.template["Resources"][self.logical_id(machine)]["Properties"]
        return (self.outdir / f"asset.{props['DefinitionS3Location']['Key']}").read_text(encoding="utf-8")

    def definition(self, machine: Any) -> dict[str, Any]:
        return json.loads(self.definition_text(machine))

    def violations(self, plugin: str) -> list[dict[str, Any]]:
        return [
            v for r in self.report.get("pluginReports", []) if r.get("pluginName") == plugin for v in r["violations"]
        ]


def synthesize(context: dict[str, Any], outdir: Path, **stack_kwargs: Any) -> Synth:
    from infra.app import build_app

    app, stack = build_app(context, outdir=str(outdir), validation=False, **stack_kwargs)
    app.synth()
    template = json.loads((outdir / f"{stack.artifact_id}.template.json").read_text())
    report_file = outdir / "validation-report.json"
    report = json.loads(report_file.read_text()) if report_file.exists() else {}
    return Synth(stack=stack, outdir=outdir, template=template, report=report)
