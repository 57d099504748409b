"""The engine bucket, its access-log bucket and the ledger table."""

from __future__ import annotations

from typing import Any

from aws_cdk.assertions import Match
from infra_support import Synth

from npa_workflow.ledger.dynamodb import TTL_ATTRIBUTE, DynamoLedger


def _engine_bucket(synth: Synth) -> dict[str, Any]:
    return synth.template["Resources"][synth.logical_id(synth.stack.storage.bucket)]["Properties"]


def test_engine_bucket_is_private_encrypted_versioned_and_sends_events(default_synth: Synth) -> None:
    props = _engine_bucket(default_synth)
    assert props["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    assert props["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]["ServerSideEncryptionByDefault"] == {
        "SSEAlgorithm": "AES256"
    }
    assert props["VersioningConfiguration"] == {"Status": "Enabled"}
    assert props["NotificationConfiguration"] == {"EventBridgeConfiguration": {"EventBridgeEnabled": True}}


def test_engine_bucket_logs_access_to_the_log_bucket(default_synth: Synth) -> None:
    props = _engine_bucket(default_synth)
    log_bucket = default_synth.logical_id(default_synth.stack.storage.log_bucket)
    assert props["LoggingConfiguration"] == {
        "DestinationBucketName": {"Ref": log_bucket},
        "LogFilePrefix": "engine-bucket/",
    }
    log_props = default_synth.template["Resources"][log_bucket]["Properties"]
    assert log_props["PublicAccessBlockConfiguration"]["BlockPublicPolicy"] is True
    assert "BucketEncryption" in log_props


def test_both_buckets_deny_plain_http(default_synth: Synth) -> None:
    storage = default_synth.stack.storage
    for bucket in (storage.bucket, storage.log_bucket):
        default_synth.assertions.has_resource_properties(
            "AWS::S3::BucketPolicy",
            {
                "Bucket": {"Ref": default_synth.logical_id(bucket)},
                "PolicyDocument": {
                    "Statement": Match.array_with(
                        [
                            Match.object_like(
                                {
                                    "Effect": "Deny",
                                    "Action": "s3:*",
                                    "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                                }
                            )
                        ]
                    )
                },
            },
        )


def test_lifecycle_expires_rejections_old_runs_and_old_versions(default_synth: Synth, ad_hoc_synth: Synth) -> None:
    rules = {r["Id"]: r for r in _engine_bucket(default_synth)["LifecycleConfiguration"]["Rules"]}
    assert rules["expire-rejected-uploads"]["Prefix"] == "inbox-rejected/"
    assert rules["expire-rejected-uploads"]["ExpirationInDays"] == 14
    assert rules["expire-old-runs"]["Prefix"] == "runs/"
    assert rules["expire-old-runs"]["ExpirationInDays"] == 30  # retentionDays default
    assert rules["expire-noncurrent-versions"]["NoncurrentVersionExpiration"] == {"NoncurrentDays": 30}
    assert all(r["Status"] == "Enabled" for r in rules.values())
    custom = {r["Id"]: r for r in _engine_bucket(ad_hoc_synth)["LifecycleConfiguration"]["Rules"]}
    assert custom["expire-old-runs"]["ExpirationInDays"] == 90  # -c retentionDays=90


def test_runs_expiry_and_the_ledger_ttl_outlive_the_stacks_deadline(default_synth: Synth, ad_hoc_synth: Synth) -> None:
    """Issue 11 item 18: `runs/` expiry and the ledger TTL were 30 days while a wave may wait longer. The synth refuses
    `retentionDays` × 86,400 ≤ `maxWaitSeconds` (test_infra_settings.py); this pins that both expiries are that one
    setting. S3 lifecycle expiration counts days from an object's creation (a run's frozen spec is written when it
    starts); the ledger gives an item its TTL only when it ends (tests/unit/test_ledger.py), counted from then."""
    for synth in (default_synth, ad_hoc_synth):
        settings = synth.stack.settings
        deadline = synth.stack.compile_options.max_wait_seconds
        assert deadline == settings.max_wait_seconds
        [runs_rule] = [r for r in _engine_bucket(synth)["LifecycleConfiguration"]["Rules"]
                       if r.get("Prefix") == "runs/" and "ExpirationInDays" in r]
        assert runs_rule["ExpirationInDays"] == settings.retention_days
        assert runs_rule["ExpirationInDays"] * 86400 > deadline
        for name, fn in synth.stack.engine.functions.items():  # the ledger's TTL: `retention_days` from the item's end
            env = synth.template["Resources"][synth.logical_id(fn)]["Properties"]["Environment"]["Variables"]
            assert int(env["NPA_WORKFLOW_RETENTION_DAYS"]) * 86400 > deadline, name
            assert int(env["NPA_WORKFLOW_RETENTION_DAYS"]) == settings.retention_days, name


class _CapturingClient:
    """Records the engine's own CreateTable request (the local runtime's table) to compare with CDK's."""

    def __init__(self) -> None:
        self.create: dict[str, Any] = {}
        self.ttl: dict[str, Any] = {}

    def create_table(self, **kwargs: Any) -> None:
        self.create = kwargs

    def get_waiter(self, _name: str) -> Any:
        return type("Waiter", (), {"wait": lambda *a, **k: None})()

    def update_time_to_live(self, **kwargs: Any) -> None:
        self.ttl = kwargs


def _by_name(items: list[dict[str, Any]], key: str) -> dict[str, dict[str, Any]]:
    return {item[key]: item for item in items}


def test_ledger_table_mirrors_the_engines_table_exactly(default_synth: Synth) -> None:
    client = _CapturingClient()
    DynamoLedger("ledger", client).create_table()
    engine = client.create
    props = default_synth.template["Resources"][default_synth.logical_id(default_synth.stack.storage.table)][
        "Properties"
    ]
    assert props["BillingMode"] == engine["BillingMode"] == "PAY_PER_REQUEST"
    assert props["KeySchema"] == engine["KeySchema"]
    assert _by_name(props["AttributeDefinitions"], "AttributeName") == _by_name(
        engine["AttributeDefinitions"], "AttributeName"
    )
    cdk_indexes = _by_name(props["GlobalSecondaryIndexes"], "IndexName")
    engine_indexes = _by_name(engine["GlobalSecondaryIndexes"], "IndexName")
    assert set(cdk_indexes) == set(engine_indexes) == {"active", "runs"}
    for name, index in engine_indexes.items():
        assert cdk_indexes[name]["KeySchema"] == index["KeySchema"]
        assert cdk_indexes[name]["Projection"] == index["Projection"]
    assert props["TimeToLiveSpecification"] == {"AttributeName": TTL_ATTRIBUTE, "Enabled": True}
    assert client.ttl["TimeToLiveSpecification"]["AttributeName"] == TTL_ATTRIBUTE


def test_ledger_table_has_point_in_time_recovery_and_is_retained(default_synth: Synth) -> None:
    default_synth.assertions.has_resource(
        "AWS::DynamoDB::Table",
        {
            "Properties": Match.object_like(
                {
                    "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
                    "DeletionProtectionEnabled": True,
                }
            ),
            "DeletionPolicy": "Retain",
        },
    )
