"""The deployment model: what the stack configures on each resource, for one settings value.

The CDK app (`infra/`) builds its resources from this model, and the local twin (`local.embedded_stack`) deploys
the same resources on moto from it, so the two cannot drift apart by construction:

- each function's environment (`function_environment`), with its handler, timeout, memory and reserved concurrency
  from the function table (`protocol.functions`);
- each state machine's name (`protocol.deployed_names`), logging (`MACHINE_LOGGING`) and tracing;
- the engine bucket: versioning, lifecycle rules (`BUCKET_LIFECYCLE`), EventBridge notifications;
- the log groups' retention (`retention_days`), the ad-hoc policy (`allow_ad_hoc`, `ad_hoc_prefix`,
  `ad_hoc_log_group_name`) and the catalog the inbox reads (`catalog/machines.json`, `machines_document`);
- every event rule's EventPattern (`event_rules`): the twin delivers an event to a function only when it matches
  the rule's own pattern (`embedded_aws.event_patterns`).

Values that only exist once deployed (the table's and bucket's names, ARNs) are the caller's `StackRefs`: CDK tokens
in the app, moto's names in the twin. Where the twin differs on purpose (its endpoints, its watch ticking every
pass), the difference is a settings value or a `StackRefs` value, and `tests/infra/test_infra_twin_parity.py`
lists each with its reason.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from npa_workflow.compile.deadlines import DEFAULT_MAX_WAIT_SECONDS  # the compiler's own default, one number
from npa_workflow.protocol import deployed_names
from npa_workflow.protocol import environment as env
from npa_workflow.protocol import functions as function_table

# -- settings defaults (the CDK context's, infra/settings.py documents each key)
DEFAULT_RETENTION_DAYS = 30
DEFAULT_WATCH_INTERVAL_MINUTES = 1
CLOUD_EXECUTOR = "skypilot"

# -- the engine bucket's layout (keys as npa_workflow.engine.inbox reads them)
INBOX_PREFIX = "inbox/"
REJECTED_PREFIX = "inbox-rejected/"
RUNS_PREFIX = "runs/"
CATALOG_PREFIX = "catalog/"
CATALOG_SPECS_DIR = "specs"  # catalog/specs/<metadata.name>.yaml
CATALOG_TOOLS_FILE = "tools.yaml"  # catalog/tools.yaml
CATALOG_MACHINES_FILE = "machines.json"  # catalog/machines.json: {"machines": {spec name: machine name}}
# How long rejection reports stay: they explain one bad upload, nobody needs them for long.
REJECTED_RETENTION_DAYS = 14
# Old versions of any object (the bucket is versioned): recoverable for a while, then gone.
NONCURRENT_RETENTION_DAYS = 30
BUCKET_VERSIONED = True
BUCKET_EVENTBRIDGE = True  # S3 sends every object event of the bucket to the default event bus

# -- functions
POWERTOOLS_SERVICE_NAME = "POWERTOOLS_SERVICE_NAME"
POWERTOOLS_METRICS_NAMESPACE = "POWERTOOLS_METRICS_NAMESPACE"
METRICS_NAMESPACE = "npa-workflow"
# No pydantic plugins are used: this skips pydantic's entry-point scan of every installed distribution,
# which the first model build would otherwise pay at each cold start (bench/handler_import.py).
PYDANTIC_PLUGINS_OFF = {"PYDANTIC_DISABLE_PLUGINS": "__all__"}
SECRET_READERS = ("launch", "watch", "cleanup", "reap")  # the SkyPilot token
STEP_SECRET_READERS = ("launch", "inbox")  # inbox: checks every secretEnv name is there
HEARTBEAT_READERS = ("inbox", "watch")  # the watch beats every 40 % of HeartbeatSeconds (engine/watch.py)

# -- state machines: Standard (waitForTaskToken needs it), logged with execution data, traced. Execution data is
# logged so an operator sees a failed step's error and cause; task tokens in it are useless without
# states:SendTask* on this machine, which only the engine has.
MACHINE_TYPE = "STANDARD"
MACHINE_LOGGING = {"level": "ALL", "includeExecutionData": True}
MACHINE_TRACING = True

# -- event rules
ENDED_STATUSES = ("FAILED", "ABORTED", "TIMED_OUT", "SUCCEEDED")


@dataclass(frozen=True)
class LifecycleRule:
    """One S3 lifecycle rule of the engine bucket (days; None: not set)."""

    id: str
    prefix: str | None = None
    expiration_days: int | None = None
    noncurrent_expiration_days: int | None = None
    expired_object_delete_marker: bool = False
    abort_multipart_days: int | None = None

    def to_s3(self) -> dict[str, Any]:
        """The rule as S3's PutBucketLifecycleConfiguration takes it."""
        rule: dict[str, Any] = {"ID": self.id, "Status": "Enabled",
                                "Filter": {"Prefix": self.prefix} if self.prefix else {}}
        if self.expiration_days is not None:
            rule["Expiration"] = {"Days": self.expiration_days}
        elif self.expired_object_delete_marker:
            rule["Expiration"] = {"ExpiredObjectDeleteMarker": True}
        if self.noncurrent_expiration_days is not None:
            rule["NoncurrentVersionExpiration"] = {"NoncurrentDays": self.noncurrent_expiration_days}
        if self.abort_multipart_days is not None:
            rule["AbortIncompleteMultipartUpload"] = {"DaysAfterInitiation": self.abort_multipart_days}
        return rule


