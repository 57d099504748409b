"""The deploy publishes specs/ to catalog/ of the engine bucket, where the inbox reads it."""

from __future__ import annotations

import json
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_s3 as s3
from infra_support import REPO_ROOT, Synth

from infra.catalog import CatalogPublication, catalog_keys
from infra.state_machines import compile_catalog, spec_files
from npa_workflow.engine import inbox
from npa_workflow.errors import SpecError
from npa_workflow.spec.load import load_spec

SPECS = REPO_ROOT / "specs"


def _published(synth: Synth) -> dict[str, bytes]:
    """Key under catalog/ → content, from the asset staged in the cloud assembly (what the deploy uploads)."""
    root = synth.outdir / synth.stack.catalog.asset.asset_path
    assert root.is_dir(), root
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_each_spec_is_published_under_its_name_and_the_tool_catalog_beside_them(default_synth: Synth) -> None:
    expected = {f"specs/{load_spec(path).spec.name}.yaml": path.read_bytes() for path in spec_files(SPECS)}
    expected["tools.yaml"] = (SPECS / "tools.yaml").read_bytes()
    assert len(expected) > 1
    published = _published(default_synth)
    machines = json.loads(published.pop("machines.json"))
    assert published == expected  # byte for byte, nothing else (no README, no steps/)
    assert machines == {"machines": default_synth.stack.workflows.names}


def test_the_published_keys_are_the_keys_the_inbox_reads(default_synth: Synth) -> None:
    keys = {"catalog/" + key for key in _published(default_synth)}
    assert inbox.CATALOG_KEY in keys
    deployed = {key for key in keys if key.startswith(inbox.DEPLOYED_SPECS_PREFIX)}
    assert keys == deployed | {inbox.CATALOG_KEY, inbox.DEPLOYED_MACHINES_KEY}
    names = {key.removeprefix(inbox.DEPLOYED_SPECS_PREFIX).removesuffix(".yaml") for key in deployed}
    # Every deployed machine can be named by a run request, and nothing else can.
    assert names == set(default_synth.stack.workflows.machines)


def test_the_deployment_syncs_the_asset_into_catalog_and_prunes_it(default_synth: Synth) -> None:
    stack = default_synth.stack
    [(_, resource)] = default_synth.resources("Custom::CDKBucketDeployment").items()
    props = resource["Properties"]
    assert props["DestinationBucketName"] == {"Ref": default_synth.logical_id(stack.storage.bucket)}
    assert props["DestinationBucketKeyPrefix"] == "catalog/"
    assert props["Prune"] is True  # a spec removed from specs/ is no longer deployed for the inbox either
    assert props["RetainOnDelete"] is True
    assert props["SourceObjectKeys"] == [stack.catalog.asset.s3_object_key]
    assert props["ServiceToken"] == {"Fn::GetAtt": [default_synth.logical_id(stack.catalog.handler), "Arn"]}
    assert "Extract" not in props or props["Extract"] is True
    # BucketDeployment's grants went nowhere else either: the engine bucket's policy only denies plain HTTP.
    [policy] = [
        p["Properties"]["PolicyDocument"]["Statement"]
        for p in default_synth.resources("AWS::S3::BucketPolicy").values()
        if p["Properties"]["Bucket"] == {"Ref": default_synth.logical_id(stack.storage.bucket)}
    ]
    assert [(st["Effect"], st["Action"]) for st in policy] == [("Deny", "s3:*")]


def test_the_deployment_handler_logs_to_its_own_log_group(default_synth: Synth) -> None:
    catalog = default_synth.stack.catalog
    handler = default_synth.template["Resources"][default_synth.logical_id(catalog.handler)]["Properties"]
    assert handler["LoggingConfig"]["LogGroup"] == {"Ref": default_synth.logical_id(catalog.log_group)}
    log_group = default_synth.template["Resources"][default_synth.logical_id(catalog.log_group)]["Properties"]
    assert log_group["RetentionInDays"] == 30  # retentionDays


def test_without_a_tool_catalog_only_the_specs_are_published() -> None:
    specs = compile_catalog(SPECS)
    keys = catalog_keys(specs, None)
    assert set(keys) == {f"specs/{spec.name}.yaml" for spec in specs}
    assert set(catalog_keys(specs, SPECS / "tools.yaml")) == set(keys) | {"tools.yaml"}


def test_an_invalid_tool_catalog_fails_the_synth_with_the_engines_message(tmp_path: Path) -> None:
    tools = tmp_path / "tools.yaml"
    tools.write_text("apiVersion: npa.workflow.tools/v0\ntools: {}\n")
    stack = cdk.Stack(cdk.App(context={"aws:cdk:bundling-stacks": []}), "CatalogOnly")
    bucket = s3.Bucket(stack, "Bucket")
    with pytest.raises(SpecError, match="unsupported catalog apiVersion"):
        CatalogPublication(stack, "Catalog", specs=[], machine_names={}, tools_file=tools, bucket=bucket,
                           retention_days=1)
