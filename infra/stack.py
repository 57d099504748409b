"""The npa-workflow stack: storage, the engine layer and functions, the catalog's state machines and its copy in
the engine bucket (for the inbox), the events that drive them, IAM scoped to what each function touches, alarms
and outputs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aws_cdk import Annotations, Aws, CfnOutput, CfnResource, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from infra.async_invoke import AsyncFailures
from infra.catalog import CatalogPublication
from infra.events import EngineEvents
from infra.functions import REPO_ROOT, EngineFunctions, log_retention
from infra.lint import ignore_cfn_lint
from infra.monitoring import EngineAlarms
from infra.names import ad_hoc_prefix, machine_prefix
from infra.permissions import KmsKeys, grant_ad_hoc, grant_engine
from infra.settings import EngineSettings, SettingsError, is_complete_secret_arn
from infra.state_machines import (
    SUBSTITUTIONS,
    WorkflowMachines,
    compile_catalog,
    execution_arns,
    grant_distributed_map,
    machine_arn,
)
from infra.storage import INBOX_PREFIX, Storage
from npa_workflow.compile.asl import CompileOptions
from npa_workflow.protocol import stack as outputs
from npa_workflow.protocol.deployment import StackRefs
from npa_workflow.protocol.stack import stack_resources_problem

SPECS_DIR = REPO_ROOT / "specs"
TOOLS_FILE_NAME = "tools.yaml"


def compile_options(settings: EngineSettings) -> CompileOptions:
    """The deployment model's (`Deployment.compile_options`): `HeartbeatSeconds` at three ticks or more, the stack's
    `maxWaitSeconds` per wave, the watch interval for a data-bucket trigger's bound (issue 11 item 17: `maxPolls` ×
    `pollSeconds` alone gave the example two polls in the cloud). Nothing else differs from the compiler's defaults
    (see HEARTBEAT_ENV)."""
    options: CompileOptions = settings.deployment().compile_options()
    return options


def check_resource_count(stack: Stack, specs: int) -> None:
    """CloudFormation refuses a stack of more than 500 resources; jsii would only say so as a raw RuntimeError at
    synth. Counted on the built stack (every L1 resource), with the message `validate --stack-specs` shares."""
    resources = sum(1 for node in stack.node.find_all() if isinstance(node, CfnResource))
    problem = stack_resources_problem(resources, specs)
    if problem:
        what, fix = problem
        raise SettingsError(f"{what} (fix: {fix})")


def console_url(arn: str) -> str:
    return f"https://{Aws.REGION}.console.aws.amazon.com/states/home?region={Aws.REGION}#/statemachines/view/{arn}"


def specs_source(settings: EngineSettings, specs_dir: Path | None) -> tuple[Path, Path | None, Any]:
    """(the specs folder, the catalog file to publish, the catalog the specs compile against: None for the one
    found beside each spec). Context `catalogs` names teams' catalogs outside this repository; several are
    merged (spec.catalogs) and the merged text is what the inbox reads."""
    folder = specs_dir or (Path(settings.specs_dir).resolve() if settings.specs_dir else SPECS_DIR)
    if not settings.catalogs:
        beside = folder / TOOLS_FILE_NAME
        return folder, beside if beside.is_file() else None, None
    import tempfile

    from npa_workflow.spec.catalogs import merge_catalogs

    paths = [Path(p).resolve() for p in settings.catalogs]
    merged, text = merge_catalogs(paths)
    if len(paths) == 1:
        return folder, paths[0], merged
    published = Path(tempfile.mkdtemp(prefix="npa-catalog-")) / TOOLS_FILE_NAME
    published.write_text(text, encoding="utf-8")
    return folder, published, merged


class NpaWorkflowStack(Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: EngineSettings,
        specs_dir: Path | None = None,  # None: context specsDir, else the repository's specs/
        layer_requirements: list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.settings = settings
        # What each resource is configured with: the model the local twin deploys too (protocol.deployment).
        self.deployment = settings.deployment(self.stack_name)
        self.nag_acknowledgements: list[tuple[str, str, str]] = []  # filled by infra.nag.apply_nag
        self.storage = Storage(self, "Storage", deployment=self.deployment)
        bucket, table = self.storage.bucket, self.storage.table

        self.secret = self._skypilot_secret(settings)
        self.step_secrets = (
            self._imported_secret("StepSecrets", settings.step_secrets_arn) if settings.step_secrets_arn else None
        )
        # The one set of options: the machines are compiled with it and the inbox is told its heartbeat.
        self.compile_options: CompileOptions = self.deployment.compile_options()
        specs_dir, tools_file, tools = specs_source(settings, specs_dir)
        catalog = compile_catalog(specs_dir, self.compile_options, tools)
        ad_hoc = ad_hoc_prefix(self.stack_name)
        ad_hoc_arns = [machine_arn(self, f"{ad_hoc}*")] if settings.allow_ad_hoc_specs else []
        # Every machine of this stack, deployed or ad hoc, and their Distributed Maps' child machines.
        self.machines_arn = machine_arn(self, machine_prefix(self.stack_name) + "*")
        if not settings.skypilot_endpoint:
            Annotations.of(self).add_warning_v2(
                "npa-workflow:NoSkyPilotEndpoint",
                "context skypilotEndpoint is empty: runs will fail to launch jobs "
                "(fix: cdk deploy -c skypilotEndpoint=https://<your SkyPilot API server>)",
            )

        self.engine = EngineFunctions(
            self,
            "Functions",
            retention_days=settings.retention_days,
            layer_requirements_override=layer_requirements,
        )
        functions = self.engine.functions

        self.workflows = WorkflowMachines(
            self,
            "Machines",
            specs=catalog,
            functions=functions,
            bucket=bucket,
            retention_days=settings.retention_days,
        )
        self.catalog = CatalogPublication(
            self,
            "Catalog",
            specs=catalog,
            machine_names=self.workflows.names,
            tools_file=tools_file,  # specs_source: None when the folder has no tools.yaml
            bucket=bucket,
            retention_days=settings.retention_days,
        )

        grant_engine(
            self.engine.roles,
            bucket=bucket,
            table=table,
            index_arns=self.storage.index_arns(),
            secret=self.secret,
            machines_arn=self.machines_arn,
            executions_arn=execution_arns(self, machine_prefix(self.stack_name) + "*"),
            data_buckets=settings.data_buckets,
            step_secrets=self.step_secrets,
            kms=KmsKeys(
                skypilot_token=settings.skypilot_token_kms_key_arn,
                step_secrets=settings.step_secrets_kms_key_arn,
                data_buckets=settings.data_bucket_kms_key_arns,
            ),
        )
        self.ad_hoc_role: iam.Role | None = None
        self.ad_hoc_log_group: logs.LogGroup | None = None
        if settings.allow_ad_hoc_specs:
            self._ad_hoc(ad_hoc, ad_hoc_arns)
        self._function_environment()

        self.events = EngineEvents(
            self,
            "Events",
            bucket=bucket,
            functions=functions,
            machine_arn_prefix=machine_arn(self, machine_prefix(self.stack_name)),
            deployment=self.deployment,
        )
        self.async_failures = AsyncFailures(self, "AsyncFailures", functions=functions)
        self.alarms = EngineAlarms(
            self,
            "Alarms",
            machines=self.workflows.machines,
            functions=functions,
            dead_letters=self.events.dead_letters,
            failed_invocations=self.async_failures.failed_invocations,
            alarm_topic_arn=settings.alarm_topic_arn,
        )
        self._lint_exceptions()
        self._outputs()

    def _lint_exceptions(self) -> None:
        """cfn-lint-serverless findings that do not apply, each on its resource with the reason (never stack-wide)."""
        permissions = [c for c in self.node.find_all() if isinstance(c, lambda_.CfnPermission)]
        for name, config in self.async_failures.configs.items():
            arn = self.resolve(self.engine.functions[name].function_arn)
            for permission in permissions:
                if self.resolve(permission.function_name) == arn:
                    ignore_cfn_lint(permission, "ES1007", f"{config.node.path} gives the function an on-failure "
                                    "destination; the rule compares FunctionName as written (Ref there, Fn::GetAtt "
                                    "here) and misses it")
        for fn in self.engine.functions.values():
            ignore_cfn_lint(fn, "WS1004", "the function logs to its own log group (LoggingConfig.LogGroup) with "
                            "RetentionInDays; the rule only knows log groups named /aws/lambda/<function>")
        for rule, reason in (
            ("WS1000", "aws-cdk-lib's own BucketDeployment handler, run only by CloudFormation during deploys, "
             "never on the engine's data path; BucketDeployment offers no tracing option"),
            ("WS1004", "it logs to its own log group (BucketDeployment log_group) with RetentionInDays"),
        ):
            ignore_cfn_lint(self.catalog.handler, rule, reason)
        for queue in (self.events.dead_letters, self.async_failures.failed_invocations):
            ignore_cfn_lint(queue, "ES6000", "this queue is itself the dead-letter queue / on-failure destination")

    def _imported_secret(self, construct_id: str, arn: str) -> secretsmanager.ISecret:
        if is_complete_secret_arn(arn):
            return secretsmanager.Secret.from_secret_complete_arn(self, construct_id, arn)
        return secretsmanager.Secret.from_secret_partial_arn(self, construct_id, arn)

    def _skypilot_secret(self, settings: EngineSettings) -> secretsmanager.ISecret:
        arn = settings.skypilot_token_secret_arn
        if arn:
            return self._imported_secret("SkyPilotToken", arn)
        return secretsmanager.Secret(
            self,
            "SkyPilotToken",
            description="SkyPilot API server service-account token for npa-workflow "
            "(set it: aws secretsmanager put-secret-value --secret-id <arn> --secret-string <token>)",
            removal_policy=RemovalPolicy.RETAIN,
        )

    def _ad_hoc(self, prefix: str, ad_hoc_arns: list[str]) -> None:
        """Machines the inbox creates for specs not in `specs/`: a role to pass them and a log group."""
        functions = self.engine.functions
        log_group = logs.LogGroup(
            self,
            "AdHocMachineLogs",
            log_group_name=self.deployment.ad_hoc_log_group_name,
            retention=log_retention(self.settings.retention_days),
            removal_policy=RemovalPolicy.DESTROY,
        )
        role = iam.Role(
            self,
            "AdHocMachineRole",
            assumed_by=iam.ServicePrincipal("states.amazonaws.com"),
            description="npa-workflow ad-hoc state machines: invoke the engine functions, log, trace",
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["lambda:InvokeFunction"],
                resources=[functions[name].function_arn for name in SUBSTITUTIONS.values()],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=[
                    "logs:CreateLogDelivery", "logs:GetLogDelivery", "logs:UpdateLogDelivery",
                    "logs:DeleteLogDelivery", "logs:ListLogDeliveries", "logs:PutResourcePolicy",
                    "logs:DescribeResourcePolicies", "logs:DescribeLogGroups",
                    "xray:PutTraceSegments", "xray:PutTelemetryRecords",
                    "xray:GetSamplingRules", "xray:GetSamplingTargets",
                ],
                resources=["*"],
            )
        )
        # Ad-hoc specs may have Distributed Maps too: the role is shared, so "itself" is the ad-hoc name prefix.
        grant_distributed_map(role, self, f"{prefix}*", self.storage.bucket)
        self.ad_hoc_role = role
        self.ad_hoc_log_group = log_group
        grant_ad_hoc(self.engine.roles["inbox"], machine_role=role, ad_hoc_machine_arns=ad_hoc_arns)

    def _function_environment(self) -> None:
        """Each function's environment, as the deployment model says (the twin deploys the same variables)."""
        functions = self.engine.functions
        refs = StackRefs(
            table=self.storage.table.table_name,
            bucket=self.storage.bucket.bucket_name,
            machine_arn_prefix=machine_arn(self, ""),
            function_arns={name: fn.function_arn for name, fn in functions.items()},
            skypilot_token_secret_arn=self.secret.secret_arn,
            step_secrets_arn=self.step_secrets.secret_arn if self.step_secrets is not None else "",
            ad_hoc_role_arn=self.ad_hoc_role.role_arn if self.ad_hoc_role is not None else "",
            ad_hoc_log_group_arn=self.ad_hoc_log_group.log_group_arn if self.ad_hoc_log_group is not None else "",
        )
        for name, fn in functions.items():
            for key, value in self.deployment.function_environment(name, refs).items():
                fn.add_environment(key, value)

    def _outputs(self) -> None:
        bucket, table = self.storage.bucket, self.storage.table
        CfnOutput(self, outputs.BUCKET_NAME, value=bucket.bucket_name, description="The engine bucket")
        CfnOutput(
            self,
            outputs.INBOX_URI,
            value=f"s3://{bucket.bucket_name}/{INBOX_PREFIX}",
            description="Upload a spec here to start a run: aws s3 cp spec.yaml <InboxUri>",
        )
        CfnOutput(self, outputs.LEDGER_TABLE_NAME, value=table.table_name, description="The ledger (DynamoDB)")
        CfnOutput(
            self,
            outputs.SKYPILOT_TOKEN_SECRET_ARN,
            value=self.secret.secret_arn,
            description="Secrets Manager secret holding the SkyPilot service-account token",
        )
        CfnOutput(
            self,
            outputs.DEAD_LETTER_QUEUE_URL,
            value=self.events.dead_letters.queue_url,
            description="Events EventBridge could not deliver to a function",
        )
        CfnOutput(
            self,
            outputs.FAILED_INVOCATIONS_QUEUE_URL,
            value=self.async_failures.failed_invocations.queue_url,
            description="Events a function failed on after Lambda's retries (inbox, trigger, reap, watch)",
        )
        for spec_name, machine in self.workflows.machines.items():
            CfnOutput(
                self,
                f"{machine.node.id}ConsoleUrl",
                value=console_url(machine.state_machine_arn),
                description=f"Step Functions console: spec {spec_name}",
            )
