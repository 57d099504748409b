"""Storage: the engine bucket (inbox/, inbox-rejected/, runs/, catalog/), its access-log bucket and the ledger table."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_s3 as s3
from constructs import Construct

from npa_workflow.protocol.deployment import (  # noqa: F401 - the bucket's layout, re-exported for the stack
    BUCKET_EVENTBRIDGE,
    BUCKET_VERSIONED,
    CATALOG_MACHINES_FILE,
    CATALOG_PREFIX,
    CATALOG_SPECS_DIR,
    CATALOG_TOOLS_FILE,
    INBOX_PREFIX,
    NONCURRENT_RETENTION_DAYS,
    REJECTED_PREFIX,
    REJECTED_RETENTION_DAYS,
    RUNS_PREFIX,
    Deployment,
    LifecycleRule,
)

# The ledger's shape is fixed by the engine (npa_workflow.ledger.dynamodb.DynamoLedger.create_table): keep in sync.
LEDGER_INDEXES = {"active": ("active_pk", "active_sk"), "runs": ("runs_pk", "runs_sk")}
LEDGER_TTL_ATTRIBUTE = "expires_at"

ACCESS_LOG_PREFIX = "engine-bucket/"

# Server access logs are for audits and forensics: kept longer than the artifacts they describe.
ACCESS_LOG_RETENTION_DAYS = 365


class Storage(Construct):
    """`bucket` (engine bucket), `log_bucket` (its server access logs) and `table` (the ledger)."""

    def __init__(self, scope: Construct, construct_id: str, *, deployment: Deployment) -> None:
        super().__init__(scope, construct_id)

        self.log_bucket = s3.Bucket(
            self,
            "AccessLogs",
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            versioned=False,
            removal_policy=RemovalPolicy.RETAIN,
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="expire-access-logs",
                    expiration=Duration.days(ACCESS_LOG_RETENTION_DAYS),
                    abort_incomplete_multipart_upload_after=Duration.days(1),
                )
            ],
        )

        self.bucket = s3.Bucket(
            self,
            "Bucket",
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            versioned=BUCKET_VERSIONED,
            server_access_logs_bucket=self.log_bucket,
            server_access_logs_prefix=ACCESS_LOG_PREFIX,
            removal_policy=RemovalPolicy.RETAIN,
            lifecycle_rules=[_lifecycle_rule(rule) for rule in deployment.bucket_lifecycle],
        )

        # S3 → EventBridge, set on the bucket itself. `event_bridge_enabled=True` would do it through a
        # custom-resource Lambda (one more function, role and managed policy) that an owned bucket does not need.
        cfn_bucket: s3.CfnBucket = self.bucket.node.default_child  # type: ignore[assignment]
        cfn_bucket.notification_configuration = s3.CfnBucket.NotificationConfigurationProperty(
            event_bridge_configuration=s3.CfnBucket.EventBridgeConfigurationProperty(
                event_bridge_enabled=BUCKET_EVENTBRIDGE
            )
        )

        string = dynamodb.AttributeType.STRING
        self.table = dynamodb.Table(
            self,
            "Ledger",
            partition_key=dynamodb.Attribute(name="pk", type=string),
            sort_key=dynamodb.Attribute(name="sk", type=string),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            time_to_live_attribute=LEDGER_TTL_ATTRIBUTE,
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            deletion_protection=True,
            removal_policy=RemovalPolicy.RETAIN,
        )
        for index, (pk, sk) in LEDGER_INDEXES.items():
            self.table.add_global_secondary_index(
                index_name=index,
                partition_key=dynamodb.Attribute(name=pk, type=string),
                sort_key=dynamodb.Attribute(name=sk, type=string),
                projection_type=dynamodb.ProjectionType.ALL,
            )

    def index_arns(self) -> list[str]:
        """The exact ARN of every index of the ledger (no `index/*` wildcard)."""
        return [f"{self.table.table_arn}/index/{index}" for index in LEDGER_INDEXES]


def _days(days: int | None) -> Duration | None:
    return None if days is None else Duration.days(days)


def _lifecycle_rule(rule: LifecycleRule) -> s3.LifecycleRule:
    """A lifecycle rule of the deployment model as CDK's."""
    return s3.LifecycleRule(
        id=rule.id,
        prefix=rule.prefix,
        expiration=_days(rule.expiration_days),
        noncurrent_version_expiration=_days(rule.noncurrent_expiration_days),
        expired_object_delete_marker=rule.expired_object_delete_marker or None,
        abort_incomplete_multipart_upload_after=_days(rule.abort_multipart_days),
    )
