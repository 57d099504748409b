"""The deploy at scale and with awkward spec names (issue 11 items 9, 10, 11): one synth of 60 specs, some named
`train(v2)`, `a+b`, `résumé`, stays inside every limit CloudFormation, EventBridge, Lambda and IAM set, and is
cfn-lint clean (with the serverless rules).

The limits, as AWS states them:
- EventBridge: an event pattern is at most 2,048 characters (before: one ARN per machine, about 24 fitted);
- Lambda: all environment variables of a function take at most 4 KB (before: the inbox's machine map, ~34 specs);
- IAM: a role's inline policies total at most 10,240 characters (whitespace aside);
- CloudFormation: a template is at most 1 MB (from S3), 500 resources, 200 outputs;
- Step Functions: a definition is at most 1 MiB; a state machine name is 1–80 characters of a restricted set;
  a log group name is `[\\.\\-_/#A-Za-z0-9]+`.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from infra_support import REPO_ROOT, UNIT_CONTEXT, Synth, synthesize
from test_infra_cfn_lint import _cfn_lint

from infra.names import machine_name
from infra.settings import SettingsError
from infra.state_machines import (
    MAX_DEFINITION_BYTES,
    CatalogSpec,
    check_definition_size,
    check_state_deadlines,
    deployed_definition_bytes,
    serialize_definition,
)
from npa_workflow.compile.asl import CompiledMachine

pytestmark = pytest.mark.xdist_group("infra-scale")  # the 60-spec synth is shared: keep its tests on one worker

SPECS = REPO_ROOT / "specs"
EXAMPLES = ("fanout", "gate-loop", "sweep", "trigger")
AWKWARD = ["train(v2)", "a+b", "résumé", "a_b", "a-b", "x" * 100, "ü" * 30, "spaces in name"]
SPEC_COUNT = 60
EVENT_PATTERN_LIMIT = 2048
LAMBDA_ENV_LIMIT = 4096
ROLE_INLINE_POLICY_LIMIT = 10240
TEMPLATE_LIMIT = 1_000_000
LOG_GROUP_NAME = re.compile(r"^[\.\-_/#A-Za-z0-9]{1,512}$")
MACHINE_NAME_FORBIDDEN = re.compile(r"[\s<>{}\[\]?*\"#%\\^|~`$&,;:/\x00-\x1f\x7f-\x9f]")


def _names() -> list[str]:
    names = list(AWKWARD)
    names += [f"spec-{i:02d}" for i in range(SPEC_COUNT - len(names))]
    return names


@pytest.fixture(scope="module")
def scale_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    specs = tmp_path_factory.mktemp("specs-60")
    shutil.copyfile(SPECS / "tools.yaml", specs / "tools.yaml")
    for i, name in enumerate(_names()):
        example = EXAMPLES[i % len(EXAMPLES)]
        text = (SPECS / f"{example}.yaml").read_text(encoding="utf-8")
        text = text.replace(f"\n  name: {example}\n", f"\n  name: {json.dumps(name, ensure_ascii=False)}\n", 1)
        (specs / f"s{i:02d}.yaml").write_text(text, encoding="utf-8")
    return synthesize(UNIT_CONTEXT, tmp_path_factory.mktemp("cdk-60"), specs_dir=specs)


def _chars(value: Any) -> int:
    """A template value's length once deployed, references counted as the longest text they can become."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict) and "Fn::Join" in value:
        return sum(_chars(part) for part in value["Fn::Join"][1])
    if isinstance(value, dict) and "Ref" in value:
        return 140  # an ARN or a name: at most a function ARN's length
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        return 140
    if isinstance(value, dict):
        return sum(len(json.dumps(k)) + 1 + _chars(v) for k, v in value.items()) + 2
    if isinstance(value, list):
        return sum(_chars(v) + 1 for v in value) + 2
    return len(json.dumps(value))


def test_sixty_specs_deploy_inside_every_limit(scale_synth: Synth) -> None:
    stack = scale_synth.stack
    assert len(stack.workflows.machines) == SPEC_COUNT
    template = scale_synth.template
    size = (scale_synth.outdir / f"{stack.artifact_id}.template.json").stat().st_size
    assert size < TEMPLATE_LIMIT, size
    assert len(template["Resources"]) < 500 and len(template["Outputs"]) < 200

    reap = template["Resources"][scale_synth.logical_id(stack.events.reap_rule)]["Properties"]["EventPattern"]
    assert _chars(reap) < EVENT_PATTERN_LIMIT
    assert len(reap["detail"]["stateMachineArn"]) == 1  # one prefix, not one ARN per machine

    for name, fn in stack.engine.functions.items():
        variables = template["Resources"][scale_synth.logical_id(fn)]["Properties"]["Environment"]["Variables"]
        assert sum(len(k) + _chars(v) for k, v in variables.items()) < LAMBDA_ENV_LIMIT, name

    policies = scale_synth.resources("AWS::IAM::Policy").values()
    for role in list(stack.engine.roles.values()) + list(stack.workflows.roles.values()):
        role_id = {"Ref": scale_synth.logical_id(role)}
        docs = [p["Properties"]["PolicyDocument"] for p in policies if role_id in p["Properties"]["Roles"]]
        assert sum(_chars(d) for d in docs) < ROLE_INLINE_POLICY_LIMIT, role.node.path


