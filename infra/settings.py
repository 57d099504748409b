"""The stack's settings, from CDK context (`cdk.json`, or `-c key=value` on the command line).

| context key | default | meaning |
| --- | --- | --- |
| `skypilotEndpoint` | `""` | SkyPilot API server URL the functions call (required for runs to launch jobs) |
| `skypilotTokenSecretArn` | `""` | existing secret holding the service-account token; empty: the stack makes one |
| `allowAdHocSpecs` | `false` | let the inbox compile and create machines for specs not in `specs/` |
| `retentionDays` | `30` | run artifacts under `runs/`, ledger items, log groups; must exceed `maxWaitSeconds` |
| `maxWaitSeconds` | `604800` (7 days) | the per-wave deadline compiled into every machine (a Task's `TimeoutSeconds`) |
| `watchIntervalMinutes` | `1` | the watch schedule: latency of completing a wave vs. invocations (see `events.py`) |
| `dataBuckets` | `[]` | other buckets the specs' steps write decisions/outputs/trigger objects to (read-only access) |
| `alarmTopicArn` | `""` | an SNS topic the alarms notify |
| `stackName` | `NpaWorkflow` | the CloudFormation stack name (and the prefix of every machine name) |
| `stepSecretsArn` | `""` | a Secrets Manager secret (JSON object NAME → value) that launch fills `secretEnv` from |
| `skypilotTokenKmsKeyArn` | `""` | the customer-managed KMS key the SkyPilot token secret is encrypted with |
| `stepSecretsKmsKeyArn` | `""` | the customer-managed KMS key the step secrets secret is encrypted with |
| `dataBucketKmsKeyArns` | `[]` | KMS keys of SSE-KMS data buckets (objects the functions read there) |
| `triggerEventBuckets` | `[]` | data buckets whose "Object Created" events go to the trigger function (see events.py) |
| `specsDir` | `specs` | the folder of workflow specs the stack deploys (a team's repository; relative to the cwd) |
| `catalogs` | `[]` | the tool catalog file(s) the specs use, merged into one (empty: `tools.yaml` in `specsDir`) |

AWS facts: a Standard execution runs for at most one year, so no wave can wait longer (`maxWaitSeconds` ≤
31,536,000); a run's ledger items and `runs/` artifacts must outlive its longest wave, or a wave that ends after
its run's items expired finds no record (`retentionDays` × 86,400 > `maxWaitSeconds`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from constructs import Node

from npa_workflow.protocol.deployed_names import DEFAULT_STACK_NAME
from npa_workflow.protocol.deployment import DEFAULT_MAX_WAIT_SECONDS, DEFAULT_RETENTION_DAYS, Deployment

SECRET_ARN = re.compile(r"^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:[A-Za-z0-9/_+=.@-]+$")
COMPLETE_SECRET_SUFFIX = re.compile(r"-[A-Za-z0-9]{6}$")
BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
STACK_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9-]{0,60}$")
KMS_KEY_ARN = re.compile(r"^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key/[A-Za-z0-9-]+$")
MAX_WATCH_INTERVAL_MINUTES = 60
# A Standard workflow execution lasts at most one year (Step Functions quotas): no wave can wait longer.
MAX_WAIT_SECONDS_LIMIT = 365 * 24 * 3600


class SettingsError(ValueError):
    """A context value is wrong; the message names the key, the value and the fix."""


def _bool(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no", ""):
        return False
    raise SettingsError(f"context {key}={value!r}: expected true or false (fix: -c {key}=true)")


def _int(key: str, value: Any, low: int, high: int) -> int:
    try:
        number = int(str(value).strip())
    except ValueError:
        raise SettingsError(f"context {key}={value!r}: expected a whole number (fix: -c {key}={low})") from None
    if not low <= number <= high:
        nearest = high if number > high else low
        raise SettingsError(f"context {key}={number}: expected {low}..{high} (fix: -c {key}={nearest})")
    return number


def _list(key: str, value: Any) -> list[str]:
    if value in (None, ""):
        return []
    if isinstance(value, str):
        text = value.strip()
        value = json.loads(text) if text.startswith("[") else [v for v in re.split(r"[,\s]+", text) if v]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SettingsError(f"context {key}={value!r}: expected a list of names (fix: -c {key}=bucket-a,bucket-b)")
    return value


@dataclass(frozen=True)
class EngineSettings:
    skypilot_endpoint: str = ""
    skypilot_token_secret_arn: str = ""
    allow_ad_hoc_specs: bool = False
    retention_days: int = DEFAULT_RETENTION_DAYS
    watch_interval_minutes: int = 1
    data_buckets: list[str] = field(default_factory=list)
    alarm_topic_arn: str = ""
    max_wait_seconds: int = DEFAULT_MAX_WAIT_SECONDS
    step_secrets_arn: str = ""
    skypilot_token_kms_key_arn: str = ""
    step_secrets_kms_key_arn: str = ""
    data_bucket_kms_key_arns: list[str] = field(default_factory=list)
    trigger_event_buckets: list[str] = field(default_factory=list)
    specs_dir: str = ""  # "": the repository's specs/
    catalogs: list[str] = field(default_factory=list)  # []: tools.yaml in the specs folder

    def deployment(self, stack_name: str = DEFAULT_STACK_NAME) -> Deployment:
        """What the stack configures on each resource for these settings (the model the local twin deploys too)."""
        return Deployment(
            stack_name=stack_name,
            retention_days=self.retention_days,
            max_wait_seconds=self.max_wait_seconds,
            watch_interval_seconds=60 * self.watch_interval_minutes,
            allow_ad_hoc=self.allow_ad_hoc_specs,
            skypilot_endpoint=self.skypilot_endpoint,
            trigger_event_buckets=tuple(self.trigger_event_buckets),
        )

    @classmethod
    def from_context(cls, node: Node) -> EngineSettings:
        def get(key: str, default: Any) -> Any:
            value = node.try_get_context(key)
            return default if value is None else value

        endpoint = str(get("skypilotEndpoint", "")).strip()
        if endpoint and not re.match(r"^https?://[^\s/]+", endpoint):
            raise SettingsError(
                f"context skypilotEndpoint={endpoint!r}: expected an http(s) URL "
                "(fix: -c skypilotEndpoint=https://skypilot.example.com)"
            )
        secret_arn = _secret_arn("skypilotTokenSecretArn", get("skypilotTokenSecretArn", ""),
                                 "or leave it empty and the stack creates the secret")
        step_secrets_arn = _secret_arn("stepSecretsArn", get("stepSecretsArn", ""),
                                       "or leave it empty: then no step may use secretEnv")
        buckets = _list("dataBuckets", get("dataBuckets", []))
        for name in buckets:
            if not BUCKET_NAME.match(name):
                raise SettingsError(f"context dataBuckets: {name!r} is not an S3 bucket name (fix: the name only)")
        topic = str(get("alarmTopicArn", "")).strip()
        if topic and not topic.startswith("arn:"):
            raise SettingsError(f"context alarmTopicArn={topic!r}: expected an SNS topic ARN "
                                "(fix: -c alarmTopicArn=arn:aws:sns:<region>:<account>:<topic>, or leave it empty)")
        trigger_buckets = _list("triggerEventBuckets", get("triggerEventBuckets", []))
        for name in trigger_buckets:
            if name not in buckets:
                raise SettingsError(
                    f"context triggerEventBuckets: {name!r} is not in dataBuckets (the trigger function must be "
                    f"allowed to list it; fix: -c dataBuckets={','.join([*buckets, name])})"
                )
        retention_days = _int("retentionDays", get("retentionDays", DEFAULT_RETENTION_DAYS), 1, 3653)
        max_wait = _int("maxWaitSeconds", get("maxWaitSeconds", DEFAULT_MAX_WAIT_SECONDS), 1, MAX_WAIT_SECONDS_LIMIT)
        if retention_days * 86400 <= max_wait:
            raise SettingsError(
                f"context retentionDays={retention_days} is shorter than maxWaitSeconds={max_wait} "
                f"({max_wait / 86400:g} days): a wave could outlive its run's ledger items and runs/ artifacts "
                f"(fix: -c retentionDays={max_wait // 86400 + 1} or more, or a shorter maxWaitSeconds)"
            )
        return cls(
            skypilot_endpoint=endpoint,
            skypilot_token_secret_arn=secret_arn,
            allow_ad_hoc_specs=_bool("allowAdHocSpecs", get("allowAdHocSpecs", False)),
            retention_days=retention_days,
            max_wait_seconds=max_wait,
            step_secrets_arn=step_secrets_arn,
            skypilot_token_kms_key_arn=_kms_key("skypilotTokenKmsKeyArn", get("skypilotTokenKmsKeyArn", "")),
            step_secrets_kms_key_arn=_kms_key("stepSecretsKmsKeyArn", get("stepSecretsKmsKeyArn", "")),
            data_bucket_kms_key_arns=[
                _kms_key("dataBucketKmsKeyArns", arn) for arn in _list("dataBucketKmsKeyArns",
                                                                       get("dataBucketKmsKeyArns", []))
            ],
            trigger_event_buckets=trigger_buckets,
            watch_interval_minutes=_int(
                "watchIntervalMinutes", get("watchIntervalMinutes", 1), 1, MAX_WATCH_INTERVAL_MINUTES
            ),
            data_buckets=buckets,
            alarm_topic_arn=topic,
            **_specs_source(get("specsDir", ""), get("catalogs", [])),
        )


def _specs_source(specs_dir: Any, catalogs: Any) -> dict[str, Any]:
    """`specsDir` and `catalogs`: teams keep their specs and tool catalogs in their own repositories. Each must
    exist, so a typo fails the synth naming the key, not a deploy with no machines."""
    from pathlib import Path

    folder = str(specs_dir or "").strip()
    if folder and not Path(folder).is_dir():
        raise SettingsError(f"context specsDir={folder!r}: no such folder (fix: -c specsDir=<the folder holding "
                            "your workflow specs>, absolute or relative to this directory)")
    files = _list("catalogs", catalogs)
    for path in files:
        if not Path(path).is_file():
            raise SettingsError(f"context catalogs: {path!r} is not a file (fix: -c catalogs=<team>/tools.yaml,"
                                "<shared>/tools.yaml: each a tool catalog file)")
    return {"specs_dir": folder, "catalogs": files}


def _secret_arn(key: str, value: Any, otherwise: str) -> str:
    arn = str(value or "").strip()
    if arn and not SECRET_ARN.match(arn):
        raise SettingsError(
            f"context {key}={arn!r}: expected a Secrets Manager secret ARN "
            f"(fix: -c {key}=arn:aws:secretsmanager:<region>:<account>:secret:<name>, {otherwise})"
        )
    return arn


def _kms_key(key: str, value: Any) -> str:
    arn = str(value or "").strip()
    if arn and not KMS_KEY_ARN.match(arn):
        raise SettingsError(
            f"context {key}={arn!r}: expected a KMS key ARN, not an alias or key id "
            f"(fix: -c {key}=arn:aws:kms:<region>:<account>:key/<key id>)"
        )
    return arn


def is_complete_secret_arn(arn: str) -> bool:
    """A secret ARN with the 6 characters Secrets Manager appends to the name (`...:secret:name-AbCdEf`)."""
    return bool(COMPLETE_SECRET_SUFFIX.search(arn))


def stack_name(node: Node) -> str:
    name = str(node.try_get_context("stackName") or DEFAULT_STACK_NAME)
    if not STACK_NAME.match(name):
        raise SettingsError(
            f"context stackName={name!r}: expected a letter then letters, digits or '-', at most 61 characters"
        )
    return name
