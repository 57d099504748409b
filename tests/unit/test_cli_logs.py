"""`npa-workflow logs`: a local run's step logs found through the ledger file the runtime keeps."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from npa_workflow.cli.app import app
from npa_workflow.cli.logs import read_tail
from npa_workflow.ledger import WaveAttempt, WaveStatus

SPEC = """\
apiVersion: npa.workflow/v0.0.1
kind: Workflow
metadata: {name: t}
states:
  refine: {sequence: [train], loop: {max: 3}, next: done}
  train: {run: {shell: echo train}}
  done: {run: {shell: echo done}, terminal: true}
"""


def attempt(state: str, key: str, n: int, job: str, status: WaveStatus, at: str) -> WaveAttempt:
    return WaveAttempt(run_id="r1", wave_key=key, state=state, attempt=n, job_id=job, status=status,
                       submitted_at=at)


def write_run(home: Path, waves: list[WaveAttempt], spec: Path | None = None) -> None:
    run_dir = home / "runs" / "r1"
    run_dir.mkdir(parents=True, exist_ok=True)
    items = [w.to_item() | {"kind": {"S": "WAVE"}} for w in waves]
    tmp = run_dir / "ledger.json.tmp"  # replaced whole, as the runtime does
    tmp.write_text(json.dumps({"table": "t", "run_id": "r1", "items": items}))
    tmp.replace(run_dir / "ledger.json")
    if spec is not None:
        (run_dir / "meta.json").write_text(json.dumps({"run_id": "r1", "workflow": "t", "spec": str(spec)}))


def log(home: Path, job: str, text: str) -> None:
    (home / "jobs").mkdir(parents=True, exist_ok=True)
    (home / "jobs" / f"{job}.log").write_text(text)


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("NPA_WORKFLOW_HOME", str(tmp_path / "home"))
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    h = tmp_path / "home"
    write_run(h, [
        attempt("train", "train|refine=1", 1, "local-a1", WaveStatus.SUCCEEDED, "2026-01-01T00:00:01.000Z"),
        attempt("train", "train|refine=2", 1, "local-b1", WaveStatus.FAILED, "2026-01-01T00:00:02.000Z"),
        attempt("train", "train|refine=2", 2, "local-b2", WaveStatus.SUCCEEDED, "2026-01-01T00:00:03.000Z"),
        attempt("done", "done", 1, "local-c1", WaveStatus.SUCCEEDED, "2026-01-01T00:00:04.000Z"),
    ], spec)
    for job, text in (("local-a1", "round one\n"), ("local-b1", "round two failed\n"),
                      ("local-b2", "round two again\n"), ("local-c1", "done\n")):
        log(h, job, text)
    return h


def logs(*args: str):
    return CliRunner().invoke(app, ["logs", *args], catch_exceptions=False)


def test_one_round_of_a_state_prints_its_latest_attempt(home):
    result = logs("r1", "train", "--iteration", "2")
    assert result.exit_code == 0, result.output
    assert result.stdout == "round two again\n"
    assert logs("r1", "train", "--iteration", "2", "--attempt", "1").stdout == "round two failed\n"


def test_every_wave_with_a_header_naming_round_attempt_and_log_file(home):
    out = logs("r1").stdout
    assert out.count("==> ") == 3
    assert f"==> train iteration 2 attempt 2 · SUCCEEDED · {home / 'jobs' / 'local-b2.log'} <==" in out
    assert out.index("round one") < out.index("round two again") < out.index("done\n")


def test_unknown_state_or_run_is_one_line_and_exit_1(home):
    result = logs("r1", "trian")
    assert result.exit_code == 1
    assert "no wave of state 'trian' (states with waves: done, train)" in result.stderr
    missing = logs("nope")
    assert missing.exit_code == 1 and "no local run 'nope'" in missing.stderr


def test_tail_reads_a_fixed_byte_budget(tmp_path):
    big = tmp_path / "big.log"
    big.write_bytes(b"x" * 1_000_000 + b"the end\n")
    data, skipped = read_tail(big, 8)
    assert (data, skipped) == (b"the end\n", 1_000_000)


def test_follow_prints_until_the_attempt_ends(home):
    write_run(home, [attempt("done", "done", 1, "local-c1", WaveStatus.RUNNING, "2026-01-01T00:00:04.000Z")])

    def finish() -> None:
        time.sleep(0.6)
        with open(home / "jobs" / "local-c1.log", "a") as fh:
            fh.write("more output\n")
        write_run(home, [attempt("done", "done", 1, "local-c1", WaveStatus.SUCCEEDED, "2026-01-01T00:00:04.000Z")])

    writer = threading.Thread(target=finish)
    writer.start()
    started = time.monotonic()
    result = logs("r1", "done", "--follow")
    writer.join()
    assert result.exit_code == 0
    assert result.stdout == "done\nmore output\n"
    assert time.monotonic() - started < 10


def test_a_state_that_never_launched_says_why_and_exits_1(home, tmp_path):
    never = WaveAttempt(run_id="r1", wave_key="done", state="done", attempt=1, status=WaveStatus.FAILED,
                        submitted_at="2026-01-01T00:00:05.000Z",
                        error="state 'done': could not launch: secret(s) HF_TOKEN not set")
    write_run(home, [never], tmp_path / "spec.yaml")
    result = logs("r1", "done")
    assert result.exit_code == 1 and result.stdout == ""
    assert ("npa-workflow logs: error: done attempt 1 never launched a job (FAILED): state 'done': could not "
            "launch: secret(s) HF_TOKEN not set") in result.stderr
