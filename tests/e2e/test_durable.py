"""A local run survives its process: after a failure, Ctrl-C, or kill -9 during a launch, mid-wave or during a
decide, `--resume` continues with the outputs of the waves that succeeded before still in the local S3, relaunches
none of them, and leaves no process of the run behind.

The spec's later states read earlier states' outputs across the interruption: `train` reads `prepare`'s dataset,
`gate` reads `train`'s metrics and its decision is read by the decide Lambda, `publish` reads the metrics again.
"""

from __future__ import annotations

import json
import signal
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from deadlines import deadline as scaled  # noqa: E402
from e2e_support import (  # noqa: E402
    aws_client,
    free_port,
    job_gone,
    run,
    start_cli,
    wait_until,
    workspace,
    write_spec,
)
from held_handler import held_cli  # noqa: E402

from npa_workflow.ledger import DynamoLedger  # noqa: E402
from npa_workflow.protocol.stack import LOCAL_LEDGER_TABLE  # noqa: E402

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

SPEC = """\
config:
  bucket: npa-workflow-examples
  prefix: "durable/{{run.id}}"
  dataset_uri: "s3://{{config.bucket}}/{{config.prefix}}/dataset.json"
  metrics_uri: "s3://{{config.bucket}}/{{config.prefix}}/metrics.json"
  decision_uri: "s3://{{config.bucket}}/{{config.prefix}}/decision.json"
  report_uri: "s3://{{config.bucket}}/{{config.prefix}}/report.json"
  learning_rate: "0.01"
  train_sleep: "0"
  train_fail_below_attempt: ""
  gate_decision: promote_checkpoint
initial: prepare
states:
  prepare:
    toolRef: examples.data.prepare
    outputs: [{uri: "{{config.dataset_uri}}", schema: dataset}]
    next: train
  train:
    toolRef: examples.train.fit
    inputs: [{uri: "{{config.dataset_uri}}", schema: dataset}]
    outputs: [{uri: "{{config.metrics_uri}}", schema: metrics}]
    next: gate
  gate:
    toolRef: examples.eval.gate
    inputs: [{uri: "{{config.metrics_uri}}", schema: metrics}]
    outputs: [{uri: "{{config.decision_uri}}", schema: decision}]
    transitions:
      - when: promote_checkpoint
        goto: publish
    next: publish
  publish:
    toolRef: examples.report.publish
    terminal: true
    params:
      report_title: resumed
      report_source_uri: "{{config.metrics_uri}}"
    outputs: [{uri: "{{config.report_uri}}", schema: report}]
"""


def _wave_running(ledger: DynamoLedger, run_id: str, state: str) -> bool:
    return any(w.state == state and w.job_id and w.status.value == "RUNNING" for w in ledger.attempts(run_id))


# The moments held by a handler at its entry (held_handler): the run waits there until it is killed, however fast
# or slow this machine is. "mid-wave" needs no hold: its train wave runs for 30 s.
HELD = {
    # the launch Lambda of `train` was called: prepare has succeeded and written the dataset
    "during-launch": ("launch", "train"),
    # the decide Lambda of `gate` was called: the gate wrote its decision, decide is about to read it
    "during-decide": ("decide", ""),
}
MOMENTS = [*HELD, "mid-wave"]


def _check_resumed(report: dict[str, Any], home: Path) -> None:
    assert report["status"] == "SUCCEEDED", report["error"]
    by_key: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for wave in report["waves"]:
        by_key[(wave["state"], wave["group"], wave["iteration"])].append(wave)
    assert {key[0] for key in by_key} == {"prepare", "train", "gate", "publish"}
    for key, attempts in by_key.items():
        succeeded = [w for w in attempts if w["status"] == "SUCCEEDED"]
        assert len(succeeded) == 1, (key, attempts)  # a wave that had succeeded was not launched again
        if any(w["replayed"] for w in attempts):
            assert succeeded[0]["replayed"], (key, attempts)
            assert succeeded[0]["attempt"] == max(w["attempt"] for w in attempts), (key, attempts)
    for wave in report["waves"]:
        if wave["job_id"]:
            assert job_gone(home, wave["job_id"]), f"{wave['state']}: job {wave['job_id']} still has a process"
    # prepare succeeded before the interruption. Its ledger record may not have: the watch completes the token
    # before it records the success, so `train`'s launch can be held, and the run killed, in between. The resume's
    # reap then finds the job exited 0 and records it; either way its job ran once and the resume replays it.
    assert any(w["replayed"] for w in by_key[("prepare", None, None)])


def test_a_failed_run_resumed_with_a_fixed_var_reads_the_outputs_of_its_first_execution(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    spec = write_spec(ws, "durable", SPEC)
    home = tmp_path / "home"
    failed = run(spec, home, run_id="dur-fail", variables={"train_fail_below_attempt": "2"})
    assert failed["status"] == "FAILED"
    assert [w["status"] for w in failed["waves"] if w["state"] == "train"] == ["FAILED"]
    resumed = run(spec, home, run_id="dur-fail", resume=True, variables={"train_fail_below_attempt": "1"})
    _check_resumed(resumed, home)
    assert [(w["attempt"], w["status"]) for w in resumed["waves"] if w["state"] == "train"] == [
        (1, "FAILED"), (2, "SUCCEEDED")]


@pytest.mark.parametrize(("sig", "moment"), [(signal.SIGKILL, m) for m in sorted(MOMENTS)] + [
    (signal.SIGINT, "mid-wave")], ids=[f"kill-9-{m}" for m in sorted(MOMENTS)] + ["ctrl-c-mid-wave"])
def test_an_interrupted_run_resumes_with_its_outputs_in_place(tmp_path: Path, sig: signal.Signals,
                                                              moment: str) -> None:
    ws = workspace(tmp_path)
    spec = write_spec(ws, "durable", SPEC)
    home, port, run_id = tmp_path / "home", free_port(), f"dur-{moment}"
    args = ("run", str(spec), "--run-id", run_id, "--local-port", str(port), "--json")
    marker = tmp_path / "held.json"
    if moment in HELD:
        function, state = HELD[moment]
        proc = held_cli(*args, function=function, state=state, marker=marker, home=home, cwd=ws)
    else:  # a train wave of 30 s: the kill comes while it runs
        proc = start_cli(*args, "--var", "train_sleep=30", home=home, cwd=ws)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        if moment in HELD:
            reached = marker.exists
        else:
            ledger = DynamoLedger(LOCAL_LEDGER_TABLE, aws_client("dynamodb", endpoint))
            reached = lambda: _wave_running(ledger, run_id, "train")  # noqa: E731
        wait_until(lambda: proc.poll() is not None or reached(), 60, f"the run never reached {moment}",
                   interval=0.05)
        assert proc.poll() is None, f"the run ended before {moment}: {proc.communicate()}"
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=scaled(30))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert "Traceback" not in err
    assert proc.returncode == (-signal.SIGKILL if sig == signal.SIGKILL else 130), err
    resumed = run(spec, home, run_id=run_id, resume=True, variables={"train_sleep": "0"})
    _check_resumed(resumed, home)
    assert resumed["execution_arn"].endswith(f":{run_id}-r2")
    report = json.loads((home / "runs" / run_id / "report.json").read_text())
    assert report["status"] == "SUCCEEDED"
