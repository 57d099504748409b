"""A 10,000-member group (398 KB spec) used to be accepted, then fail within a minute with a false "timed out after
3600 s", launching nothing (issue 18, item 7). It is refused where it enters — `validate`, `run`, the inbox — in one
line naming the limit, quickly and in bounded memory; a group at the limit is accepted."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time

import pytest

from npa_workflow.errors import SpecError
from npa_workflow.spec.loader import load_yaml_text
from npa_workflow.spec.validate import MAX_GROUP_MEMBERS, validate_document

pytestmark = pytest.mark.timeout(120)


def group_spec(n: int) -> str:
    members = ", ".join(f"m{i}" for i in range(n))
    body = "".join(f"  m{i}: {{run: {{shell: 'true'}}}}\n" for i in range(n))
    return ("apiVersion: npa.workflow/v0.0.1\nkind: Workflow\nmetadata: {name: big}\n"
            f"states:\n  g: {{parallel: [{members}], maxConcurrency: 64, next: done}}\n{body}"
            "  done: {run: {shell: 'true'}, terminal: true}\n")


def test_validate_and_run_refuse_a_group_over_the_limit_in_one_line(tmp_path):
    spec = tmp_path / "big.yaml"
    spec.write_text(group_spec(MAX_GROUP_MEMBERS + 1))
    env = {**os.environ, "NPA_WORKFLOW_HOME": str(tmp_path / "home")}
    for command in ("validate", "run"):
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-c", "from npa_workflow.cli.app import main; main()", command,
                               str(spec)], cwd=tmp_path, env=env, text=True, capture_output=True, timeout=90)
        assert done.returncode == 1, done.stderr
        assert done.stderr.strip().splitlines() == [
            f"{spec}: states.g.parallel: group 'g' has 2,001 members, over the 2,000 a run is known to finish "
            "(fix: split it into groups of at most 2,000 run one after the other, or into several runs)"]
        assert time.monotonic() - started < 60
    assert not (tmp_path / "home" / "runs").exists()  # nothing started


def test_the_inbox_check_refuses_ten_thousand_members_and_accepts_the_limit():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(SpecError) as refused:
        validate_document(load_yaml_text(group_spec(10_000), "big.yaml"), file="big.yaml")  # what the inbox calls
    assert [p.path for p in refused.value.problems] == ["states.g.parallel"]
    validate_document(load_yaml_text(group_spec(MAX_GROUP_MEMBERS), "ok.yaml"), file="ok.yaml")
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mib < 400, f"validation grew the peak RSS by {grown_mib:.0f} MiB"
