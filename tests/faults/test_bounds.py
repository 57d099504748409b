"""Big values at every edge: CLI numbers, run-request options, spec integers and decision artifacts are bounded
with one clear message; nothing reaches DynamoDB, Step Functions or time.sleep unbounded."""

from __future__ import annotations

import json
import sys

import pytest
from typer.testing import CliRunner

from npa_workflow import decisions
from npa_workflow.cli.app import app
from npa_workflow.engine.decide import decide
from npa_workflow.engine.errors import DecisionMalformed
from npa_workflow.engine.inbox import RunRequest
from npa_workflow.engine.runs import RunOptions
from npa_workflow.errors import SpecError
from npa_workflow.ledger import RunRecord
from npa_workflow.spec.load import load_spec_text

HUGE = "100000000000000000000"  # 1e20 written out (typer parses it as an int)
SPEC = f"""
apiVersion: npa.workflow/v0.0.1
kind: Workflow
metadata: {{name: t}}
config: {{bucket: data}}
states:
  work: {{run: {{argv: ["{sys.executable}", "-c", "pass"]}}}}
  refine: {{sequence: [gate], loop: {{max: 2, until: promote_checkpoint}}, next: done}}
  gate: {{run: {{shell: "true"}}, writesDecision: true, outputs: [{{uri: "s3://data/gate.json", schema: decision}}]}}
  done: {{run: {{shell: "true"}}, terminal: true}}
"""


@pytest.mark.parametrize("option", ["--max-wait-seconds", "--retries", "--max-infrastructure-recoveries",
                                    "--max-concurrency", "--retry-interval-seconds"])
def test_a_huge_cli_number_is_refused_at_the_edge(tmp_path, option: str) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(SPEC)
    result = CliRunner().invoke(app, ["run", str(spec), option, HUGE])
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.replace("│", " ").split())  # rich wraps the message in a box
    assert option in text and "Traceback" not in text
    assert "less than or equal" in text or "range" in text


def test_a_huge_run_request_option_is_refused() -> None:
    for options in ({"maxWaitSeconds": int(HUGE)}, {"retries": int(HUGE)}, {"maxConcurrency": int(HUGE)}):
        with pytest.raises(ValueError, match="less than or equal"):
            RunRequest.model_validate({"apiVersion": "npa.workflow.run/v1", "spec": "t", "options": options})


def test_a_huge_spec_integer_is_refused_with_its_path() -> None:
    with pytest.raises(SpecError) as caught:
        load_spec_text(SPEC.replace("max: 2", f"max: {HUGE}"), file="s.yaml")
    assert "larger than" in str(caught.value) and "s.yaml" in str(caught.value)


@pytest.fixture
def engine(moto_engine):
    moto_engine.runs.freeze("r1", SPEC, "", {}, RunOptions())
    moto_engine.ledger.put_run(RunRecord(run_id="r1", workflow="t"))
    return moto_engine


@pytest.mark.parametrize("body", [
    json.dumps({"decision": "x" * (10 * 1024 * 1024)}).encode(),  # a 10 MB decision value
    json.dumps({"decision": "promote", "notes": "y" * (2 * 1024 * 1024)}).encode(),  # a 2 MB artifact
])
def test_a_huge_decision_fails_clearly_and_the_ledger_keeps_it_by_reference(engine, body: bytes) -> None:
    engine.store.put("s3://data/gate.json", body)
    with pytest.raises(DecisionMalformed) as caught:
        decide(engine, {"run_id": "r1", "state": "gate", "loops": {"refine": 1}, "purpose": "loop", "current": ""})
    assert "s3://data/gate.json" in str(caught.value) and len(str(caught.value)) < 500
    [record] = engine.ledger.decisions("r1")
    assert record.raw and record.raw.startswith("(stored by reference: s3://data/gate.json")
    assert "sha256:" in record.raw and len(record.raw) < 300


def test_a_large_but_valid_artifact_is_recorded_by_reference(engine) -> None:
    body = json.dumps({"decision": "promote", "notes": "z" * 50_000}).encode()
    engine.store.put("s3://data/gate.json", body)
    out = decide(engine, {"run_id": "r1", "state": "gate", "loops": {"refine": 1}, "purpose": "loop", "current": ""})
    assert out["decision"] == decisions.PROMOTE
    [record] = engine.ledger.decisions("r1")
    assert record.raw == decisions.body_for_ledger(body, "s3://data/gate.json") and str(len(body)) in record.raw
