"""The npa-workflow stack: storage, the engine layer and functions, the catalog's state machines and its copy in
the engine bucket (for the inbox), the events that drive them, IAM scoped to what each function touches, alarms
and outputs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aws_cdk import Annotations, Aws, CfnOutput, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from infra.catalog import CatalogPublication
from infra.events import EngineEvents
from infra.functions import REPO_ROOT, EngineFunctions, log_retention
from infra.monitoring import EngineAlarms
from infra.permissions import SECRET_READERS, grant_ad_hoc, grant_engine
from infra.settings import EngineSettings
from infra.state_machines import SUBSTITUTIONS, WorkflowMachines, compile_catalog, grant_distributed_map, machine_arn
from infra.storage import INBOX_PREFIX, Storage
from npa_workflow.compile.asl import CompileOptions

SPECS_DIR = REPO_ROOT / "specs"
TOOLS_FILE_NAME = "tools.yaml"
# The inbox compiles each upload to compare it with the deployed machine (npa_workflow.engine.inbox): it must use
# the options the machines were compiled with. It takes HeartbeatSeconds from this variable; every other option
# is the compiler's default unless a run request sets it, so `compile_options` may change nothing else.
HEARTBEAT_ENV = "NPA_WORKFLOW_HEARTBEAT_SECONDS"


def compile_options(settings: EngineSettings) -> CompileOptions:
    """Heartbeats ride on the watch tick: keep `HeartbeatSeconds` at three ticks or more. Only the heartbeat
    differs from the compiler's defaults (see HEARTBEAT_ENV)."""
    default = CompileOptions()
    return CompileOptions(heartbeat_seconds=max(default.heartbeat_seconds, 3 * 60 * settings.watch_interval_minutes))


def console_url(arn: str) -> str:
    return f"https://{Aws.REGION}.console.aws.amazon.com/states/home?region={Aws.REGION}#/statemachines/view/{arn}"


