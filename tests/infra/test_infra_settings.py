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
from infra.settings import EngineSettings, SettingsError


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
        watch_interval_minutes=1, data_buckets=[], alarm_topic_arn="",
    )


def test_command_line_strings_are_parsed() -> None:
    parsed = settings({"allowAdHocSpecs": "true", "retentionDays": "7", "watchIntervalMinutes": "2",
                       "dataBuckets": "a-bucket, b.bucket"})
    assert parsed.allow_ad_hoc_specs is True
    assert parsed.retention_days == 7 and parsed.watch_interval_minutes == 2
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
    ],
)
def test_wrong_values_name_the_key_and_the_fix(context: dict[str, Any], key: str) -> None:
    with pytest.raises(SettingsError, match=key) as err:
        settings(context)
    assert "expected" in str(err.value) or "fix" in str(err.value)


def test_secret_arn_with_or_without_suffix() -> None:
    complete = "arn:aws:secretsmanager:us-east-1:123456789012:secret:skypilot-AbC123"
    assert settings({"skypilotTokenSecretArn": complete}).secret_arn_is_complete
    partial = "arn:aws:secretsmanager:us-east-1:123456789012:secret:skypilot"
    assert not settings({"skypilotTokenSecretArn": partial}).secret_arn_is_complete


def test_plain_python_app_reports_a_bad_context_value_without_a_traceback() -> None:
    env = {**os.environ, "CDK_CONTEXT_JSON": json.dumps({"watchIntervalMinutes": "soon"})}
    result = subprocess.run(
        [sys.executable, str(REPO_ROOT / "infra" / "app.py")],
        capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=120, check=False,
    )
    assert result.returncode == 1
    assert "error: context watchIntervalMinutes='soon'" in result.stderr
    assert "Traceback" not in result.stderr
