"""The compiled state machine of every spec in `specs/`: the same compiler the CLI uses, function ARNs substituted.

Each machine is a Standard workflow (waitForTaskToken needs Standard) with logging to its own CloudWatch log
group and X-Ray tracing. Machine names are derived from the stack and spec names (`infra.names`: `<stack>_<spec>`
mapped to the characters state machine and log group names allow), so policies and the reap rule name the
machine prefix `<stack>_` without depending on the machines, and their size does not grow with the catalog.

Definitions are serialized compactly and shipped as an S3 asset (`DefinitionS3Location`), not inline: a template is
at most 1 MB (CloudFormation, template body in S3), and a catalog of many specs, or one large spec, would not fit
inline. Each definition must stay under Step Functions' 1 MiB definition limit once the function ARNs are
substituted: the synth fails with the spec's name, its size and the fix otherwise (`check_definition_size`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aws_cdk import ArnFormat, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from infra.functions import log_retention, new_staging_dir
from infra.names import AD_HOC_INFIX, log_group_name, machine_prefix, unique_construct_id
from infra.names import machine_name as deployed_machine_name
from infra.settings import SettingsError
from infra.storage import RUNS_PREFIX
from npa_workflow.compile.asl import CompiledMachine, CompileOptions, compile_spec
from npa_workflow.compile.deadlines import retention_problem
from npa_workflow.compile.size import (  # noqa: F401 - the 1 MiB check's pieces, re-exported for the stack
    MAX_DEFINITION_BYTES,
    MAX_FUNCTION_ARN_CHARS,
    deployed_definition_bytes,
    serialize_definition,
)
from npa_workflow.protocol import functions as function_table
from npa_workflow.protocol.deployment import MACHINE_LOGGING, MACHINE_TRACING, MACHINE_TYPE
from npa_workflow.protocol.stack import deployable_spec_files
from npa_workflow.spec.load import load_spec

# The functions a compiled definition invokes, by the placeholder the compiler writes (protocol.functions).
SUBSTITUTIONS = {f.placeholder_name: f.name for f in function_table.MACHINE_INVOKED}


@dataclass(frozen=True)
class CatalogSpec:
    path: Path
    name: str
    machine: CompiledMachine


def spec_files(specs_dir: Path) -> list[Path]:
    """The workflow specs in `specs_dir`: the rule `serve` deploys by too (protocol.stack)."""
    return deployable_spec_files(specs_dir)


def compile_catalog(specs_dir: Path, options: CompileOptions | None = None, tools: Any = None) -> list[CatalogSpec]:
    """Load and compile every spec (against `tools`, a Catalog, else the catalog beside it); an invalid spec fails
    the synth with the engine's own message."""
    compiled = []
    for path in spec_files(specs_dir):
        loaded = load_spec(path, catalog=tools)
        compiled.append(CatalogSpec(path, loaded.spec.name, compile_spec(loaded, options or CompileOptions())))
    return compiled


def machine_name(stack_name: str, spec_name: str) -> str:
    return deployed_machine_name(stack_name, spec_name)


def check_definition_size(spec: CatalogSpec, text: str) -> None:
    size = deployed_definition_bytes(text)
    if size > MAX_DEFINITION_BYTES:
        raise SettingsError(
            f"{spec.path}: spec {spec.name!r} compiles to a {size:,}-byte state machine definition (function ARNs "
            f"substituted), above Step Functions' limit of {MAX_DEFINITION_BYTES:,} bytes "
            f"({len(spec.machine.definition.get('States', {}))} top-level states) "
            "(fix: split the spec, or fewer states/members per group)"
        )


def machine_arn(stack: Stack, name: str) -> str:
    return stack.format_arn(
        service="states", resource="stateMachine", resource_name=name, arn_format=ArnFormat.COLON_RESOURCE_NAME
    )


def execution_arns(stack: Stack, name: str) -> str:
    """Every execution of machine `name` (and, for a Distributed Map, its child executions)."""
    return stack.format_arn(
        service="states", resource="execution", resource_name=f"{name}:*", arn_format=ArnFormat.COLON_RESOURCE_NAME
    )


def child_execution_arns(stack: Stack, name: str) -> str:
    """Every child execution of machine `name`'s Distributed Maps: `execution:<name>/<map run label>:<id>`."""
    return stack.format_arn(
        service="states", resource="execution", resource_name=f"{name}/*:*", arn_format=ArnFormat.COLON_RESOURCE_NAME
    )


