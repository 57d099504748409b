"""The compiled state machine of every spec in `specs/`: the same compiler the CLI uses, function ARNs substituted.

Each machine is a Standard workflow (waitForTaskToken needs Standard) with logging to its own CloudWatch log
group and X-Ray tracing. Machine names are fixed (`<stack>-<spec name>`), so policies can name their exact
ARNs without depending on the machines (the functions the machines invoke also send their task responses).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from aws_cdk import ArnFormat, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from infra.functions import log_retention
from infra.storage import RUNS_PREFIX
from npa_workflow.compile.asl import CompiledMachine, CompileOptions, compile_spec
from npa_workflow.compile.names import sanitize
from npa_workflow.spec.load import load_spec
from npa_workflow.spec.loader import load_yaml_file

SPEC_API_PREFIX = "npa.workflow/"
# The functions a compiled definition invokes, by the placeholder the compiler writes.
SUBSTITUTIONS = {
    "LaunchFunctionArn": "launch",
    "DecideFunctionArn": "decide",
    "TriggerFunctionArn": "trigger",
    "CleanupFunctionArn": "cleanup",
}


@dataclass(frozen=True)
class CatalogSpec:
    path: Path
    name: str
    machine: CompiledMachine


def spec_files(specs_dir: Path) -> list[Path]:
    """The workflow specs in `specs_dir` (`apiVersion: npa.workflow/...`); the tool catalog is not one."""
    found = []
    for path in sorted(specs_dir.glob("*.yaml")) + sorted(specs_dir.glob("*.yml")):
        doc = load_yaml_file(path)
        if isinstance(doc, dict) and str(doc.get("apiVersion", "")).startswith(SPEC_API_PREFIX):
            found.append(path)
    return found


def compile_catalog(specs_dir: Path, options: CompileOptions | None = None) -> list[CatalogSpec]:
    """Load and compile every spec; an invalid spec fails the synth with the engine's own message."""
    compiled = []
    for path in spec_files(specs_dir):
        loaded = load_spec(path)
        compiled.append(CatalogSpec(path, loaded.spec.name, compile_spec(loaded, options or CompileOptions())))
    return compiled


def machine_name(stack_name: str, spec_name: str) -> str:
    return sanitize(f"{stack_name}-{spec_name}")


def machine_arn(stack: Stack, name: str) -> str:
    return stack.format_arn(
        service="states", resource="stateMachine", resource_name=name, arn_format=ArnFormat.COLON_RESOURCE_NAME
    )


def execution_arns(stack: Stack, name: str) -> str:
    """Every execution of machine `name` (and, for a Distributed Map, its child executions)."""
    return stack.format_arn(
        service="states", resource="execution", resource_name=f"{name}:*", arn_format=ArnFormat.COLON_RESOURCE_NAME
    )


def grant_distributed_map(role: iam.IRole, stack: Stack, name: str, bucket: s3.IBucket) -> None:
    """What a machine with a Distributed Map needs (`name`: its machine name, or a `<prefix>*` name pattern for
    the ad-hoc machines, which share one role): start child executions of itself, describe and stop them, and
    read its item lists under runs/."""
    role.add_to_principal_policy(
        iam.PolicyStatement(actions=["states:StartExecution"], resources=[machine_arn(stack, name)])
    )
    role.add_to_principal_policy(
        iam.PolicyStatement(
            actions=["states:DescribeExecution", "states:StopExecution"], resources=[execution_arns(stack, name)]
        )
    )
    role.add_to_principal_policy(
        iam.PolicyStatement(actions=["s3:GetObject"], resources=[bucket.arn_for_objects(f"{RUNS_PREFIX}*")])
    )


class WorkflowMachines(Construct):
    """`machines[spec name]`, `names[spec name]` (machine names) and `arns[spec name]` (formatted ARNs)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        specs: list[CatalogSpec],
        functions: dict[str, lambda_.IFunction],
        bucket: s3.IBucket,
        retention_days: int,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.machines: dict[str, sfn.StateMachine] = {}
        self.names: dict[str, str] = {}
        self.arns: dict[str, str] = {}
        self.roles: dict[str, iam.Role] = {}
        self.distributed: dict[str, list[str]] = {}  # spec name → its groups compiled to a Distributed Map
        invoked = [functions[name].function_arn for name in SUBSTITUTIONS.values()]
        for spec in specs:
            name = machine_name(stack.stack_name, spec.name)
            construct_name = "".join(part.title() for part in _words(spec.name)) or "Spec"
            if any(m.node.id == construct_name for m in self.machines.values()):
                raise ValueError(f"{spec.path}: spec name {spec.name!r} clashes with another spec's; rename one")
            if name in self.names.values():
                raise ValueError(f"{spec.path}: spec name {spec.name!r} is used by another spec in the catalog")
            log_group = logs.LogGroup(
                self,
                f"{construct_name}Logs",
                log_group_name=f"/aws/vendedlogs/states/{name}",
                retention=log_retention(retention_days),
                removal_policy=RemovalPolicy.DESTROY,
            )
            role = iam.Role(
                self,
                f"{construct_name}Role",
                assumed_by=iam.ServicePrincipal("states.amazonaws.com"),
                description=f"npa-workflow state machine {name}: invokes the engine functions, nothing else",
            )
            role.add_to_policy(iam.PolicyStatement(actions=["lambda:InvokeFunction"], resources=invoked))
            if spec.machine.distributed_groups:
                grant_distributed_map(role, stack, name, bucket)
            machine = sfn.StateMachine(
                self,
                construct_name,
                state_machine_name=name,
                state_machine_type=sfn.StateMachineType.STANDARD,
                definition_body=sfn.DefinitionBody.from_string(json.dumps(spec.machine.definition, indent=1)),
                definition_substitutions={
                    placeholder: functions[fn].function_arn for placeholder, fn in SUBSTITUTIONS.items()
                },
                role=role,
                tracing_enabled=True,
                # Execution data is logged so an operator sees a failed step's error and cause in the logs; task
                # tokens in it are useless without states:SendTask* on this machine, which only the engine has.
                logs=sfn.LogOptions(destination=log_group, level=sfn.LogLevel.ALL, include_execution_data=True),
                removal_policy=RemovalPolicy.DESTROY,
            )
            self.machines[spec.name] = machine
            self.names[spec.name] = name
            self.arns[spec.name] = machine_arn(stack, name)
            self.roles[spec.name] = role
            self.distributed[spec.name] = list(spec.machine.distributed_groups)


def _words(text: str) -> list[str]:
    word, words = "", []
    for ch in text:
        if ch.isalnum():
            word += ch
        elif word:
            words.append(word)
            word = ""
    if word:
        words.append(word)
    return words
