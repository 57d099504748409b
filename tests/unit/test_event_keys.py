"""S3 keys in EventBridge events: AWS URL-encodes `detail.object.key` as a form value (space → `+`, `+` →
`%2B`, `%` → `%25`, unicode → UTF-8 %-escapes; Powertools decodes it with `unquote_plus`); moto sends the key
raw. Where keys are read (the inbox, the trigger's S3 path) both forms reach the real object."""

from __future__ import annotations

from urllib.parse import quote_plus

import boto3
import pytest
import test_engine_functions as base

from npa_workflow.adapters.s3_store import S3Store
from npa_workflow.engine.runs import RunOptions
from npa_workflow.engine.trigger import trigger
from npa_workflow.engine.watermarks import on_object_created
from npa_workflow.ledger import RunRecord
from npa_workflow.protocol.events import event_key_forms

engine = base.engine
KEYS = ["inbox/my spec.yaml", "inbox/a+b.yaml", "inbox/100%.yaml", "inbox/résumé 2.yaml", "inbox/a%20b.yaml"]


def aws_encoded(key: str) -> str:
    """How S3 writes the key into an event notification (form encoding, `/` kept)."""
    return quote_plus(key, safe="/")


@pytest.mark.parametrize("key", KEYS)
def test_both_encodings_of_an_event_key_reach_the_real_object(engine, key: str):
    store = S3Store(boto3.client("s3"))
    store.put(f"s3://data/{key}", b"spec")
    assert store.event_key("data", aws_encoded(key)) == key  # as AWS sends it
    assert store.event_key("data", key) == key  # as moto sends it


def test_the_decoded_form_comes_first():
    assert event_key_forms("inbox/my+spec.yaml") == ["inbox/my spec.yaml", "inbox/my+spec.yaml"]
    assert event_key_forms("inbox/plain.yaml") == ["inbox/plain.yaml"]
    assert event_key_forms("inbox/r%C3%A9sum%C3%A9.yaml")[0] == "inbox/résumé.yaml"


@pytest.mark.parametrize("key", ["landing/day one/a.csv", "landing/a+b/ü.csv"])
def test_an_encoded_event_completes_the_trigger_watching_the_real_prefix(engine, key: str):
    prefix = key.rsplit("/", 1)[0] + "/"
    spec = base.SPEC.replace("s3://data/landing/", f"s3://data/{prefix}").replace("minObjects: 2", "minObjects: 1")
    engine.runs.freeze("rk", spec, "", {}, RunOptions())
    engine.ledger.put_run(RunRecord(run_id="rk", workflow="t"))
    trigger(engine, {"run_id": "rk", "state": "wait", "loops": {}, "token": "tk"})
    assert engine.callbacks.outcomes("tk") == []
    engine.store.put(f"s3://data/{key}", b"x")
    assert on_object_created(engine, "data", aws_encoded(key)) == 1
    assert engine.callbacks.outcomes("tk")[0][0] == "succeed"