def grant_distributed_map(role: iam.IRole, stack: Stack, name: str, bucket: s3.IBucket) -> None:
    """What a machine with a Distributed Map needs (`name`: its machine name, or a `<prefix>*` name pattern for
    the ad-hoc machines, which share one role), as AWS documents it ("IAM policies for using Distributed Map
    states") and aws-cdk-lib grants it (`StateGraph`): start child executions of itself (StartExecution on the
    machine), describe and stop them (DescribeExecution/StopExecution on `execution:<name>:*` and on the children,
    `execution:<name>/<label>:*`), redrive a failed Map Run (RedriveExecution on `execution:<name>/<label>:*`), and
    read its item lists under runs/."""
    role.add_to_principal_policy(
        iam.PolicyStatement(actions=["states:StartExecution"], resources=[machine_arn(stack, name)])
    )
    role.add_to_principal_policy(
        iam.PolicyStatement(
            actions=["states:DescribeExecution", "states:StopExecution"],
            resources=[execution_arns(stack, name), child_execution_arns(stack, name)],
        )
    )
    role.add_to_principal_policy(
        iam.PolicyStatement(actions=["states:RedriveExecution"], resources=[child_execution_arns(stack, name)])
    )
    role.add_to_principal_policy(
        iam.PolicyStatement(actions=["s3:GetObject"], resources=[bucket.arn_for_objects(f"{RUNS_PREFIX}*")])
    )


def check_state_deadlines(spec: CatalogSpec, retention_days: int) -> None:
    """A state's own deadline (`timeoutSeconds`, a trigger's bound) as long as the retention fails the synth: its
    run's runs/ objects would expire under it (compile.deadlines.retention_problem). The stack's maxWaitSeconds
    is checked against retentionDays with the settings."""
    too_long = retention_problem(1, spec.machine.definition, retention_days)
    if too_long:
        where, what, fix = too_long
        raise SettingsError(f"{spec.path}: {where}: {what} (fix: {fix})")


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
        taken: set[str] = set()
        ad_hoc = machine_prefix(stack.stack_name) + AD_HOC_INFIX
        for spec in specs:
            name = machine_name(stack.stack_name, spec.name)
            if name.startswith(ad_hoc):
                raise SettingsError(f"{spec.path}: spec name {spec.name!r} would take the ad-hoc machines' name prefix "
                                    f"{ad_hoc!r} (fix: rename it)")
            if name in self.names.values():
                raise SettingsError(f"{spec.path}: spec name {spec.name!r} is used by another spec in the catalog "
                                    "(fix: rename one)")
            construct_name = unique_construct_id(name, stack.stack_name, taken)
            taken.add(construct_name)
            check_state_deadlines(spec, retention_days)
            text = serialize_definition(spec.machine.definition)
            check_definition_size(spec, text)
            log_group = logs.LogGroup(
                self,
                f"{construct_name}Logs",
                log_group_name=log_group_name(name),
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
                state_machine_type=sfn.StateMachineType(MACHINE_TYPE),
                definition_body=sfn.DefinitionBody.from_file(str(_stage_definition(name, text))),
                definition_substitutions={
                    placeholder: functions[fn].function_arn for placeholder, fn in SUBSTITUTIONS.items()
                },
                role=role,
                tracing_enabled=MACHINE_TRACING,
                # The deployment model's logging (protocol.deployment.MACHINE_LOGGING says why execution data)
                logs=sfn.LogOptions(
                    destination=log_group,
                    level=sfn.LogLevel(MACHINE_LOGGING["level"]),
                    include_execution_data=bool(MACHINE_LOGGING["includeExecutionData"]),
                ),
                removal_policy=RemovalPolicy.DESTROY,
            )
            self.machines[spec.name] = machine
            self.names[spec.name] = name
            self.arns[spec.name] = machine_arn(stack, name)
            self.roles[spec.name] = role
            self.distributed[spec.name] = list(spec.machine.distributed_groups)


def _stage_definition(name: str, text: str) -> Path:
    """The definition in a file of its own (the asset CloudFormation reads `DefinitionS3Location` from)."""
    path = new_staging_dir("npa-workflow-definition-") / f"{name}.asl.json"
    path.write_text(text, encoding="utf-8")
    return path