class NpaWorkflowStack(Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: EngineSettings,
        specs_dir: Path = SPECS_DIR,
        layer_requirements: list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.settings = settings
        self.nag_acknowledgements: list[tuple[str, str, str]] = []  # filled by infra.nag.apply_nag
        self.storage = Storage(self, "Storage", retention_days=settings.retention_days)
        bucket, table = self.storage.bucket, self.storage.table

        self.secret = self._skypilot_secret(settings)
        # The one set of options: the machines are compiled with it and the inbox is told its heartbeat.
        self.compile_options = compile_options(settings)
        catalog = compile_catalog(specs_dir, self.compile_options)
        ad_hoc_prefix = f"{self.stack_name}-adhoc-"
        ad_hoc_arns = [machine_arn(self, f"{ad_hoc_prefix}*")] if settings.allow_ad_hoc_specs else []
        if not settings.skypilot_endpoint:
            Annotations.of(self).add_warning_v2(
                "npa-workflow:NoSkyPilotEndpoint",
                "context skypilotEndpoint is empty: runs will fail to launch jobs "
                "(fix: cdk deploy -c skypilotEndpoint=https://<your SkyPilot API server>)",
            )

        self.engine = EngineFunctions(
            self,
            "Functions",
            environment={
                "NPA_WORKFLOW_LEDGER_TABLE": table.table_name,
                "NPA_WORKFLOW_BUCKET": bucket.bucket_name,
                "NPA_WORKFLOW_EXECUTOR": "skypilot",
                "NPA_WORKFLOW_RETENTION_DAYS": str(settings.retention_days),
                "SKYPILOT_API_SERVER_ENDPOINT": settings.skypilot_endpoint,
            },
            retention_days=settings.retention_days,
            layer_requirements_override=layer_requirements,
        )
        functions = self.engine.functions
        for name in SECRET_READERS:
            functions[name].add_environment("SKYPILOT_TOKEN_SECRET_ARN", self.secret.secret_arn)

        self.workflows = WorkflowMachines(
            self,
            "Machines",
            specs=catalog,
            functions=functions,
            bucket=bucket,
            retention_days=settings.retention_days,
        )
        machine_arns = list(self.workflows.arns.values())
        inbox = functions["inbox"]
        inbox.add_environment(
            "NPA_WORKFLOW_STATE_MACHINES",
            self.to_json_string({name: m.state_machine_arn for name, m in self.workflows.machines.items()}),
        )
        inbox.add_environment("NPA_WORKFLOW_ALLOW_AD_HOC", "true" if settings.allow_ad_hoc_specs else "false")
        inbox.add_environment(HEARTBEAT_ENV, str(self.compile_options.heartbeat_seconds))
        tools_file = specs_dir / TOOLS_FILE_NAME
        self.catalog = CatalogPublication(
            self,
            "Catalog",
            specs=catalog,
            tools_file=tools_file if tools_file.is_file() else None,
            bucket=bucket,
            retention_days=settings.retention_days,
        )

        grant_engine(
            self.engine.roles,
            bucket=bucket,
            table=table,
            index_arns=self.storage.index_arns(),
            secret=self.secret,
            machine_arns=machine_arns,
            ad_hoc_machine_arns=ad_hoc_arns,
            data_buckets=settings.data_buckets,
        )
        self.ad_hoc_role: iam.Role | None = None
        if settings.allow_ad_hoc_specs:
            self._ad_hoc(ad_hoc_prefix, ad_hoc_arns)

        self.events = EngineEvents(
            self,
            "Events",
            bucket=bucket,
            functions=functions,
            machine_arns=machine_arns,
            ad_hoc_machine_arn_prefix=machine_arn(self, ad_hoc_prefix) if settings.allow_ad_hoc_specs else None,
            watch_interval_minutes=settings.watch_interval_minutes,
        )
        self.alarms = EngineAlarms(
            self,
            "Alarms",
            machines=self.workflows.machines,
            functions=functions,
            dead_letters=self.events.dead_letters,
            alarm_topic_arn=settings.alarm_topic_arn,
        )
        self._outputs()

    def _skypilot_secret(self, settings: EngineSettings) -> secretsmanager.ISecret:
        arn = settings.skypilot_token_secret_arn
        if arn and settings.secret_arn_is_complete:
            return secretsmanager.Secret.from_secret_complete_arn(self, "SkyPilotToken", arn)
        if arn:
            return secretsmanager.Secret.from_secret_partial_arn(self, "SkyPilotToken", arn)
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
            log_group_name=f"/aws/vendedlogs/states/{prefix}machines",
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
        grant_ad_hoc(self.engine.roles["inbox"], machine_role=role, ad_hoc_machine_arns=ad_hoc_arns)
        inbox = functions["inbox"]
        inbox.add_environment("NPA_WORKFLOW_AD_HOC_MACHINE_PREFIX", prefix)
        inbox.add_environment("NPA_WORKFLOW_AD_HOC_ROLE_ARN", role.role_arn)
        inbox.add_environment("NPA_WORKFLOW_AD_HOC_LOG_GROUP_ARN", log_group.log_group_arn)
        for placeholder, name in SUBSTITUTIONS.items():
            env_name = "NPA_WORKFLOW_" + placeholder.removesuffix("FunctionArn").upper() + "_FUNCTION_ARN"
            inbox.add_environment(env_name, functions[name].function_arn)

    def _outputs(self) -> None:
        bucket, table = self.storage.bucket, self.storage.table
        CfnOutput(self, "BucketName", value=bucket.bucket_name, description="The engine bucket")
        CfnOutput(
            self,
            "InboxUri",
            value=f"s3://{bucket.bucket_name}/{INBOX_PREFIX}",
            description="Upload a spec here to start a run: aws s3 cp spec.yaml <InboxUri>",
        )
        CfnOutput(self, "LedgerTableName", value=table.table_name, description="The ledger (DynamoDB)")
        CfnOutput(
            self,
            "SkyPilotTokenSecretArn",
            value=self.secret.secret_arn,
            description="Secrets Manager secret holding the SkyPilot service-account token",
        )
        CfnOutput(
            self,
            "DeadLetterQueueUrl",
            value=self.events.dead_letters.queue_url,
            description="Events EventBridge could not deliver to a function",
        )
        for spec_name, machine in self.workflows.machines.items():
            CfnOutput(
                self,
                f"{machine.node.id}ConsoleUrl",
                value=console_url(machine.state_machine_arn),
                description=f"Step Functions console: spec {spec_name}",
            )