def test_sixty_specs_are_cfn_lint_clean_with_the_serverless_rules(scale_synth: Synth) -> None:
    template = scale_synth.outdir / f"{scale_synth.stack.artifact_id}.template.json"
    result = subprocess.run(
        [*_cfn_lint(), "--config-file", str(REPO_ROOT / ".cfnlintrc.yaml"), "--", str(template)],
        capture_output=True, text=True, cwd=REPO_ROOT, timeout=300, check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_awkward_spec_names_give_legal_distinct_deterministic_names(scale_synth: Synth) -> None:
    stack = scale_synth.stack
    names = stack.workflows.names
    assert set(AWKWARD) <= set(names)
    assert len(set(names.values())) == len(names)  # `a_b` and `a-b`, `train(v2)`: all distinct
    log_groups = {
        r["Properties"]["LogGroupName"] for r in scale_synth.resources("AWS::Logs::LogGroup").values()
        if "LogGroupName" in r["Properties"]
    }
    for spec, machine in names.items():
        assert machine == machine_name("NpaWorkflow", spec)  # derived from the names alone: the same every synth
        assert machine.startswith("NpaWorkflow_") and 1 <= len(machine) <= 80, machine
        assert not MACHINE_NAME_FORBIDDEN.search(machine), machine
        assert f"/aws/vendedlogs/states/{machine}" in log_groups
    assert all(LOG_GROUP_NAME.match(name) for name in log_groups), log_groups
    assert names["a-b"] == "NpaWorkflow_a-b"  # legal names are kept as they are
    assert names["résumé"].startswith("NpaWorkflow_resume-")  # folded to ASCII, tagged with a hash
    assert names["train(v2)"].startswith("NpaWorkflow_train-v2--")
    machines = {
        r["Properties"]["StateMachineName"] for r in scale_synth.resources("AWS::StepFunctions::StateMachine").values()
    }
    assert machines == set(names.values())


def _catalog_spec(states: int, text_per_state: int) -> tuple[CatalogSpec, str]:
    definition = {"StartAt": "s0", "States": {
        f"s{i}": {"Type": "Task", "Resource": "arn:aws:states:::lambda:invoke",
                  "Parameters": {"FunctionName": "${LaunchFunctionArn}", "Payload": {"pad": "x" * text_per_state}},
                  "End": True}
        for i in range(states)
    }}
    machine = CompiledMachine(definition=definition, loop_keys={}, group_keys={})
    return CatalogSpec(Path("specs/big.yaml"), "big", machine), serialize_definition(definition)


def test_definitions_are_compact_and_sized_with_their_function_arns() -> None:
    spec, text = _catalog_spec(10, 10)
    assert "\n" not in text and ": " not in text
    # Each placeholder becomes a function ARN of up to 140 characters at deploy time.
    assert deployed_definition_bytes(text) == len(text.encode()) + 10 * (140 - len("${LaunchFunctionArn}"))


def test_a_definition_over_one_mib_fails_the_synth_with_the_fix() -> None:
    small, text = _catalog_spec(1000, 850)  # ~1.0 MB written, over 1 MiB with the ARNs substituted
    assert len(text.encode()) < MAX_DEFINITION_BYTES < deployed_definition_bytes(text)
    with pytest.raises(SettingsError, match=r"specs/big.yaml: spec 'big' compiles to a [\d,]+-byte") as err:
        check_definition_size(small, text)
    assert "1,048,576" in str(err.value) and "fix:" in str(err.value)
    fits, text = _catalog_spec(1000, 500)
    check_definition_size(fits, text)


def test_a_state_deadline_as_long_as_the_retention_fails_the_synth_with_the_fix() -> None:
    """S3 lifecycle expiry counts from creation: a state waiting retentionDays would outlive its run's frozen spec."""
    spec, _ = _catalog_spec(2, 1)
    spec.machine.definition["States"]["s1"]["TimeoutSeconds"] = 30 * 86400
    with pytest.raises(SettingsError, match=r"specs/big.yaml: states.s1: state 's1' may wait 2592000 s") as err:
        check_state_deadlines(spec, retention_days=30)
    assert "retentionDays=30" in str(err.value) and "fix:" in str(err.value)
    check_state_deadlines(spec, retention_days=31)
