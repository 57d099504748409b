"""A SkyPilot managed job's log by exact id (`SkyPilotApi.job_logs`, `npa-workflow logs --skypilot-endpoint`).

Against the protocol double: the stream's shape (SkyPilot's control lines first, then the job's text) is
recorded from the real 0.14.1 server (`recordings/post_jobs_logs_200.json`); the job's own output is
scripted, because a server without a cloud never runs a job (the contract test reads the real server's
answer for such a job).
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from typer.testing import CliRunner

from npa_workflow.adapters.skypilot_api import SkyPilotApi
from npa_workflow.cli import logs as logs_cli
from npa_workflow.cli.app import app

DOUBLE_PATH = Path(__file__).resolve().parents[1] / "integration" / "skypilot" / "double.py"


def _load_double() -> ModuleType:
    spec = importlib.util.spec_from_file_location("npa_skypilot_double_logs", DOUBLE_PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


double_mod = _load_double()
LOG = "".join(f"step {i:05d} loss={1 / (i + 1):.6f}\n" for i in range(5000))


@pytest.fixture
def double() -> Iterator:
    with double_mod.SkyPilotDouble() as d:
        d.job_logs[7] = LOG
        yield d


def test_the_tail_of_a_long_log_within_the_byte_budget_without_control_lines(double) -> None:
    api = SkyPilotApi(double.endpoint, retry_deadline=2.0)
    got = api.job_logs(7, max_bytes=1000)
    (call,) = double.calls_to("/jobs/logs")
    assert call["body"]["job_id"] == 7 and call["body"]["follow"] is False
    assert call["body"]["tail"] == 1000 // 16  # the server is asked for a bounded number of lines
    assert got.complete and got.job_id == 7
    assert len(got.text.encode()) <= 1000 and got.skipped_bytes > 0
    assert got.text.endswith("step 04999 loss=0.000200\n") and LOG.endswith(got.text)
    assert "<sky-payload" not in got.text and "rich_" not in got.text


def test_one_line_longer_than_the_budget_keeps_its_end(double) -> None:
    double.job_logs[8] = "x" * 5000 + "END\n"
    got = SkyPilotApi(double.endpoint).job_logs(8, max_bytes=100, tail_lines=1)
    assert len(got.text) <= 100 and got.text.endswith("xEND\n") and got.skipped_bytes >= 4900


def test_a_stream_longer_than_the_wire_budget_is_abandoned_not_read_to_the_end(double) -> None:
    api = SkyPilotApi(double.endpoint)
    got = api.job_logs(7, max_bytes=64, tail_lines=5000)  # the server would send the whole log
    assert not got.complete and len(got.text.encode()) <= 64


def test_an_unknown_job_says_so(double) -> None:
    assert SkyPilotApi(double.endpoint).job_logs(424242).text == "Job 424242 not found.\n"


def _stack(monkeypatch: pytest.MonkeyPatch, job_id: str) -> None:
    # The ledger lookup of a stack is tested with a serve stack (tests/e2e/test_serve.py); here only what
    # `logs` does with a wave whose job is a SkyPilot managed job.
    import npa_workflow.cli.stack as stack_cli

    source = logs_cli.LogSource("train", None, 1, "SUCCEEDED", job_id, None,
                                logs_cli.log_location(Path("."), job_id))
    monkeypatch.setattr(stack_cli, "stack_client", lambda *a: object())
    monkeypatch.setattr(logs_cli, "stack_sources", lambda client, run, home: [source])


def test_logs_of_a_stack_read_a_skypilot_job_through_the_api_server(double, monkeypatch) -> None:
    _stack(monkeypatch, "7")
    result = CliRunner().invoke(app, ["logs", "r1", "--stack", "S", "--bytes", "200",
                                      "--skypilot-endpoint", double.endpoint], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert result.stdout.endswith("step 04999 loss=0.000200\n") and len(result.stdout.encode()) <= 200
    assert "bytes the server sent are not shown" in result.stderr
    assert [c["body"]["job_id"] for c in double.calls_to("/jobs/logs")] == [7]


def test_without_an_api_server_logs_name_the_job_and_where_the_handler_logs_are(monkeypatch) -> None:
    _stack(monkeypatch, "7")
    monkeypatch.delenv("SKYPILOT_API_SERVER_ENDPOINT", raising=False)
    result = CliRunner().invoke(app, ["logs", "r1", "--stack", "S"], catch_exceptions=False)
    assert result.exit_code == 0 and result.stdout == ""
    assert "SkyPilot managed job 7" in result.stderr and "--skypilot-endpoint URL" in result.stderr
    assert "CloudWatch" in result.stderr and "/aws/vendedlogs/states/" in result.stderr


def test_jobs_cancel_of_a_skypilot_job_cancels_it_by_exact_id(double) -> None:
    api = SkyPilotApi(double.endpoint)
    double.job_statuses = ["RUNNING"]
    double.request_polls = 0  # launches are done at once
    job = api.launched_job_ids(api.launch("name: t\nrun: sleep 1000\n", "t"))[0]
    other = api.launched_job_ids(api.launch("name: t\nrun: sleep 1000\n", "t"))[0]  # same name: untouched
    result = CliRunner().invoke(app, ["jobs", "cancel", str(job), "--skypilot-endpoint", double.endpoint],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert result.stdout == f"{job}: CANCELLED (SkyPilot managed job)\n"
    assert [c["body"]["job_ids"] for c in double.calls_to("/jobs/cancel")] == [[job]]
    assert double.job_status(job) == "CANCELLED" and double.job_status(other) == "RUNNING"
    missing = CliRunner().invoke(app, ["jobs", "cancel", "4242", "--skypilot-endpoint", double.endpoint])
    assert missing.exit_code == 1 and "has no managed job 4242" in missing.stderr


def test_cleanup_names_the_command_for_each_kind_of_job() -> None:
    from npa_workflow.engine.cleanup import left_running_text

    text = left_running_text(["local-ab12", "42"])
    assert "still running (--no-cancel-on-timeout): local-ab12, 42" in text
    assert "`npa-workflow jobs cancel local-ab12`" in text
    assert "`npa-workflow jobs cancel 42 --skypilot-endpoint URL`" in text


def test_logs_follow_of_a_skypilot_job_streams_it_until_the_server_ends_the_stream(double, monkeypatch) -> None:
    # The real server keeps a follow stream open until the job ends (tests/integration/skypilot, the cancel
    # test); the double ends it after the scripted log, as the server does for an ended job.
    _stack(monkeypatch, "7")
    result = CliRunner().invoke(app, ["logs", "r1", "train", "--stack", "S", "--follow", "--bytes", "320",
                                      "--skypilot-endpoint", double.endpoint], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    (call,) = double.calls_to("/jobs/logs")
    assert call["body"]["job_id"] == 7 and call["body"]["follow"] is True and call["body"]["tail"] == 320 // 16
    assert result.stdout == "".join(LOG.splitlines(keepends=True)[-20:])  # its last lines, then the end
    assert "<sky-payload" not in result.stdout


def test_a_followed_stream_is_handed_on_line_by_line_as_it_arrives() -> None:
    from npa_workflow.adapters.skypilot_api import _LogLines

    got: list[str] = []
    lines = _LogLines(got.append)
    lines.add(b"<sky-payload>{\"rich\": 1}</sky-payload>\nstep 1\nste")
    assert got == ["step 1\n"]  # a whole line at once; the rest waits for its end
    lines.add(b"p 2 \x1b[1mbold\x1b[0m\n")
    assert got == ["step 1\n", "step 2 bold\n"]
    lines.add(b"x" * (_LogLines.PIECE + 1))  # one endless line is not held back forever
    assert got[-1] == "x" * (_LogLines.PIECE + 1)
    lines.add(b"no newline at the end")
    lines.end()
    assert got[-1] == "no newline at the end"
