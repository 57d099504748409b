"""`local.run_waves` shows what the ledger holds: the same attempts `DynamoLedger.attempts` returns."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from npa_workflow.embedded_aws.durable_aws import durable_aws
from npa_workflow.ledger import DynamoLedger, Watermark, WaveStatus
from npa_workflow.local.run_waves import RunWaves


@pytest.fixture
def ledger_and_view(tmp_path: Path, monkeypatch) -> Iterator[tuple[DynamoLedger, RunWaves]]:
    """A ledger on moto recorded in a durable record, and the view of run r1 on that record."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws(), durable_aws(tmp_path / "aws") as durable:
        assert durable is not None
        ledger = DynamoLedger("ledger", client=boto3.client("dynamodb", region_name="us-east-1"))
        ledger.create_table()
        view = RunWaves(durable, "ledger", "r1")
        yield ledger, view


def test_same_attempts_as_the_ledger(ledger_and_view: tuple[DynamoLedger, RunWaves]) -> None:
    ledger, view = ledger_and_view
    assert view.waves() == [] and not view.changed()
    for run_id, key in [("r1", "b"), ("r1", "a|l1=2"), ("r2", "a"), ("r1", "a")]:
        ledger.begin_attempt(run_id, key, state=key.split("|")[0], attempt=1, job_name=f"{run_id}-{key}")
    assert view.changed()
    ledger.mark_status("r1", "b", 1, WaveStatus.RUNNING)
    ledger.begin_attempt("r1", "b", state="b", attempt=2, job_name="r1-b-2")
    assert view.waves() == ledger.attempts("r1")
    assert [(w.wave_key, w.attempt) for w in view.waves()] == [("a", 1), ("a|l1=2", 1), ("b", 1), ("b", 2)]
    assert not view.changed()
    ledger.finish_attempt("r1", "b", 2, WaveStatus.SUCCEEDED)
    assert view.changed()
    assert view.waves() == ledger.attempts("r1")
    assert view.waves()[-1].status == WaveStatus.SUCCEEDED


def test_same_watermarks_as_the_ledger_and_waves_stay_waves(ledger_and_view: tuple[DynamoLedger, RunWaves]) -> None:
    ledger, view = ledger_and_view
    assert view.watermarks() == []
    ledger.begin_attempt("r1", "a", state="a", attempt=1, job_name="r1-a")
    for run_id, state in [("r1", "ingest"), ("r2", "ingest")]:
        ledger.put_watermark(Watermark(run_id=run_id, state=state, uri="s3://b/landing/", min_objects=2,
                                       task_token="tok"))
    marks = view.watermarks()
    assert marks == ledger.watermarks("r1") and [(m.state, m.waiting) for m in marks] == [("ingest", True)]
    assert [w.wave_key for w in view.waves()] == ["a"]  # a watermark is not a wave
    ledger.put_watermark(marks[0].model_copy(update={"objects": 2, "satisfied": True}))
    assert view.changed()
    assert [(m.objects, m.waiting) for m in view.watermarks()] == [(2, False)]
