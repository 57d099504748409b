"""Context values: defaults, parsing of `-c key=value` strings, and clear errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import aws_cdk as cdk
import pytest
from infra_support import REPO_ROOT

from infra.app import cdk_json_context
from infra.settings import EngineSettings, SettingsError, is_complete_secret_arn


def settings(context: dict[str, Any]) -> EngineSettings:
    return EngineSettings.from_context(cdk.App(context=context).node)


def test_cdk_json_has_the_defaults_and_quiet_cli_settings() -> None:
    doc = json.loads((REPO_ROOT / "cdk.json").read_text())
    assert doc["notices"] is False
    assert doc["app"].endswith("infra/app.py")
    context = cdk_json_context()
    assert context["cli-telemetry"] is False
    assert settings(context) == EngineSettings()
    assert settings({}) == EngineSettings(
        skypilot_endpoint="", skypilot_token_secret_arn="", allow_ad_hoc_specs=False, retention_days=30,
        watch_interval_minutes=1, data_buckets=[], alarm_topic_arn="", max_wait_seconds=7 * 24 * 3600,
    )


def test_command_line_strings_are_parsed() -> None:
    parsed = settings({"allowAdHocSpecs": "true", "retentionDays": "7", "watchIntervalMinutes": "2",
                       "maxWaitSeconds": "86400",
                       "dataBuckets": "a-bucket, b.bucket"})
    assert parsed.allow_ad_hoc_specs is True
    assert parsed.retention_days == 7 and parsed.watch_interval_minutes == 2 and parsed.max_wait_seconds == 86400
    assert parsed.data_buckets == ["a-bucket", "b.bucket"]
    assert settings({"dataBuckets": '["x-bucket"]'}).data_buckets == ["x-bucket"]
    assert settings({"allowAdHocSpecs": "false"}).allow_ad_hoc_specs is False


@pytest.mark.parametrize(
    ("context", "key"),
    [
        ({"allowAdHocSpecs": "maybe"}, "allowAdHocSpecs"),
        ({"watchIntervalMinutes": 0}, "watchIntervalMinutes"),
        ({"watchIntervalMinutes": "soon"}, "watchIntervalMinutes"),
        ({"retentionDays": -1}, "retentionDays"),
        ({"skypilotEndpoint": "skypilot.example.com"}, "skypilotEndpoint"),
        ({"skypilotTokenSecretArn": "my-secret"}, "skypilotTokenSecretArn"),
        ({"dataBuckets": "Not_A_Bucket"}, "dataBuckets"),
        ({"maxWaitSeconds": 0}, "maxWaitSeconds"),
        ({"maxWaitSeconds": 366 * 86400}, "maxWaitSeconds"),  # a Standard execution lasts at most a year
        ({"retentionDays": 7}, "retentionDays"),  # shorter than the default 7-day deadline
        ({"retentionDays": 30, "maxWaitSeconds": 30 * 86400}, "retentionDays"),
        ({"stepSecretsArn": "step-secrets"}, "stepSecretsArn"),
        ({"skypilotTokenKmsKeyArn": "alias/mine"}, "skypilotTokenKmsKeyArn"),
        ({"dataBucketKmsKeyArns": "arn:aws:kms:eu-west-1:123456789012:alias/x"}, "dataBucketKmsKeyArns"),
        ({"dataBuckets": "team-data", "triggerEventBuckets": "other-data"}, "triggerEventBuckets"),
        ({"alarmTopicArn": "alerts"}, "alarmTopicArn"),
    ],
)
def test_wrong_values_name_the_key_and_the_fix(context: dict[str, Any], key: str) -> None:
    with pytest.raises(SettingsError, match=key) as err:
        settings(context)
    assert "fix: " in str(err.value)  # every wrong value is told what to write instead


def test_a_number_above_its_range_is_fixed_with_the_maximum() -> None:
    with pytest.raises(SettingsError, match=r"expected 1\.\.31536000 \(fix: -c maxWaitSeconds=31536000\)"):
        settings({"maxWaitSeconds": 366 * 86400})


def test_secret_arn_with_or_without_suffix() -> None:
    complete = "arn:aws:secretsmanager:us-east-1:123456789012:secret:skypilot-AbC123"
    assert is_complete_secret_arn(settings({"skypilotTokenSecretArn": complete}).skypilot_token_secret_arn)
    partial = "arn:aws:secretsmanager:us-east-1:123456789012:secret:skypilot"
    assert not is_complete_secret_arn(settings({"skypilotTokenSecretArn": partial}).skypilot_token_secret_arn)


def test_retention_must_outlive_the_longest_wave() -> None:
    """A wave may wait `maxWaitSeconds`; its run's ledger items and runs/ artifacts must still be there after."""
    assert settings({"retentionDays": 8}).retention_days == 8  # 8 days > the 7-day default deadline
    with pytest.raises(SettingsError, match=r"retentionDays=8 is shorter than maxWaitSeconds=864000") as err:
        settings({"retentionDays": 8, "maxWaitSeconds": 10 * 86400})
    assert "-c retentionDays=11" in str(err.value)


def test_plain_python_app_reports_a_bad_context_value_without_a_traceback() -> None:
    env = {**os.environ, "CDK_CONTEXT_JSON": json.dumps({"watchIntervalMinutes": "soon"})}
    result = subprocess.run(
        [sys.executable, str(REPO_ROOT / "infra" / "app.py")],
        capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=120, check=False,
    )
    assert result.returncode == 1
    assert "error: context watchIntervalMinutes='soon'" in result.stderr
    assert "Traceback" not in result.stderr
