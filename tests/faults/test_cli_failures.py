"""Hostile environment for the stack commands: an unreachable or malformed endpoint, no region, no credentials.
Each is one line naming what failed and what to do, exit 1 (README: exit codes) — never a traceback."""

from __future__ import annotations

import socket

import pytest
from typer.testing import CliRunner

from npa_workflow.cli.app import app


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def no_aws(monkeypatch, tmp_path):
    for name in ("AWS_DEFAULT_REGION", "AWS_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE",
                 "AWS_SESSION_TOKEN", "NPA_WORKFLOW_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def _one_line_failure(args: list[str], *expected: str) -> str:
    result = CliRunner().invoke(app, args)
    output = result.output  # stdout and stderr, as a terminal shows them
    assert result.exit_code == 1, output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in output
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert "error:" in lines[0] and "(fix: " in lines[0]
    for text in expected:
        assert text in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("command", [["status", "r1"], ["cancel", "r1"], ["resume", "r1"], ["list"]])
def test_an_unreachable_endpoint_is_one_line(no_aws, command: list[str]) -> None:
    endpoint = f"http://127.0.0.1:{_closed_port()}"
    _one_line_failure([*command, "--endpoint", endpoint], "cannot reach", "npa-workflow serve")


def test_submit_to_an_unreachable_endpoint_is_one_line(no_aws, tmp_path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text("apiVersion: npa.workflow/v0.0.1\nkind: Workflow\nmetadata: {name: t}\nstates: {}\n")
    _one_line_failure(["submit", str(spec), "--endpoint", f"http://127.0.0.1:{_closed_port()}"], "cannot reach")


@pytest.mark.parametrize("endpoint", ["notaurl", "http://[::1", "http://127.0.0.1:port", "ftp://x"])
def test_a_malformed_endpoint_is_one_line(no_aws, endpoint: str) -> None:
    _one_line_failure(["list", "--endpoint", endpoint], "is not a URL")


def test_list_stack_without_a_region_says_so(no_aws) -> None:
    _one_line_failure(["list", "--stack", "npa"], "region", "--region")


def test_list_stack_without_credentials_says_so(no_aws) -> None:
    _one_line_failure(["list", "--stack", "npa", "--region", "us-east-1"], "credentials")
