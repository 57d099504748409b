"""Where aws-local-stepfunctions itself departs from AWS, shown on the smallest machine (`probe.mjs`, no stack).

Each test pins the interpreter's behaviour beside what AWS documents, so the harness's workaround and the
comparison cases stay honest if a later version changes it (docs/interpreters.md, "Differences found").
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
FN = "arn:aws:lambda:us-east-1:123456789012:function:probe"

pytestmark = pytest.mark.skipif(shutil.which("node") is None,
                                reason="node is not installed: aws-local-stepfunctions needs it")


def probe(definition: dict[str, Any], tasks: list[str], payload: Any,
          fail_on: list[Any] | None = None) -> dict[str, Any]:
    if not (REPO / "node_modules" / "aws-local-stepfunctions").is_dir():
        pytest.fail("aws-local-stepfunctions is not installed: run `npm ci` (package-lock.json pins it)")
    doc = {"definition": definition, "tasks": tasks, "input": payload, "fail_on": fail_on or []}
    done = subprocess.run(["node", str(HERE / "probe.mjs"), json.dumps(doc)], cwd=REPO, capture_output=True,
                          text=True, timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_timeout_seconds_path_is_read_from_the_effective_input_not_the_state_input() -> None:
    """AWS reads TimeoutSecondsPath from the state input ($.t = 5 here): the Task runs and succeeds. The
    interpreter reads it from what Parameters produced and fails the state with an uncatchable States.Runtime
    after its Task has already run. harness.mjs mirrors each TimeoutSecondsPath into Parameters for it."""
    task = {"Type": "Task", "Resource": FN, "Parameters": {"x": 1}, "TimeoutSecondsPath": "$.t", "End": True}
    seen = probe({"StartAt": "T", "States": {"T": task}}, ["T"], {"t": 5})
    assert (seen["status"], seen["error"]) == ("FAILED", "States.Runtime")
    assert "$.t" in seen["cause"] and seen["calls"] == [{"x": 1}]

    mirrored = {**task, "Parameters": {"x": 1, "t.$": "$.t"}}
    assert probe({"StartAt": "T", "States": {"T": mirrored}}, ["T"], {"t": 5})["status"] == "SUCCEEDED"


def test_a_map_keeps_starting_iterations_after_one_failed() -> None:
    """AWS: an inline Map fails as soon as an iteration fails and starts no more (MaxConcurrency 1: only the
    first item runs). The interpreter queues every item up front and still starts items 2 and 3."""
    member = {"Type": "Task", "Resource": FN, "End": True}
    group = {"Type": "Map", "MaxConcurrency": 1, "End": True,
             "ItemProcessor": {"ProcessorConfig": {"Mode": "INLINE"}, "StartAt": "M", "States": {"M": member}}}
    seen = probe({"StartAt": "G", "States": {"G": group}}, ["M"], [1, 2, 3], fail_on=[1])
    assert (seen["status"], seen["error"]) == ("FAILED", "Probe.Failed")
    assert seen["calls"] == [1, 2, 3]  # AWS: [1]
