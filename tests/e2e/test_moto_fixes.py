"""The twin behaves as AWS does where moto does not (`embedded_aws.moto_fixes`), each test naming the AWS behaviour."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from deadlines import deadline as scaled  # noqa: E402
from e2e_support import run, workspace  # noqa: E402

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

MEMBERS = [f"m{i:02d}" for i in range(41)]  # above 40: compiled to a Distributed Map


def _wide_spec(ws: Path, failing: str) -> Path:
    lines = ["apiVersion: npa.workflow/v0.0.1", "kind: Workflow", "metadata: {name: wide}",
             "config: {bucket: npa-workflow-examples, prefix: 'wide/{{run.id}}'}", "initial: fan", "states:",
             "  fan:", f"    parallel: [{', '.join(MEMBERS)}]", "    maxConcurrency: 8", "    next: after",
             "  after:", "    toolRef: examples.util.step", "    terminal: true",
             "    params: {step_out_uri: 's3://{{config.bucket}}/{{config.prefix}}/after.json'}"]
    for member in MEMBERS:
        fail = ", step_fail: boom" if member == failing else ""
        lines += [f"  {member}:", "    toolRef: examples.util.step",
                  f"    params: {{step_out_uri: 's3://{{{{config.bucket}}}}/{{{{config.prefix}}}}/{member}.json'{fail}}}"]
    path = ws / "wide.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_failed_member_of_a_distributed_map_fails_the_group_and_the_run_with_its_root_cause(tmp_path: Path) -> None:
    """AWS: a Distributed Map whose failed children exceed ToleratedFailureCount/Percentage (default 0) fails with
    States.ExceedToleratedFailureThreshold and starts no further children; moto lets the Map succeed."""
    ws = workspace(tmp_path)
    report = run(_wide_spec(ws, failing="m03"), tmp_path / "home", run_id="wide-fail")
    assert report["status"] == "FAILED"
    assert report["error"]["state"] == "m03", report["error"]
    assert "failing as requested: boom" in report["error"]["message"]
    states = {w["state"]: w["status"] for w in report["waves"]}
    assert states["m03"] == "FAILED"
    assert "after" not in states  # the group failed: its successor never ran
    # the Map stopped handing out members after the failure: with 8 at a time, most of the 41 never started
    assert len([s for s in states if s.startswith("m")]) < len(MEMBERS)
    assert all(status in ("SUCCEEDED", "CANCELLED", "FAILED") for status in states.values())


def test_a_group_member_past_its_deadline_fails_the_group_as_a_timeout(tmp_path: Path) -> None:
    """AWS: an inline Map whose iteration failed with States.Timeout fails with States.Timeout, and its Catch sees
    a timeout; moto 5.2.5 failed it with States.Runtime, "Custom Error Names MUST NOT begin with the prefix
    'States.'", so the run's error was moto's complaint and --no-cancel-on-timeout did not apply to groups."""
    ws = workspace(tmp_path)
    spec = ws / "fanout.yaml"
    spec.write_text((Path(__file__).resolve().parents[2] / "specs" / "fanout.yaml").read_text())
    # Every wave's deadline: room for `prepare` (a short job) on this machine now, a tenth of what a shard sleeps.
    # A fixed 3 s timed `prepare` out on a loaded machine (and a 2 s heartbeat missed its beat).
    max_wait = max(3, round(scaled(3)))
    report = run(spec, tmp_path / "home", run_id="slow-group", max_wait_seconds=max_wait,
                 variables={"shard_sleep": str(10 * max_wait)})
    assert report["status"] == "FAILED"
    message = report["error"]["message"]
    assert "Custom Error Names" not in message
    assert report["error"]["state"] == "shards"
    assert "timed out" in message and f"deadline of {max_wait} s" in message and "States.Timeout" in message
    assert {w["status"] for w in report["waves"] if w["state"].startswith("shard-")} == {"CANCELLED"}
