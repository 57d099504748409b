"""The type checker is part of the test command: mypy, strict, on the modules `[tool.mypy]` in pyproject.toml
names (the engine, the protocol, the ledger, the wiring). Its cache (`.mypy_cache/`) makes a second run about a
second; a cold one (CI's fresh clone) a few CPU-seconds. It runs in a subprocess, so it is not in the `fast`
subset; `.venv/bin/python -m mypy` runs the same by hand."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_configuration_is_strict_on_the_engine_and_the_protocol() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    assert config["strict"] is True
    assert {"layers/engine/npa_workflow/engine", "layers/engine/npa_workflow/protocol"} <= set(config["files"])


def test_mypy_finds_no_type_error() -> None:
    done = subprocess.run([sys.executable, "-m", "mypy"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"mypy (pyproject.toml [tool.mypy]) found type errors:\n{done.stdout}{done.stderr}"
