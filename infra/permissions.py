"""IAM: what each function may touch, and nothing more.

Every function reads and writes the ledger. Beyond that:

- inbox: read inbox/*, write inbox-rejected/*, read+write runs/*, read catalog/* (the deployed specs and tool
  catalog), list the bucket; DescribeStateMachine (it compares an upload's compiled definition with the deployed
  one) and StartExecution on the stack's machines (with allowAdHocSpecs: create/describe/update/start machines
  under its `<stack>-adhoc-` prefix, pass the ad-hoc machine role, the log-delivery actions CreateStateMachine
  needs);
- launch: read runs/*, list; SendTask* on the stack's machines; the SkyPilot secret;
- decide: read any object of the bucket (decision URIs are the spec's), list; read the data buckets;
- trigger: read runs/*, list; list the data buckets; SendTask*;
- watch: read any object (output checks), list; read the data buckets; SendTask*; the secret;
- cleanup: read runs/*, list; the secret;
- reap: the secret (it cancels jobs recorded in the ledger).

Listing the engine bucket is granted wherever an object is read: without s3:ListBucket, reading a missing key is
AccessDenied instead of NoSuchKey, and the engine treats "missing" as a normal answer (e.g. no catalog frozen).
The ledger actions are exactly the ones `npa_workflow.ledger.dynamodb` calls (GetItem, PutItem, UpdateItem,
Query), on the table and its two indexes by exact ARN.
"""

from __future__ import annotations

from aws_cdk import Aws
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_secretsmanager as secretsmanager

from infra.storage import CATALOG_PREFIX, INBOX_PREFIX, REJECTED_PREFIX, RUNS_PREFIX

LEDGER_ITEM_ACTIONS = ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:Query"]
TASK_RESPONSE_ACTIONS = ["states:SendTaskSuccess", "states:SendTaskFailure", "states:SendTaskHeartbeat"]
SECRET_READERS = ("launch", "watch", "cleanup", "reap")
TASK_RESPONDERS = ("launch", "trigger", "watch")
RUN_READERS = ("inbox", "launch", "decide", "trigger", "watch", "cleanup")
ANY_OBJECT_READERS = ("decide", "watch")
DATA_BUCKET_READERS = ("decide", "trigger", "watch")
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


def grant_engine(
    roles: dict[str, iam.IRole],
    *,
    bucket: s3.IBucket,
    table: dynamodb.ITable,
    index_arns: list[str],
    secret: secretsmanager.ISecret,
    machine_arns: list[str],
    ad_hoc_machine_arns: list[str],
    data_buckets: list[str],
) -> None:
    """Add to each function's role exactly what the table above says."""
    responder_machines = machine_arns + ad_hoc_machine_arns
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
        if name in SECRET_READERS:
            secret.grant_read(role)
        if name in TASK_RESPONDERS:
            role.add_to_principal_policy(
                iam.PolicyStatement(actions=TASK_RESPONSE_ACTIONS, resources=responder_machines)
            )

    inbox = roles["inbox"]
    grant_objects(inbox, bucket, ["s3:GetObject", "s3:GetObjectVersion"], INBOX_PREFIX)
    grant_objects(inbox, bucket, ["s3:GetObject"], CATALOG_PREFIX)
    grant_objects(inbox, bucket, ["s3:PutObject"], REJECTED_PREFIX, RUNS_PREFIX)
    if machine_arns:  # a stack with no spec in specs/ has no deployed machine to compare with
        inbox.add_to_principal_policy(
            iam.PolicyStatement(actions=["states:DescribeStateMachine"], resources=machine_arns)
        )
    inbox.add_to_principal_policy(
        iam.PolicyStatement(actions=["states:StartExecution"], resources=machine_arns + ad_hoc_machine_arns)
    )


def grant_ad_hoc(
    inbox: iam.IRole, *, machine_role: iam.IRole, ad_hoc_machine_arns: list[str]
) -> None:
    """Only when `allowAdHocSpecs` is true: the inbox creates (and updates) machines under its own name prefix,
    passing them the ad-hoc machine role and nothing else."""
    inbox.add_to_principal_policy(
        iam.PolicyStatement(
            actions=[
                "states:CreateStateMachine",
                "states:DescribeStateMachine",
                "states:UpdateStateMachine",
                "states:TagResource",
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
