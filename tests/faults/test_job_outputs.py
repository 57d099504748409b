"""What leaves a job: its log tail (bounded cost, whatever the log), its environment (an allow-list, not
everything the runtime has) and its secrets (redacted, with their encodings, from every failure message)."""

from __future__ import annotations

import base64
import json
import os
import threading
from pathlib import Path
from urllib.parse import quote

import pytest

from npa_workflow import redact
from npa_workflow.engine.ports import JobRequest, TrackedJob
from npa_workflow.local_jobs.executor import TAIL_BYTES, LocalExecutor
from npa_workflow.local_jobs.job_environment import PASS_ENV
from npa_workflow.local_jobs.job_executor import LocalJobExecutor

from .conftest import PY, plan_step, wait_terminal, wait_until

CANARY = "canary-Zq8!x/y+w=secret"


def test_log_tail_of_a_huge_log_without_newlines_is_bounded(tmp_path: Path) -> None:
    ex = LocalExecutor(tmp_path / "state")
    job_id = ex.launch("noisy", [PY, "-c", "pass"])
    wait_terminal(ex, job_id)
    log = ex.jobs_dir / f"{job_id}.log"
    with open(log, "wb") as fh:  # 100 MB with no newline (sparse: the disk does not fill), then a last word
        fh.truncate(100 * 1024 * 1024)
        fh.seek(0, os.SEEK_END)
        fh.write(b"x" * 1000 + b"THE-END")
    result: list[str] = []
    worker = threading.Thread(target=lambda: result.append(ex.log_tail(job_id, lines=20)), daemon=True)
    worker.start()
    worker.join(10)
    assert result, "log_tail hung on a 100 MB log without newlines"
    assert result[0].endswith("THE-END") and len(result[0].encode()) <= TAIL_BYTES


def test_a_job_sees_the_allow_list_not_the_whole_environment(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("CANARY_TOKEN", CANARY)
    monkeypatch.setenv("OTHER_SECRET", "other-value")
    monkeypatch.setenv("PASSED_ON", "yes")
    monkeypatch.setenv(PASS_ENV, "PASSED_ON")
    jobs = LocalJobExecutor(tmp_path / "state", cancel_grace_seconds=0.5)
    out = tmp_path / "env.json"
    code = f"import json, os; json.dump(dict(os.environ), open({str(out)!r}, 'w'))"
    request = JobRequest(name="env", step=plan_step([PY, "-c", code]),
                         env={"FROM_SPEC": "spec-value"})
    job_id = jobs.submit(request).job_id
    wait_terminal(jobs.local, job_id)
    seen = json.loads(out.read_text())
    assert "CANARY_TOKEN" not in seen and "OTHER_SECRET" not in seen
    assert seen["FROM_SPEC"] == "spec-value" and seen["PASSED_ON"] == "yes"
    assert seen["PATH"] == os.environ["PATH"] and seen["NPA_LOCAL_JOB_ID"] == job_id


def test_a_secret_printed_by_a_failing_step_is_redacted_in_every_encoding(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("CANARY_TOKEN", CANARY)
    forms = [CANARY, base64.b64encode(CANARY.encode()).decode(), base64.urlsafe_b64encode(CANARY.encode()).decode(),
             quote(CANARY, safe=""), json.dumps(CANARY)[1:-1], CANARY.encode().hex()]
    code = ("import base64, json, os, sys, urllib.parse\nv = os.environ['CANARY_TOKEN']\n"
            "for f in (v, base64.b64encode(v.encode()).decode(), base64.urlsafe_b64encode(v.encode()).decode(),"
            " urllib.parse.quote(v, safe=''), json.dumps(v)[1:-1], v.encode().hex()): print('token:', f)\n"
            "sys.exit(3)")
    jobs = LocalJobExecutor(tmp_path / "state", cancel_grace_seconds=0.5)
    request = JobRequest(name="leaky", step=plan_step([PY, "-c", code]), env={},
                         secret_names=("CANARY_TOKEN",))
    job_id = jobs.submit(request).job_id
    wait_terminal(jobs.local, job_id)
    [observation] = jobs.observe([TrackedJob("k", job_id, None)]).values()
    assert observation.outcome == "failed"
    assert "[redacted:CANARY_TOKEN]" in observation.message
    for form in forms:
        assert form not in observation.message, form
    # The value also does not survive a fresh executor (after a restart: names are in the record, not values).
    fresh = LocalJobExecutor(tmp_path / "state")
    [again] = fresh.observe([TrackedJob("k", job_id, None)]).values()
    assert CANARY not in again.message
    assert CANARY not in (jobs.local.jobs_dir / f"{job_id}.json").read_text()


def test_a_secret_too_short_to_redact_is_refused_at_submit(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("TINY", "ab")
    jobs = LocalJobExecutor(tmp_path / "state")
    request = JobRequest(name="tiny", step=plan_step([PY, "-c", "pass"]), env={}, secret_names=("TINY",))
    with pytest.raises(Exception, match="TINY shorter than"):
        jobs.submit(request)


def test_redactor_replaces_the_longest_value_first() -> None:
    redactor = redact.Redactor({"A": "abcd", "B": "xxabcdxx"})
    assert redactor("see xxabcdxx and abcd") == "see [redacted:B] and [redacted:A]"


def test_a_cancelled_wrapper_waiting_for_go_leaves_nothing(tmp_path: Path) -> None:
    """A wrapper whose launcher is gone exits by itself (end of its go-signal pipe)."""
    ex = LocalExecutor(tmp_path / "state")
    job_id = ex.launch("quick", [PY, "-c", "pass"])
    wait_until(lambda: ex.statuses([job_id])[job_id].is_terminal, 10, "terminal")
    assert ex.wait_gone([job_id], timeout=2)


def test_pass_env_flag_records_names_and_refuses_non_names(monkeypatch) -> None:
    import typer

    from npa_workflow.cli.common import apply_pass_env

    monkeypatch.setenv(PASS_ENV, "FIRST")
    apply_pass_env(["SECOND", "FIRST"])
    assert os.environ[PASS_ENV] == "FIRST,SECOND"
    with pytest.raises(typer.BadParameter, match="not a variable name: 1bad"):
        apply_pass_env(["1bad"])
