"""A secret a step prints is shown nowhere (issue 18, item 6): not in the job's log file on disk (the wrapper
redacts as it writes), not by `npa-workflow logs` (local, serve, SkyPilot), in none of its common encodings."""

from __future__ import annotations

import base64
import html
import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest

from npa_workflow import redact
from npa_workflow.cli import logs as logs_cli
from npa_workflow.engine.ports import JobRequest
from npa_workflow.local_jobs.job_executor import LocalJobExecutor

from .conftest import PY, plan_step, wait_terminal

SECRET = "canary-Zq8!x/y+w=sécret"
RAW = SECRET.encode("utf-8")
ENCODINGS = {
    "raw": SECRET,
    "hex": RAW.hex(),
    "HEX": RAW.hex().upper(),
    "base64": base64.b64encode(RAW).decode(),
    "base64 unpadded": base64.b64encode(RAW).decode().rstrip("="),
    "urlsafe base64": base64.urlsafe_b64encode(RAW).decode(),
    "base32": base64.b32encode(RAW).decode(),
    "base32 unpadded": base64.b32encode(RAW).decode().rstrip("="),
    "quote": quote(SECRET, safe=""),
    "quote, lower-case escapes": quote(SECRET, safe="").replace("%2F", "%2f").replace("%3D", "%3d"),
    "quote_plus": quote_plus(SECRET, safe=""),
    "json ascii": json.dumps(SECRET)[1:-1],
    "json utf-8": json.dumps(SECRET, ensure_ascii=False)[1:-1],
    "repr": repr(SECRET)[1:-1],
    "html": html.escape(SECRET),
}


@pytest.mark.parametrize("encoding", sorted(ENCODINGS))
def test_every_common_encoding_of_a_secret_is_redacted(encoding: str) -> None:
    text = f"before {ENCODINGS[encoding]} after"
    assert redact.redact(text, {"TOKEN": SECRET}) == "before [redacted:TOKEN] after"


def _printer(tmp_path: Path) -> Path:
    """A step that prints the secret (from its environment) in every encoding, then a flood without newlines with
    the value across the wrapper's 64 KiB read boundary."""
    script = tmp_path / "leak.py"
    script.write_text(
        "import base64, json, os, sys\n"
        "from urllib.parse import quote\n"
        "v = os.environ['TOKEN']; raw = v.encode()\n"
        "print(v, raw.hex().upper(), base64.b64encode(raw).decode(), quote(v, safe=''), json.dumps(v), flush=True)\n"
        "sys.stderr.write('on stderr: ' + v + '\\n'); sys.stderr.flush()\n"
        "sys.stdout.write('x' * (64 * 1024 - 5) + v + 'y' * 70000); sys.stdout.flush()\n"
    )
    return script


@pytest.mark.timeout(60)
def test_the_job_log_on_disk_never_holds_the_secret(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("TOKEN", SECRET)
    jobs = LocalJobExecutor(tmp_path / "state", cancel_grace_seconds=0.5)
    request = JobRequest(name="leak", step=plan_step([PY, str(_printer(tmp_path))]), env={},
                         secret_names=("TOKEN",))
    job_id = jobs.submit(request).job_id
    info = wait_terminal(jobs.local, job_id, timeout=30)
    assert info.status == "SUCCEEDED", info.error
    data = Path(info.log_path).read_bytes()
    for form in (RAW, RAW.hex().upper().encode(), base64.b64encode(RAW), quote(SECRET, safe="").encode()):
        assert form not in data
    assert data.count(b"[redacted:TOKEN]") == 7  # five forms, stderr, the value across the read boundary
    assert b"on stderr: [redacted:TOKEN]" in data and data.endswith(b"y" * 70000)


@pytest.mark.timeout(60)
def test_a_job_without_secrets_writes_its_log_directly(tmp_path: Path) -> None:
    jobs = LocalJobExecutor(tmp_path / "state", cancel_grace_seconds=0.5)
    job_id = jobs.submit(JobRequest(name="plain", step=plan_step([PY, "-c", "print('hello')"]),
                                    env={})).job_id
    info = wait_terminal(jobs.local, job_id)
    assert Path(info.log_path).read_text() == "hello\n"


def _local_run(home: Path, job_id: str, log_text: str, secret_names: list[str]) -> None:
    """A run's ledger (the legacy file form) with one wave whose job record names its secrets."""
    from npa_workflow.ledger import WaveAttempt, WaveStatus

    run_dir = home / "runs" / "r1"
    run_dir.mkdir(parents=True)
    wave = WaveAttempt(run_id="r1", wave_key="a", state="a", attempt=1, job_id=job_id, status=WaveStatus.SUCCEEDED,
                       submitted_at="2026-01-01T00:00:00.000Z")
    (run_dir / "ledger.json").write_text(json.dumps({"items": [wave.to_item() | {"kind": {"S": "WAVE"}}]}))
    (home / "jobs").mkdir(parents=True)
    (home / "jobs" / f"{job_id}.log").write_text(log_text)
    (home / "jobs" / f"{job_id}.json").write_text(json.dumps({"job_id": job_id, "secret_names": secret_names}))


def _cli(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from npa_workflow.cli.app import main; main()", *args],
                          capture_output=True, text=True, env={**os.environ, **env}, cwd=cwd, timeout=60)


@pytest.mark.timeout(120)
def test_logs_redacts_what_a_log_holds_raw(tmp_path: Path) -> None:
    """A log written before the wrapper redacted (or copied in by hand) is still shown redacted."""
    home = tmp_path / "home"
    _local_run(home, "local-abc", f"token {SECRET} hex {RAW.hex().upper()}\n", ["TOKEN"])
    result = _cli("logs", "r1", env={"NPA_WORKFLOW_HOME": str(home), "TOKEN": SECRET}, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "token [redacted:TOKEN] hex [redacted:TOKEN]\n"


def test_a_followed_stream_is_redacted_across_its_pieces(monkeypatch, capsysbinary) -> None:
    """SkyPilot's stream (`logs --follow` of a cloud job) arrives in pieces that may cut a value in two."""
    monkeypatch.setenv("TOKEN", SECRET)
    source = logs_cli.LogSource("a", None, 1, "RUNNING", "7", None, "SkyPilot job 7", ("TOKEN",))
    lines = logs_cli._LineRedactor(source)
    for piece in ("step 1 ", SECRET[:6], SECRET[6:] + "\nstep 2 ", RAW.hex().upper()):
        lines.write(piece)
    lines.flush()
    assert capsysbinary.readouterr().out.decode() == "step 1 [redacted:TOKEN]\nstep 2 [redacted:TOKEN]"


@pytest.mark.timeout(60)
def test_no_log_is_exit_1_with_the_real_reason(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _local_run(home, "local-gone", "", [])
    (home / "jobs" / "local-gone.log").unlink()
    removed = _cli("logs", "r1", env={"NPA_WORKFLOW_HOME": str(home)}, cwd=tmp_path)
    assert removed.returncode == 1 and "is recorded there but its log file is gone" in removed.stderr
    (home / "jobs" / "local-gone.json").unlink()
    elsewhere = _cli("logs", "r1", env={"NPA_WORKFLOW_HOME": str(home)}, cwd=tmp_path)
    assert elsewhere.returncode == 1 and f"this home ({home}) has no job local-gone" in elsewhere.stderr
    assert "Traceback" not in removed.stderr + elsewhere.stderr
