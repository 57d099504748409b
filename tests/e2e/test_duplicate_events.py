"""At-least-once delivery (S3 and EventBridge): with NPA_WORKFLOW_DUPLICATE_EVENTS=1 the twin delivers every
event twice; a run still has one attempt per wave and one end. (Its own module: a local run resets moto's
process-wide backends when it ends.)"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(90)]


def test_a_run_with_every_event_delivered_twice_doubles_nothing(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """At-least-once delivery: the watch and reap events twice each, and still one attempt per wave, one run end."""
    from e2e_support import run, workspace, write_spec

    from npa_workflow.embedded_aws import moto_lambda

    monkeypatch.setenv("NPA_WORKFLOW_DUPLICATE_EVENTS", "1")
    ws = workspace(tmp_path)
    spec = write_spec(ws, "twice", """\
        config: {bucket: npa-workflow-examples, prefix: "twice/{{run.id}}"}
        initial: a
        states:
          a: {toolRef: examples.util.step, params: {step_out_uri: "s3://{{config.bucket}}/{{config.prefix}}/a.json"},
              next: b}
          b: {toolRef: examples.util.step, terminal: true,
              params: {step_out_uri: "s3://{{config.bucket}}/{{config.prefix}}/b.json"}}
        """)
    reaps = moto_lambda.invocations["functions.reap.handler.handler"]
    report = run(spec, tmp_path / "home", run_id="twice")
    assert report["status"] == "SUCCEEDED", report["error"]
    assert [(w["state"], w["attempt"], w["status"]) for w in report["waves"]] == [
        ("a", 1, "SUCCEEDED"), ("b", 1, "SUCCEEDED")]
    assert moto_lambda.invocations["functions.reap.handler.handler"] - reaps == 2  # the end, delivered twice
