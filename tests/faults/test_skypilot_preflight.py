"""Fault: an unreachable, unhealthy or token-refusing SkyPilot API server. `run --executor skypilot` fails in
seconds with one line (the launch's retries used to take 96.5 s), and a missing token is named up front."""

from __future__ import annotations

import importlib.util
import socket
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from npa_workflow.adapters.skypilot_api import ENV_TOKEN
from npa_workflow.adapters.skypilot_preflight import PreflightFailed, preflight
from npa_workflow.cli.app import app

DOUBLE_PATH = Path(__file__).resolve().parents[1] / "integration" / "skypilot" / "double.py"
TOKEN = "sky_preflight-token-0123456789"


def _double_module():
    spec = importlib.util.spec_from_file_location("npa_skypilot_double_faults", DOUBLE_PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


SkyPilotDouble = _double_module().SkyPilotDouble


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _fails_fast(endpoint: str, env: dict[str, str], *expected: str) -> str:
    started = time.monotonic()
    with pytest.raises(PreflightFailed) as caught:
        preflight(endpoint, env)
    assert time.monotonic() - started < 5.0
    message = str(caught.value)
    assert "\n" not in message and "(fix: " in message
    for text in expected:
        assert text in message, message
    return message


def test_an_unreachable_server_fails_in_seconds() -> None:
    _fails_fast(f"http://127.0.0.1:{_closed_port()}", {}, "not reachable", "sky api start")


def test_a_malformed_endpoint_is_named() -> None:
    _fails_fast("not a url", {}, "--skypilot-endpoint")


def test_a_server_that_wants_a_token_names_the_variable_when_it_is_missing() -> None:
    with SkyPilotDouble(token=TOKEN) as double:
        _fails_fast(double.endpoint, {}, "refused the credentials", f"${ENV_TOKEN}")


def test_a_refused_token_is_not_mistaken_for_a_missing_one() -> None:
    with SkyPilotDouble(token=TOKEN) as double:
        message = _fails_fast(double.endpoint, {ENV_TOKEN: "sky_wrong-token-value"}, "refused it")
        assert "sky_wrong-token-value" not in message  # the client redacts the token it sent


def test_a_server_failing_with_503_fails_in_seconds_not_after_the_launch_retries() -> None:
    with SkyPilotDouble() as double:
        double.fail_next(503, times=100)
        _fails_fast(double.endpoint, {}, "not reachable")


def test_a_healthy_server_with_the_right_token_passes() -> None:
    with SkyPilotDouble(token=TOKEN) as double:
        assert "SkyPilot API server" in preflight(double.endpoint, {ENV_TOKEN: TOKEN})


def test_run_with_an_unreachable_skypilot_endpoint_is_one_line_in_seconds(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(ENV_TOKEN, raising=False)
    spec = tmp_path / "one.yaml"
    spec.write_text("apiVersion: npa.workflow/v0.0.1\nkind: Workflow\nmetadata: {name: one}\n"
                    "states:\n  hello: {run: {shell: 'true'}, terminal: true}\n")
    started = time.monotonic()
    result = CliRunner().invoke(app, ["run", str(spec), "--executor", "skypilot", "--skypilot-endpoint",
                                      f"http://127.0.0.1:{_closed_port()}"])
    assert time.monotonic() - started < 10.0
    assert result.exit_code == 1 and "Traceback" not in result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "not reachable" in lines[0], lines
