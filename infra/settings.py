"""The stack's settings, from CDK context (`cdk.json`, or `-c key=value` on the command line).

| context key | default | meaning |
| --- | --- | --- |
| `skypilotEndpoint` | `""` | SkyPilot API server URL the functions call (required for runs to launch jobs) |
| `skypilotTokenSecretArn` | `""` | existing secret holding the service-account token; empty: the stack makes one |
| `allowAdHocSpecs` | `false` | let the inbox compile and create machines for specs not in `specs/` |
| `retentionDays` | `30` | run artifacts under `runs/`, ledger items, log groups |
| `watchIntervalMinutes` | `1` | the watch schedule: latency of completing a wave vs. invocations (see `events.py`) |
| `dataBuckets` | `[]` | other buckets the specs' steps write decisions/outputs/trigger objects to (read-only access) |
| `alarmTopicArn` | `""` | an SNS topic the alarms notify |
| `stackName` | `NpaWorkflow` | the CloudFormation stack name (and the prefix of every machine name) |
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from constructs import Node

SECRET_ARN = re.compile(r"^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:[A-Za-z0-9/_+=.@-]+$")
COMPLETE_SECRET_SUFFIX = re.compile(r"-[A-Za-z0-9]{6}$")
BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
STACK_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9-]{0,60}$")
MAX_WATCH_INTERVAL_MINUTES = 60


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
        raise SettingsError(f"context {key}={number}: expected {low}..{high} (fix: -c {key}={low})")
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
    retention_days: int = 30
    watch_interval_minutes: int = 1
    data_buckets: list[str] = field(default_factory=list)
    alarm_topic_arn: str = ""

    @property
    def secret_arn_is_complete(self) -> bool:
        return bool(COMPLETE_SECRET_SUFFIX.search(self.skypilot_token_secret_arn))

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
        secret_arn = str(get("skypilotTokenSecretArn", "")).strip()
        if secret_arn and not SECRET_ARN.match(secret_arn):
            raise SettingsError(
                f"context skypilotTokenSecretArn={secret_arn!r}: expected a Secrets Manager secret ARN "
                "(fix: -c skypilotTokenSecretArn=arn:aws:secretsmanager:<region>:<account>:secret:<name>, "
                "or leave it empty and the stack creates the secret)"
            )
        buckets = _list("dataBuckets", get("dataBuckets", []))
        for name in buckets:
            if not BUCKET_NAME.match(name):
                raise SettingsError(f"context dataBuckets: {name!r} is not an S3 bucket name (fix: the name only)")
        topic = str(get("alarmTopicArn", "")).strip()
        if topic and not topic.startswith("arn:"):
            raise SettingsError(f"context alarmTopicArn={topic!r}: expected an SNS topic ARN")
        return cls(
            skypilot_endpoint=endpoint,
            skypilot_token_secret_arn=secret_arn,
            allow_ad_hoc_specs=_bool("allowAdHocSpecs", get("allowAdHocSpecs", False)),
            retention_days=_int("retentionDays", get("retentionDays", 30), 1, 3653),
            watch_interval_minutes=_int(
                "watchIntervalMinutes", get("watchIntervalMinutes", 1), 1, MAX_WATCH_INTERVAL_MINUTES
            ),
            data_buckets=buckets,
            alarm_topic_arn=topic,
        )


def stack_name(node: Node) -> str:
    name = str(node.try_get_context("stackName") or "NpaWorkflow")
    if not STACK_NAME.match(name):
        raise SettingsError(
            f"context stackName={name!r}: expected a letter then letters, digits or '-', at most 61 characters"
        )
    return name