@dataclass(frozen=True)
class EventRule:
    """An EventBridge rule on the default bus: its construct id, its target function, its pattern."""

    id: str
    target: str
    description: str
    pattern: dict[str, Any]


@dataclass(frozen=True)
class StackRefs:
    """What exists only once deployed: the resources' names and ARNs (CDK tokens in the app, moto's in the twin)."""

    table: str
    bucket: str
    machine_arn_prefix: str  # `arn:…:states:<region>:<account>:stateMachine:` (the inbox appends a machine name)
    function_arns: Mapping[str, str] = field(default_factory=dict)  # {function name: ARN}
    skypilot_token_secret_arn: str = ""
    step_secrets_arn: str = ""
    ad_hoc_role_arn: str = ""
    ad_hoc_log_group_arn: str = ""


@dataclass(frozen=True)
class Deployment:
    """The stack's configuration for one settings value (the CDK context's; the twin's, see local.embedded_stack)."""

    stack_name: str = deployed_names.DEFAULT_STACK_NAME
    retention_days: int = DEFAULT_RETENTION_DAYS
    max_wait_seconds: int = DEFAULT_MAX_WAIT_SECONDS
    # The watch schedule, in seconds (the cloud: `watchIntervalMinutes` × 60; the twin: 0, it ticks every pass).
    watch_interval_seconds: int = DEFAULT_WATCH_INTERVAL_MINUTES * 60
    allow_ad_hoc: bool = False
    skypilot_endpoint: str = ""
    trigger_event_buckets: tuple[str, ...] = ()
    executor: str = CLOUD_EXECUTOR
    # None: derived from the watch interval. `run` sets it under a deadline shorter than that, which it honours
    # exactly (the cloud raises an execution's deadline to HeartbeatSeconds + 1: compile.deadlines.input_deadline).
    heartbeat: int | None = None

    # ------------------------------------------------------------------------------------- compile options
    @property
    def heartbeat_seconds(self) -> int:
        """Heartbeats ride on the watch tick: `HeartbeatSeconds` is at least three ticks, never below the compiler's
        default (unless `heartbeat` says otherwise)."""
        from npa_workflow.compile.deadlines import DEFAULT_HEARTBEAT_SECONDS  # the compiler's; protocol stays below

        if self.heartbeat is not None:
            return self.heartbeat
        return max(DEFAULT_HEARTBEAT_SECONDS, 3 * self.watch_interval_seconds)

    def compile_options(self, **overrides: Any) -> Any:
        """The CompileOptions the machines are compiled with (and the inbox compiles uploads with): the heartbeat,
        the per-wave deadline and the watch interval (a data-bucket trigger's bound is `maxPolls` × the longer of
        `pollSeconds` and the tick); every other option is the compiler's default unless `overrides` (a local
        run's command line) sets it."""
        from npa_workflow.compile.options import CompileOptions

        return CompileOptions(heartbeat_seconds=self.heartbeat_seconds, max_wait_seconds=self.max_wait_seconds,
                              watch_interval_seconds=self.watch_interval_seconds, **overrides)

    # ------------------------------------------------------------------------------------- names
    def machine_name(self, spec_name: str) -> str:
        return deployed_names.machine_name(self.stack_name, spec_name)

    def machine_log_group_name(self, spec_name: str) -> str:
        return deployed_names.log_group_name(self.machine_name(spec_name))

    @property
    def machine_prefix(self) -> str:
        return deployed_names.machine_prefix(self.stack_name)

    @property
    def ad_hoc_prefix(self) -> str:
        return deployed_names.ad_hoc_prefix(self.stack_name)

    @property
    def ad_hoc_log_group_name(self) -> str:
        return f"{deployed_names.LOG_GROUP_PREFIX}{self.ad_hoc_prefix}machines"

    # ------------------------------------------------------------------------------------- storage
    @property
    def bucket_lifecycle(self) -> tuple[LifecycleRule, ...]:
        return (
            LifecycleRule("expire-rejected-uploads", prefix=REJECTED_PREFIX, expiration_days=REJECTED_RETENTION_DAYS),
            LifecycleRule("expire-old-runs", prefix=RUNS_PREFIX, expiration_days=self.retention_days),
            LifecycleRule("expire-noncurrent-versions", noncurrent_expiration_days=NONCURRENT_RETENTION_DAYS,
                          expired_object_delete_marker=True, abort_multipart_days=7),
        )

    # ------------------------------------------------------------------------------------- functions
    def function_environment(self, name: str, refs: StackRefs) -> dict[str, str]:
        """Every variable function `name` is deployed with."""
        function_table.slot(name)  # an unknown name is a KeyError naming the known ones
        values = {
            env.LEDGER_TABLE: refs.table,
            env.BUCKET: refs.bucket,
            env.EXECUTOR: self.executor,
            env.RETENTION_DAYS: str(self.retention_days),
            env.SKYPILOT_ENDPOINT: self.skypilot_endpoint,
            POWERTOOLS_SERVICE_NAME: f"npa-workflow-{name}",
            POWERTOOLS_METRICS_NAMESPACE: METRICS_NAMESPACE,
            **PYDANTIC_PLUGINS_OFF,
        }
        if name in SECRET_READERS and refs.skypilot_token_secret_arn:
            values[env.SKYPILOT_TOKEN_SECRET_ARN] = refs.skypilot_token_secret_arn
        if name in STEP_SECRET_READERS and refs.step_secrets_arn:
            values[env.STEP_SECRETS_ARN] = refs.step_secrets_arn
        if name in HEARTBEAT_READERS:
            values[env.HEARTBEAT_SECONDS] = str(self.heartbeat_seconds)
        if name == function_table.INBOX_FN.name:
            values.update({
                env.MACHINE_ARN_PREFIX: refs.machine_arn_prefix,
                env.ALLOW_AD_HOC: "true" if self.allow_ad_hoc else "false",
                env.MAX_WAIT_SECONDS: str(self.max_wait_seconds),
                env.WATCH_INTERVAL_SECONDS: str(self.watch_interval_seconds),
            })
            if self.allow_ad_hoc:
                values[env.AD_HOC_MACHINE_PREFIX] = self.ad_hoc_prefix
                values[env.AD_HOC_ROLE_ARN] = refs.ad_hoc_role_arn
                values[env.AD_HOC_LOG_GROUP_ARN] = refs.ad_hoc_log_group_arn
                for fn in function_table.MACHINE_INVOKED:
                    values[fn.arn_env] = refs.function_arns[fn.name]
        return values

    # ------------------------------------------------------------------------------------- events
    def event_rules(self, bucket: str, machine_arn_prefix: str) -> tuple[EventRule, ...]:
        """The rules that start functions on events (the schedule aside): `bucket` is the engine bucket's name,
        `machine_arn_prefix` the ARN prefix of this stack's machines (`…:stateMachine:<stack>_`)."""
        from npa_workflow.protocol.events import EXECUTION_STATUS_CHANGE, SFN_SOURCE  # pydantic: not at CLI start

        rules = [
            EventRule("InboxRule", "inbox", "A spec was uploaded under inbox/: validate it and start its run",
                      object_created([bucket], {"prefix": INBOX_PREFIX})),
            EventRule("TriggerRule", "trigger",
                      "An object was created in the engine bucket: complete the trigger watches it satisfies",
                      object_created([bucket])),
        ]
        if self.trigger_event_buckets:
            rules.append(EventRule(
                "DataTriggerRule", "trigger",
                "An object was created in a data bucket: complete the trigger watches it satisfies",
                object_created(list(self.trigger_event_buckets))))
        rules.append(EventRule(
            "ReapRule", "reap",
            "An execution of this stack's machines failed, timed out or was stopped: cancel its jobs",
            {
                "source": [SFN_SOURCE],
                "detail-type": [EXECUTION_STATUS_CHANGE],
                "detail": {
                    "status": list(ENDED_STATUSES),
                    "stateMachineArn": [{"prefix": machine_arn_prefix}],
                    # Not the child executions of a Distributed Map (`execution:<machine>/<label>:<id>`, the only
                    # ARNs with a `/`: machine names and run ids have none): their parent's own event reaps the run.
                    "executionArn": [{"anything-but": {"wildcard": "*/*"}}],
                },
            },
        ))
        return tuple(rules)


def object_created(buckets: list[str], key_filter: dict[str, str] | None = None) -> dict[str, Any]:
    """The EventPattern of S3 "Object Created" in `buckets` (under a key filter such as `{"prefix": "inbox/"}`)."""
    from npa_workflow.protocol.events import OBJECT_CREATED, S3_SOURCE

    detail: dict[str, Any] = {"bucket": {"name": list(buckets)}}
    if key_filter is not None:
        detail["object"] = {"key": [dict(key_filter)]}
    return {"source": [S3_SOURCE], "detail-type": [OBJECT_CREATED], "detail": detail}


def machines_document(machine_names: Mapping[str, str]) -> str:
    """`catalog/machines.json`: how the inbox finds a deployed spec's machine (with its ARN prefix from the
    environment: a map in the environment would pass Lambda's 4 KB limit for all variables at about 34 specs)."""
    return json.dumps({"machines": dict(sorted(machine_names.items()))}, indent=1, ensure_ascii=False) + "\n"
