"""The deployed catalog: what the inbox reads to validate uploads and to run a deployed spec by name.

Every deploy publishes, to the engine bucket:

- `catalog/specs/<metadata.name>.yaml`: each spec of `specs/` (the same files the machines are compiled from),
  byte for byte, so a run request's `spec: <name>` compiles to the deployed machine's definition;
- `catalog/tools.yaml`: `specs/tools.yaml`, the tool catalog every upload is validated against;
- `catalog/machines.json`: `{"machines": {<metadata.name>: <state machine name>}}`, how the inbox finds a deployed
  spec's machine (with its ARN prefix from the environment: a map in the environment would pass Lambda's 4 KB limit
  for all variables at about 34 specs).

The files are staged at synth into one directory asset (no Docker, no network) and copied by an
`aws_s3_deployment.BucketDeployment`, which prunes `catalog/` too: a spec removed from `specs/` (whose machine
the same deploy removes) is no longer "deployed" for the inbox either.

The deployment's handler (a Lambda function that aws-cdk-lib ships) runs under a role of its own with exactly
what it does: `aws s3 cp` of the one asset object, then `aws s3 sync --delete` into `catalog/` (list that prefix,
put and delete objects under it). BucketDeployment's own grants (read on the whole asset bucket, read-write on the
whole engine bucket) are not given: the role is passed to it without policy updates.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from aws_cdk import RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_assets as s3_assets
from aws_cdk import aws_s3_deployment as s3_deployment
from constructs import Construct

from infra.functions import log_retention, new_staging_dir
from infra.state_machines import CatalogSpec
from infra.storage import CATALOG_MACHINES_FILE, CATALOG_PREFIX, CATALOG_SPECS_DIR, CATALOG_TOOLS_FILE
from npa_workflow.protocol.deployment import machines_document
from npa_workflow.spec.catalog import load_catalog_file

# The handler runs the AWS CLI (Python) on a few small files: 256 MB is plenty, and starts faster than 128 MB.
HANDLER_MEMORY_MB = 256
# The id aws-cdk-lib gives BucketDeployment's singleton handler function (at the stack's root).
HANDLER_ID_PREFIX = "Custom::CDKBucketDeployment"
# What `aws s3 sync --delete <dir> s3://<bucket>/catalog/` calls on the destination.
SYNC_ACTIONS = ["s3:PutObject", "s3:DeleteObject"]


def catalog_keys(specs: list[CatalogSpec], tools_file: Path | None) -> dict[str, Path]:
    """Key under `catalog/` → the file published there."""
    keys = {f"{CATALOG_SPECS_DIR}/{spec.name}.yaml": spec.path for spec in specs}
    if tools_file is not None:
        keys[CATALOG_TOOLS_FILE] = tools_file
    return keys


def stage_catalog(keys: dict[str, Path], machine_names: dict[str, str]) -> Path:
    """The files, laid out as under `catalog/`, in a fresh directory (the asset's content hash is theirs)."""
    root = new_staging_dir("npa-workflow-catalog-")
    for key, source in keys.items():
        dest = root / key
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, dest)
    (root / CATALOG_MACHINES_FILE).write_text(machines_document(machine_names), encoding="utf-8")
    return root


class CatalogPublication(Construct):
    """`keys` (key under catalog/ → source file), `asset`, `role`, `log_group` and `deployment`."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        specs: list[CatalogSpec],
        machine_names: dict[str, str],
        tools_file: Path | None,
        bucket: s3.IBucket,
        retention_days: int,
    ) -> None:
        super().__init__(scope, construct_id)
        if tools_file is not None:
            load_catalog_file(tools_file)  # an invalid catalog fails the synth, not every later upload
        self.keys = catalog_keys(specs, tools_file)
        self.asset = s3_assets.Asset(self, "Files", path=str(stage_catalog(self.keys, machine_names)))

        self.log_group = logs.LogGroup(
            self, "Logs", retention=log_retention(retention_days), removal_policy=RemovalPolicy.DESTROY
        )
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="npa-workflow catalog deployment: copies specs/ to catalog/ of the engine bucket, nothing else",
        )
        self.log_group.grant_write(self.role)
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:GetObject"], resources=[self.asset.bucket.arn_for_objects(self.asset.s3_object_key)]
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:ListBucket"],
                resources=[bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{CATALOG_PREFIX}*"]}},
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(actions=SYNC_ACTIONS, resources=[bucket.arn_for_objects(f"{CATALOG_PREFIX}*")])
        )

        self.deployment = s3_deployment.BucketDeployment(
            self,
            "Deployment",
            sources=[s3_deployment.Source.bucket(self.asset.bucket, self.asset.s3_object_key)],
            destination_bucket=bucket,
            destination_key_prefix=CATALOG_PREFIX,
            prune=True,
            retain_on_delete=True,  # the bucket outlives the stack; so does the catalog it was deployed with
            # The grants above are the whole policy: BucketDeployment's own (whole buckets) are dropped.
            role=self.role.without_policy_updates(),
            log_group=self.log_group,
            memory_limit=HANDLER_MEMORY_MB,
            output_object_keys=False,
        )
        self.deployment.node.add_dependency(self.role)
        # BucketDeployment's handler is a singleton function at the stack's root (one per stack, whatever the
        # number of deployments): found by the id aws-cdk-lib gives it.
        handlers = [
            child
            for child in Stack.of(self).node.children
            if isinstance(child, lambda_.Function) and child.node.id.startswith(HANDLER_ID_PREFIX)
        ]
        if len(handlers) != 1:
            raise RuntimeError(f"expected one {HANDLER_ID_PREFIX}* function in the stack, found {len(handlers)}")
        self.handler = handlers[0]
