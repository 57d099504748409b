"""cdk-nag (AwsSolutionsChecks) on the whole app, and the findings we accept, each with its reason.

cdk-nag 3 runs as a CDK validation plugin: an unacknowledged error fails the synth, and every finding (error or
warning) lands in the cloud assembly's `validation-report.json`. Each acknowledgement names the exact finding
(`Rule[Finding]` for IAM5) on the exact construct, never the whole stack, so a new wildcard is still reported.
`stack.nag_acknowledgements` lists what was acknowledged (construct path, finding, reason), for the tests.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks
from constructs import IConstruct

from infra.names import ad_hoc_prefix, machine_prefix
from infra.permissions import (
    ANY_OBJECT_READERS,
    DATA_BUCKET_READERS,
    EXECUTION_DESCRIBERS,
    RUN_READERS,
    SECRET_READERS,
    STEP_SECRET_READERS,
)
from infra.settings import is_complete_secret_arn
from infra.storage import CATALOG_PREFIX, CODE_PREFIX, INBOX_PREFIX, REJECTED_PREFIX, RUNS_PREFIX

if TYPE_CHECKING:
    from infra.stack import NpaWorkflowStack

XRAY = (
    "Active X-Ray tracing of the function: xray:PutTraceSegments and xray:PutTelemetryRecords "
    "accept no resource ARN, so '*' is the only possible resource."
)
STATE_MACHINE_LOGGING = (
    "Step Functions logging and tracing (required by nag SF1/SF2): the CloudWatch Logs log-delivery actions "
    "(logs:CreateLogDelivery, ...) and the X-Ray actions accept no resource ARN, so '*' is the only resource."
)
RUN_OBJECTS = (
    "Object-level access under the runs/ prefix only: the engine freezes each run's spec, catalog and group lists "
    "under runs/<run-id>/, and run ids are known only at run time."
)
INBOX_OBJECTS = "Reads the uploaded spec: any key under the inbox/ prefix, named by the uploader at run time."
REJECTED_OBJECTS = "Writes one rejection report per bad upload under the inbox-rejected/ prefix, keyed by the upload."
CODE_OBJECTS = ("Stages a raw upload's code bundle under the code/ prefix, one object per file of it under "
                "code/<content digest>/, named at run time (engine.inbox_code); reads the manifest first to reuse it.")
ANY_OBJECT = (
    "Reads artifacts whose S3 URIs the specs choose (decision files for decide, step outputs and trigger objects "
    "for watch): they can be anywhere in the engine bucket, and read-only (s3:GetObject) is all it gets."
)
DATA_BUCKET_OBJECTS = (
    "Read-only (s3:GetObject) on the buckets the operator listed in context dataBuckets, where the specs' steps "
    "write decisions and outputs; their keys are chosen by the specs."
)
STACK_MACHINES = (
    "The stack's state machines by their name prefix <stack>_ (infra.names): every deployed machine, the ad-hoc "
    "ones, and the child machines of their Distributed Maps (<name>/<label>, whose task tokens these functions "
    "answer); one ARN per spec would pass IAM's 10,240-character inline policy limit at about 40 specs. The '.' "
    "cannot occur in a stack name, so no other stack's machine matches."
)
STACK_EXECUTIONS = (
    "Executions of the stack's machines by their name prefix <stack>_ (DescribeExecution only): the watch asks "
    "whether a run's execution has ended when a wave's token is gone (a missed reap event); the run's execution "
    "ARN is read from the ledger, so its machine is any of the stack's."
)
AD_HOC_MACHINES = (
    "allowAdHocSpecs is on: the inbox creates and starts machines for uploaded specs not in specs/, named "
    "<stack>_adhoc_<content hash>; the wildcard is limited to that name prefix in this account and region."
)
AD_HOC_LOG_DELIVERY = (
    "allowAdHocSpecs is on: CreateStateMachine with a logging configuration requires the caller to hold the "
    "CloudWatch Logs log-delivery actions, which accept no resource ARN."
)
AD_HOC_MACHINE_ROLE = (
    "Role of the ad-hoc machines: log delivery and X-Ray actions accept no resource ARN (as for every machine)."
)
SECRET_NO_ROTATION = (
    "The secret holds a SkyPilot API server service-account token, issued by that server's admin, not by AWS: "
    "there is no rotation Lambda that could mint one. Rotate it on the SkyPilot side and put-secret-value."
)
DLQ_ITSELF = "This queue is the dead-letter queue of the EventBridge targets; a queue for it would be a DLQ of a DLQ."
PARTIAL_SECRET_ARN = (
    "The secret ARN was given without its 6-character suffix: Secrets Manager ARNs then need the '-??????' "
    "wildcard to match the one secret."
)
CATALOG_OBJECTS = (
    "Read-only (s3:GetObject) under the catalog/ prefix, which the deploy fills: a run request names a deployed spec "
    "(catalog/specs/<name>.yaml, the name chosen by the uploader) and a missing name must answer NoSuchKey (a "
    "rejection report), not AccessDenied, so the whole prefix; plus catalog/tools.yaml."
)
CATALOG_DEPLOYMENT_OBJECTS = (
    "The catalog deployment mirrors specs/ into the catalog/ prefix (aws s3 sync --delete): it puts one object per "
    "spec, keyed by the spec's name, and deletes the objects of specs removed since the last deploy; put and "
    "delete only, nowhere outside catalog/."
)
CATALOG_DEPLOYMENT_RUNTIME = (
    "The function is aws-cdk-lib's own BucketDeployment handler (its code and AWS CLI layer ship with aws-cdk-lib, "
    "which fixes the runtime, Python 3.13, and offers no option to change it). It runs only as a CloudFormation "
    "custom resource during deploys, never on the engine's data path; a newer runtime comes with aws-cdk-lib."
)
AD_HOC_DISTRIBUTED_MAP = (
    "allowAdHocSpecs is on: an ad-hoc machine with a Distributed Map starts, describes and stops child executions "
    "of itself; ad-hoc machines are created at run time, named <stack>_adhoc_<content hash>, and share this one "
    "role, so 'itself' is that name prefix (machines and their executions) in this account and region."
)
DISTRIBUTED_MAP = (
    "A Distributed Map starts child executions of its own machine: they are named by Step Functions at run time, "
    "under this machine's execution ARN prefix (execution:<name>:* and the children's execution:<name>/<label>:*, "
    "as AWS documents and aws-cdk-lib grants for Distributed Maps)."
)
FAILED_INVOCATIONS_ITSELF = (
    "This queue is the on-failure destination of the functions' asynchronous invocations: a dead-letter queue for "
    "it would be a DLQ of a DLQ."
)

Acknowledgement = tuple[str, str, str]  # (construct path, finding id, reason)


def apply_nag(app: cdk.App, stack: NpaWorkflowStack) -> None:
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    stack.nag_acknowledgements = acknowledge_findings(stack)


def _ref_arn(stack: cdk.Stack, construct: IConstruct) -> str:
    """How cdk-nag spells `Fn::GetAtt <resource>.Arn` in a finding id."""
    logical_id = stack.resolve(stack.get_logical_id(construct.node.default_child))  # type: ignore[arg-type]
    return f"<{logical_id}.Arn>"


def iam5(resource: str) -> str:
    return f"AwsSolutions-IAM5[Resource::{resource}]"


def acknowledge_findings(stack: NpaWorkflowStack) -> list[Acknowledgement]:
    made: list[Acknowledgement] = []

    def ack(construct: IConstruct, finding: str, reason: str) -> None:
        cdk.Validations.of(construct).acknowledge(cdk.Acknowledgment(id=finding, reason=reason))
        made.append((construct.node.path, finding, reason))

    settings = stack.settings
    bucket_arn = _ref_arn(stack, stack.storage.bucket)

    machines = (
        f"arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>:stateMachine:{machine_prefix(stack.stack_name)}*"
    )
    for name in ("inbox", "launch", "trigger", "watch"):
        ack(stack.engine.roles[name], iam5(machines), STACK_MACHINES)
    stack_executions = machines.replace(":stateMachine:", ":execution:") + ":*"
    for name in EXECUTION_DESCRIBERS:
        ack(stack.engine.roles[name], iam5(stack_executions), STACK_EXECUTIONS)
    for name, role in stack.engine.roles.items():
        ad_hoc_inbox = name == "inbox" and settings.allow_ad_hoc_specs
        ack(role, iam5("*"), XRAY + (" " + AD_HOC_LOG_DELIVERY if ad_hoc_inbox else ""))
        if name in ANY_OBJECT_READERS:
            ack(role, iam5(f"{bucket_arn}/*"), ANY_OBJECT)
        elif name in RUN_READERS:
            ack(role, iam5(f"{bucket_arn}/{RUNS_PREFIX}*"), RUN_OBJECTS)
        if name in DATA_BUCKET_READERS and name in ANY_OBJECT_READERS:
            for bucket in settings.data_buckets:
                ack(role, iam5(f"arn:<AWS::Partition>:s3:::{bucket}/*"), DATA_BUCKET_OBJECTS)
    inbox = stack.engine.roles["inbox"]
    ack(inbox, iam5(f"{bucket_arn}/{INBOX_PREFIX}*"), INBOX_OBJECTS)
    ack(inbox, iam5(f"{bucket_arn}/{REJECTED_PREFIX}*"), REJECTED_OBJECTS)
    ack(inbox, iam5(f"{bucket_arn}/{CATALOG_PREFIX}*"), CATALOG_OBJECTS)
    ack(inbox, iam5(f"{bucket_arn}/{CODE_PREFIX}*"), CODE_OBJECTS)

    ack(stack.catalog.role, iam5(f"{bucket_arn}/{CATALOG_PREFIX}*"), CATALOG_DEPLOYMENT_OBJECTS)
    ack(stack.catalog.handler, "AwsSolutions-L1", CATALOG_DEPLOYMENT_RUNTIME)

    for spec_name, role in stack.workflows.roles.items():
        ack(role, iam5("*"), STATE_MACHINE_LOGGING)
        if stack.workflows.distributed.get(spec_name):
            machine = stack.workflows.names[spec_name]
            executions = f"arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>:execution:{machine}"
            ack(role, iam5(f"{executions}:*"), DISTRIBUTED_MAP)
            ack(role, iam5(f"{executions}/*:*"), DISTRIBUTED_MAP)
            ack(role, iam5(f"{bucket_arn}/{RUNS_PREFIX}*"), RUN_OBJECTS)

    if settings.allow_ad_hoc_specs:
        prefix_arn = (
            f"arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>:stateMachine:{ad_hoc_prefix(stack.stack_name)}*"
        )
        ack(stack.engine.roles["inbox"], iam5(prefix_arn), AD_HOC_MACHINES)
        if stack.ad_hoc_role is not None:
            ack(stack.ad_hoc_role, iam5("*"), AD_HOC_MACHINE_ROLE)
            ack(stack.ad_hoc_role, iam5(prefix_arn), AD_HOC_DISTRIBUTED_MAP)
            executions = prefix_arn.replace(":stateMachine:", ":execution:")
            ack(stack.ad_hoc_role, iam5(executions + ":*"), AD_HOC_DISTRIBUTED_MAP)
            ack(stack.ad_hoc_role, iam5(executions + "/*:*"), AD_HOC_DISTRIBUTED_MAP)
            ack(stack.ad_hoc_role, iam5(f"{bucket_arn}/{RUNS_PREFIX}*"), RUN_OBJECTS)

    if settings.skypilot_token_secret_arn and not is_complete_secret_arn(settings.skypilot_token_secret_arn):
        for name in SECRET_READERS:
            ack(stack.engine.roles[name], iam5(f"{settings.skypilot_token_secret_arn}-??????"), PARTIAL_SECRET_ARN)
    if settings.step_secrets_arn and not is_complete_secret_arn(settings.step_secrets_arn):
        for name in STEP_SECRET_READERS:
            ack(stack.engine.roles[name], iam5(f"{settings.step_secrets_arn}-??????"), PARTIAL_SECRET_ARN)
    if not settings.skypilot_token_secret_arn:
        ack(stack.secret, "AwsSolutions-SMG4", SECRET_NO_ROTATION)
    ack(stack.events.dead_letters, "AwsSolutions-SQS3", DLQ_ITSELF)
    ack(stack.async_failures.failed_invocations, "AwsSolutions-SQS3", FAILED_INVOCATIONS_ITSELF)
    return made
