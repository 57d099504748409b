"""The twin's deploy: the stack the CDK app deploys, on moto, from the same deployment model (`protocol.deployment`).

`deploy_stack` is the one deploy of `serve` (every spec of a folder) and of `run` (one spec): the engine bucket
(versioned, its lifecycle rules, EventBridge notifications on), the buckets the specs' config names, the ledger, one
role, every function of the table with the model's environment, one log group and one logged, traced state machine
per spec named `<stack>_<spec>`, the ad-hoc machines' log group when ad-hoc specs are allowed, the catalog the inbox
reads (`catalog/specs/`, `catalog/tools.yaml`, `catalog/machines.json`) and the event rules with the template's own
EventPatterns, which the event pump matches every event against (`embedded_aws.event_patterns`).

What the twin sets apart from the cloud is listed, with the reason, in `TWIN_DIFFERENCES` (and checked resource by
resource against a synthesized template by tests/infra/test_infra_twin_parity.py).
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from npa_workflow.adapters.sfn_executions import SfnExecutions
from npa_workflow.embedded_aws.event_pump import ACCOUNT, REGION, EventPump, EventTarget
from npa_workflow.protocol import environment
from npa_workflow.protocol import functions as function_table
from npa_workflow.protocol.deployment import (
    CATALOG_MACHINES_FILE,
    CATALOG_PREFIX,
    CATALOG_SPECS_DIR,
    CATALOG_TOOLS_FILE,
    POWERTOOLS_SERVICE_NAME,
    Deployment,
    StackRefs,
    machines_document,
)
from npa_workflow.protocol.stack import LOCAL_BUCKET, LOCAL_LEDGER_TABLE

ROLE_NAME = "npa-workflow-local"
MACHINE_ARN_PREFIX = f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:"
LAMBDA_RUNTIME = "python3.11"  # the handlers run in this process, whatever the runtime says
S3_URI_BUCKET = re.compile(r"s3://([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(?:/|$)")
# What `serve` resolves a spec's config with, before any run exists: a bucket named after it depends on the run.
STAND_IN_RUN_ID = "npa-stand-in-run-id"

# Each deliberate difference between the twin and the synthesized template: {what: why}. Nothing else may differ
# (tests/infra/test_infra_twin_parity.py compares the two resource by resource; docs/local.md lists these).
TWIN_DIFFERENCES: dict[str, str] = {
    "physical names": "CloudFormation names the functions, rules, bucket and table `<stack>-<construct id>-<hash>`; "
                      "the twin names them `npa-workflow-<function>`, the rule's construct id, `npa-workflow-local` "
                      "and `npa-workflow-ledger` (machines and their log groups have the same names in both)",
    f"{POWERTOOLS_SERVICE_NAME} (functions)": "the in-process handlers share one process environment, where one "
                      "function's value would shadow the others'; each handler names its service in its Logger",
    environment.EXECUTOR: "`local`: steps run as local processes (`skypilot` with `run --executor skypilot`)",
    environment.SKYPILOT_TOKEN_SECRET_ARN: "no secret store: local jobs need no token; `run --executor skypilot` "
                                           "reads it from the process environment",
    environment.SKYPILOT_ENDPOINT: "empty unless `run --executor skypilot --skypilot-endpoint URL`: local jobs "
                                    "need no SkyPilot",
    "NPA_WORKFLOW_WATCH_INTERVAL_SECONDS / watch schedule": "the twin's loop runs the watch every tick (0.25 s "
                      "while a run is RUNNING) instead of `rate(N minutes)`, so a wave ends as its job ends (the "
                      "interval is 0, and a data-bucket trigger's bound is maxPolls × pollSeconds); the watch still "
                      "heartbeats at the cloud's cadence, every 40 % of HeartbeatSeconds",
    "NPA_WORKFLOW_HEARTBEAT_SECONDS under a short `run` deadline": "`run --max-wait-seconds N` below the heartbeat "
                      "(300 s) is honoured exactly, with HeartbeatSeconds N-1; the cloud raises such a deadline to "
                      "HeartbeatSeconds + 1",
    "allowAdHocSpecs (serve)": "`serve` allows ad-hoc specs, as a stack deployed with -c allowAdHocSpecs=true, so "
                               "`submit` of any spec file works; `run` and the cloud's default do not",
    "function log groups": "the handlers run in the twin's process and log to its lambdas.log, not CloudWatch",
    "process-only variables": "the embedded AWS's endpoint and test credentials, the local home, metrics and "
                              "tracing off are set in the process, in no function's configuration",
    "not deployed": "the access-log bucket, the dead-letter and failed-invocation queues (a JSON-lines file is the "
                    "on-failure destination), alarms, KMS keys, X-Ray, the layer and IAM policies: nothing of the "
                    "engine's data path reads them",
}


@dataclass(frozen=True)
class StackSpec:
    """A spec the stack deploys: its `metadata.name`, its file's bytes (published under catalog/specs/), and its
    compiled definition (placeholders not substituted)."""

    name: str
    source: bytes
    definition: Mapping[str, Any]


@dataclass
class EmbeddedStack:
    clients: Mapping[str, Any]
    deployment: Deployment
    refs: StackRefs
    role_arn: str
    function_arns: dict[str, str]
    pump: EventPump
    machines: dict[str, str] = field(default_factory=dict)  # spec name → machine ARN

    def process_environment(self) -> dict[str, str]:
        """What the in-process handlers read, set in the process (they share it): every variable the functions
        are deployed with, but the one each function sets differently (`TWIN_DIFFERENCES`)."""
        values: dict[str, str] = {}
        for name in function_table.NAMES:
            values.update(function_environment(self.deployment, name, self.refs))
        return values


def twin_deployment(*, max_wait_seconds: int | None = None, allow_ad_hoc: bool = False, executor: str = "local",
                    skypilot_endpoint: str = "", trigger_event_buckets: Sequence[str] = (),
                    heartbeat: int | None = None) -> Deployment:
    """The deployment model's settings for the twin: the CDK app's defaults, but for what `TWIN_DIFFERENCES` lists.
    The buckets the specs name are trigger-event buckets (a trigger on them completes when its object lands, as
    in a stack deployed with `-c triggerEventBuckets=<them>`); the retention outlives the deadline."""
    default = Deployment()
    wait = default.max_wait_seconds if max_wait_seconds is None else max_wait_seconds
    return Deployment(
        retention_days=max(default.retention_days, wait // 86400 + 1),
        max_wait_seconds=wait,
        watch_interval_seconds=0,
        allow_ad_hoc=allow_ad_hoc,
        skypilot_endpoint=skypilot_endpoint,
        trigger_event_buckets=tuple(dict.fromkeys(trigger_event_buckets)),
        executor=executor,
        heartbeat=heartbeat,
    )


def config_buckets(loaded: Any, run_id: str = STAND_IN_RUN_ID) -> list[str]:
    """The buckets a spec's config names once resolved for `run_id` (`config.bucket` and every `s3://` value), the
    engine bucket left out: what `run` and `serve` create and take as trigger-event buckets. With the stand-in run
    id (`serve`, before any run), a bucket that depends on the run is left out: it cannot be known yet."""
    from npa_workflow.spec.config import resolve_config

    run_ctx, _ = resolve_config(loaded.spec.config, loaded.spec.name, run_id, loaded.spec.run)
    found = [str(run_ctx.config.get("bucket") or "").strip()]
    for value in run_ctx.config.values():
        found += S3_URI_BUCKET.findall(str(value))
    return [b for b in dict.fromkeys(found) if b and b != LOCAL_BUCKET and STAND_IN_RUN_ID not in b
            and "{" not in b]


def function_name(slot: function_table.FunctionSlot) -> str:
    return f"npa-workflow-{slot.name}"


def function_environment(deployment: Deployment, name: str, refs: StackRefs) -> dict[str, str]:
    """A function's variables in the twin: the model's, but the service name (`TWIN_DIFFERENCES`)."""
    values = deployment.function_environment(name, refs)
    values.pop(POWERTOOLS_SERVICE_NAME, None)
    return values


def _dummy_zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("README.txt", "local runtime: the handler is imported from the running process\n")
    return buf.getvalue()


def create_bucket(s3: Any, bucket: str) -> None:
    """Create a bucket; one that exists already is fine (ClientError otherwise)."""
    try:
        s3.create_bucket(Bucket=bucket)
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
            raise


def configure_engine_bucket(s3: Any, deployment: Deployment, bucket: str = LOCAL_BUCKET) -> None:
    """The engine bucket as the stack configures it: versioned, its lifecycle rules, EventBridge notifications."""
    from npa_workflow.protocol.deployment import BUCKET_EVENTBRIDGE, BUCKET_VERSIONED

    create_bucket(s3, bucket)
    if BUCKET_VERSIONED:
        s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    s3.put_bucket_lifecycle_configuration(
        Bucket=bucket, LifecycleConfiguration={"Rules": [rule.to_s3() for rule in deployment.bucket_lifecycle]})
    if BUCKET_EVENTBRIDGE:
        s3.put_bucket_notification_configuration(Bucket=bucket,
                                                 NotificationConfiguration={"EventBridgeConfiguration": {}})


def _log_group(logs: Any, name: str, retention_days: int) -> str:
    """A log group with the stack's retention (CloudWatch's nearest allowed period at or above it); its ARN."""
    try:
        logs.create_log_group(logGroupName=name)
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "ResourceAlreadyExistsException":
            raise
    logs.put_retention_policy(logGroupName=name, retentionInDays=log_retention_days(retention_days))
    return f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:{name}:*"


# CloudWatch Logs' allowed retention periods, in days (PutRetentionPolicy).
RETENTION_PERIODS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922,
                     3288, 3653)


def log_retention_days(days: int) -> int:
    """The shortest CloudWatch Logs retention that keeps `days` days."""
    return next((allowed for allowed in RETENTION_PERIODS if allowed >= days), RETENTION_PERIODS[-1])


def deploy_stack(clients: Mapping[str, Any], deployment: Deployment, specs: Sequence[StackSpec], *,
                 catalog: bytes | None, data_buckets: Sequence[str], failures_path: Path,
                 ledger: Any, storage_fault: Callable[[], BaseException | None] | None = None) -> EmbeddedStack:
    """Deploy the stack on the embedded AWS (see the module doc). `ledger.create_table()` makes the table; a
    bucket of `data_buckets` that cannot be created is the caller's ClientError. `storage_fault`: the write the
    disk refused, if any (`DurableAws.storage_fault`), for the event pump (`EventPump`)."""
    s3, sfn = clients["s3"], clients["stepfunctions"]
    configure_engine_bucket(s3, deployment)
    for bucket in data_buckets:
        create_bucket(s3, bucket)
    ledger.create_table()
    role_arn = clients["iam"].create_role(
        RoleName=ROLE_NAME,
        AssumeRolePolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [{
            "Effect": "Allow", "Principal": {"Service": ["lambda.amazonaws.com", "states.amazonaws.com"]},
            "Action": "sts:AssumeRole"}]}),
    )["Role"]["Arn"]
    function_arns = {fn.name: f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{function_name(fn)}"
                     for fn in function_table.FUNCTIONS}
    ad_hoc_log_group = (_log_group(clients["logs"], deployment.ad_hoc_log_group_name, deployment.retention_days)
                        if deployment.allow_ad_hoc else "")
    refs = StackRefs(table=LOCAL_LEDGER_TABLE, bucket=LOCAL_BUCKET, machine_arn_prefix=MACHINE_ARN_PREFIX,
                     function_arns=function_arns, ad_hoc_role_arn=role_arn if deployment.allow_ad_hoc else "",
                     ad_hoc_log_group_arn=ad_hoc_log_group)
    code = _dummy_zip()
    for fn in function_table.FUNCTIONS:
        created = clients["lambda"].create_function(
            FunctionName=function_name(fn), Runtime=LAMBDA_RUNTIME, Role=role_arn, Handler=fn.handler,
            Code={"ZipFile": code}, Timeout=fn.timeout_seconds, MemorySize=fn.memory_mb,
            Environment={"Variables": function_environment(deployment, fn.name, refs)},
        )["FunctionArn"]
        function_arns[fn.name] = created
        if fn.reserved_concurrency is not None:
            clients["lambda"].put_function_concurrency(FunctionName=function_name(fn),
                                                       ReservedConcurrentExecutions=fn.reserved_concurrency)
    pump = EventPump(clients["lambda"], {fn.name: function_name(fn) for fn in function_table.FUNCTIONS},
                     failures_path, rules=deploy_rules(clients["events"], deployment, function_arns),
                     storage_fault=storage_fault)
    stack = EmbeddedStack(clients=clients, deployment=deployment, refs=refs, role_arn=role_arn,
                          function_arns=function_arns, pump=pump)
    executions = SfnExecutions(sfn)
    names: dict[str, str] = {}
    for spec in specs:
        name = deployment.machine_name(spec.name)
        log_group = _log_group(clients["logs"], deployment.machine_log_group_name(spec.name), deployment.retention_days)
        stack.machines[spec.name] = executions.create_machine(
            name, function_table.substitute(spec.definition, function_arns), role_arn=role_arn,
            log_group_arn=log_group)
        names[spec.name] = name
        s3.put_object(Bucket=LOCAL_BUCKET, Key=f"{CATALOG_PREFIX}{CATALOG_SPECS_DIR}/{spec.name}.yaml",
                      Body=spec.source)
    if catalog is not None:
        s3.put_object(Bucket=LOCAL_BUCKET, Key=f"{CATALOG_PREFIX}{CATALOG_TOOLS_FILE}", Body=catalog)
    s3.put_object(Bucket=LOCAL_BUCKET, Key=f"{CATALOG_PREFIX}{CATALOG_MACHINES_FILE}",
                  Body=machines_document(names).encode())
    return stack


def deploy_rules(events: Any, deployment: Deployment, function_arns: Mapping[str, str]) -> list[EventTarget]:
    """The stack's event rules on the embedded EventBridge (so the deployed state can be read back), and what the
    pump delivers by: (rule, pattern, target function)."""
    rules = []
    for rule in deployment.event_rules(LOCAL_BUCKET, MACHINE_ARN_PREFIX + deployment.machine_prefix):
        events.put_rule(Name=rule.id, EventPattern=json.dumps(rule.pattern), Description=rule.description)
        events.put_targets(Rule=rule.id, Targets=[{"Id": rule.target, "Arn": function_arns[rule.target]}])
        rules.append(EventTarget(rule.id, rule.pattern, rule.target))
    return rules
