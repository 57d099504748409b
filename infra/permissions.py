"""IAM: what each function may touch, and nothing more.

Every function reads and writes the ledger. Beyond that:

- inbox: read inbox/*, write inbox-rejected/*, read+write runs/*, read catalog/* (the deployed specs and tool
  catalog), list the bucket; DescribeStateMachine (it compares an upload's compiled definition with the deployed
  one) and StartExecution on the stack's machines (with allowAdHocSpecs: create/describe/start machines
  under its `<stack>_adhoc_` prefix, pass the ad-hoc machine role, the log-delivery actions CreateStateMachine
  needs);
- launch: read runs/*, list; SendTask* on the stack's machines; the SkyPilot secret; the step secrets
  (`stepSecretsArn`, for `secretEnv`);
- decide: read any object of the bucket (decision URIs are the spec's), list; read the data buckets;
- trigger: read runs/*, list; list the data buckets; SendTask*;
- watch: read any object (output checks), list; read the data buckets; SendTask*; the secret; DescribeExecution on
  the stack's executions (a wave whose token is gone: has its run's execution ended, so the reap event was missed?
  `engine.watch`);
- cleanup: read any object (output checks), list; read the data buckets; the secret;
- reap: read any object (output checks), list; read the data buckets; the secret (it cancels jobs recorded in the
  ledger).

Cleanup and reap check outputs as the watch does: a job that exited 0 just before its cancel is recorded SUCCEEDED
only with its declared outputs present (`engine.cleanup.cancel_active`), and outputs live wherever the spec says
(the engine bucket beyond `runs/`, a data bucket). Without the read, S3 answers 403 (moto allows the HeadObject),
the wave is recorded FAILED and a resume re-runs a finished job.

"The stack's machines" is the machine ARN prefix `...:stateMachine:<stack>_*` (`infra.names`): it covers every
deployed and ad-hoc machine and the child state machines of their Distributed Maps (`stateMachine:<name>/<label>`),
and the policies stay the same size whatever the number of specs (IAM: a role's inline policies total at most
10,240 characters; one ARN per spec per action would pass it at about 40 specs). AWS authorizes SendTaskSuccess,
SendTaskFailure and SendTaskHeartbeat against the state machine of the execution the token belongs to (the
Service Authorization Reference lists no resource type for them; AccessDenied messages name
`...:stateMachine:<name>`): for a Distributed Map member that is the child machine `<name>/<label>`, which an
exact parent ARN would not match.

KMS: with a customer-managed key named in context, `kms:Decrypt` on exactly that key, only through the service that
stores the data (`kms:ViaService`), to exactly the functions that read it: the SkyPilot token's key to the token's
readers, the step secrets' key to launch, the data buckets' keys to decide, watch, cleanup and reap (they read
objects there).

Listing the engine bucket is granted wherever an object is read: without s3:ListBucket, reading a missing key is
AccessDenied instead of NoSuchKey, and the engine treats "missing" as a normal answer (e.g. no catalog frozen).
The ledger actions are exactly the ones `npa_workflow.ledger.dynamodb` calls (GetItem, PutItem, UpdateItem,
Query), on the table and its two indexes by exact ARN.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from aws_cdk import Aws
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_secretsmanager as secretsmanager

from infra.storage import CATALOG_PREFIX, INBOX_PREFIX, REJECTED_PREFIX, RUNS_PREFIX
from npa_workflow.protocol.deployment import SECRET_READERS, STEP_SECRET_READERS  # the model's: who gets the ARNs

LEDGER_ITEM_ACTIONS = ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:Query"]
TASK_RESPONSE_ACTIONS = ["states:SendTaskSuccess", "states:SendTaskFailure", "states:SendTaskHeartbeat"]
TASK_RESPONDERS = ("launch", "trigger", "watch")
RUN_READERS = ("inbox", "launch", "decide", "trigger", "watch", "cleanup", "reap")
ANY_OBJECT_READERS = ("decide", "watch", "cleanup", "reap")
DATA_BUCKET_READERS = ("decide", "trigger", "watch", "cleanup", "reap")
EXECUTION_DESCRIBERS = ("watch",)
# CreateStateMachine with a logging configuration needs these on the caller, and they take no resource ARN.
LOG_DELIVERY_ACTIONS = [
    "logs:CreateLogDelivery",
    "logs:GetLogDelivery",
    "logs:UpdateLogDelivery",
    "logs:DeleteLogDelivery",
    "logs:ListLogDeliveries",
    "logs:PutResourcePolicy",
    "logs:DescribeResourcePolicies",
    "logs:DescribeLogGroups",
]


def grant_ledger(role: iam.IRole, table: dynamodb.ITable, index_arns: list[str]) -> None:
    role.add_to_principal_policy(iam.PolicyStatement(actions=LEDGER_ITEM_ACTIONS, resources=[table.table_arn]))
    role.add_to_principal_policy(iam.PolicyStatement(actions=["dynamodb:Query"], resources=index_arns))


def grant_list(role: iam.IRole, bucket_arn: str) -> None:
    role.add_to_principal_policy(iam.PolicyStatement(actions=["s3:ListBucket"], resources=[bucket_arn]))


def grant_objects(role: iam.IRole, bucket: s3.IBucket, actions: list[str], *prefixes: str) -> None:
    role.add_to_principal_policy(
        iam.PolicyStatement(actions=actions, resources=[bucket.arn_for_objects(f"{p}*") for p in prefixes])
    )


def data_bucket_arns(bucket_names: list[str]) -> list[str]:
    return [f"arn:{Aws.PARTITION}:s3:::{name}" for name in bucket_names]


@dataclass(frozen=True)
class KmsKeys:
    """Customer-managed keys named in context (empty: AWS-managed keys, nothing to grant)."""

    skypilot_token: str = ""
    step_secrets: str = ""
    data_buckets: list[str] = field(default_factory=list)


def grant_decrypt(role: iam.IRole, key_arns: list[str], service: str) -> None:
    if key_arns:
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["kms:Decrypt"],
                resources=list(key_arns),
                conditions={"StringEquals": {"kms:ViaService": f"{service}.{Aws.REGION}.amazonaws.com"}},
            )
        )


def grant_engine(
    roles: dict[str, iam.IRole],
    *,
    bucket: s3.IBucket,
    table: dynamodb.ITable,
    index_arns: list[str],
    secret: secretsmanager.ISecret,
    machines_arn: str,
    executions_arn: str,
    data_buckets: list[str],
    step_secrets: secretsmanager.ISecret | None = None,
    kms: KmsKeys | None = None,
) -> None:
    """Add to each function's role exactly what the table above says (`machines_arn`: the machine ARN prefix
    pattern `...:stateMachine:<stack>_*`; `executions_arn`: `...:execution:<stack>_*`, their executions)."""
    kms = kms or KmsKeys()
    for name, role in roles.items():
        grant_ledger(role, table, index_arns)
        if name in RUN_READERS:
            grant_list(role, bucket.bucket_arn)
        if name in ANY_OBJECT_READERS:
            grant_objects(role, bucket, ["s3:GetObject"], "")
        elif name in RUN_READERS:
            grant_objects(role, bucket, ["s3:GetObject"], RUNS_PREFIX)
        if name in DATA_BUCKET_READERS and data_buckets:
            arns = data_bucket_arns(data_buckets)
            role.add_to_principal_policy(iam.PolicyStatement(actions=["s3:ListBucket"], resources=arns))
            if name in ANY_OBJECT_READERS:
                role.add_to_principal_policy(
                    iam.PolicyStatement(actions=["s3:GetObject"], resources=[f"{arn}/*" for arn in arns])
                )
        if name in ANY_OBJECT_READERS and data_buckets:
            grant_decrypt(role, kms.data_buckets, "s3")
        if name in SECRET_READERS:
            secret.grant_read(role)
            grant_decrypt(role, [kms.skypilot_token] if kms.skypilot_token else [], "secretsmanager")
        if name in STEP_SECRET_READERS and step_secrets is not None:
            step_secrets.grant_read(role)
            grant_decrypt(role, [kms.step_secrets] if kms.step_secrets else [], "secretsmanager")
        if name in TASK_RESPONDERS:
            role.add_to_principal_policy(iam.PolicyStatement(actions=TASK_RESPONSE_ACTIONS, resources=[machines_arn]))
        if name in EXECUTION_DESCRIBERS:
            role.add_to_principal_policy(
                iam.PolicyStatement(actions=["states:DescribeExecution"], resources=[executions_arn])
            )

    inbox = roles["inbox"]
    grant_objects(inbox, bucket, ["s3:GetObject", "s3:GetObjectVersion"], INBOX_PREFIX)
    grant_objects(inbox, bucket, ["s3:GetObject"], CATALOG_PREFIX)
    grant_objects(inbox, bucket, ["s3:PutObject"], REJECTED_PREFIX, RUNS_PREFIX)
    inbox.add_to_principal_policy(
        iam.PolicyStatement(actions=["states:DescribeStateMachine", "states:StartExecution"], resources=[machines_arn])
    )


def grant_ad_hoc(
    inbox: iam.IRole, *, machine_role: iam.IRole, ad_hoc_machine_arns: list[str]
) -> None:
    """Only when `allowAdHocSpecs` is true: the inbox creates machines under its own name prefix, passing them the
    ad-hoc machine role and nothing else. It never updates or tags one (an ad-hoc machine's name is its
    definition's digest, `engine.inbox`), so UpdateStateMachine and TagResource are not granted."""
    inbox.add_to_principal_policy(
        iam.PolicyStatement(
            actions=[
                "states:CreateStateMachine",
                "states:DescribeStateMachine",
            ],
            resources=ad_hoc_machine_arns,
        )
    )
    inbox.add_to_principal_policy(
        iam.PolicyStatement(
            actions=["iam:PassRole"],
            resources=[machine_role.role_arn],
            conditions={"StringEquals": {"iam:PassedToService": "states.amazonaws.com"}},
        )
    )
    inbox.add_to_principal_policy(iam.PolicyStatement(actions=LOG_DELIVERY_ACTIONS, resources=["*"]))
