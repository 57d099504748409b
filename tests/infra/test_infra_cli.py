"""The real pinned CDK CLI, offline: `cdk synth` (the layer bundled locally, no Docker) and `cdk deploy` without
credentials (AWS's own message, nothing of ours crashes first).

"Offline" is checked, not assumed: pip installs the layer from a wheelhouse (PIP_NO_INDEX), and every process
gets HTTP(S)_PROXY pointing at a local listener that counts connections; the tests assert it saw none. The
wheelhouse is downloaded once (the only step that needs PyPI) under build/, or taken from NPA_LAYER_WHEELHOUSE.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from infra_support import REPO_ROOT

from infra.functions import LAYER_PLATFORM, LAYER_PYTHON_VERSION, layer_compiler, layer_requirements

CDK = REPO_ROOT / "node_modules" / ".bin" / "cdk"
EM_AARCH64 = 183
TIMEOUT = 600

pytestmark = [
    pytest.mark.skipif(not CDK.exists(), reason="the pinned CDK CLI is not installed: run npm ci"),
    pytest.mark.xdist_group("cdk-cli"),  # the module's real synths are shared: keep them on one worker
]


class ConnectionCounter:
    """A TCP listener standing in for an HTTP proxy: it accepts, counts and closes every connection."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.count = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.count += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self.sock.close()


@pytest.fixture(scope="module")
def proxy() -> Iterator[ConnectionCounter]:
    counter = ConnectionCounter()
    yield counter
    counter.close()


@pytest.fixture(scope="module")
def wheelhouse() -> Path:
    """Wheels of the layer's requirements for the Lambda platform (downloaded once, reused offline)."""
    given = os.environ.get("NPA_LAYER_WHEELHOUSE")
    if given:
        return Path(given)
    requirements = layer_requirements()
    key = hashlib.sha256("\n".join([LAYER_PLATFORM, LAYER_PYTHON_VERSION, *requirements]).encode()).hexdigest()[:12]
    path = REPO_ROOT / "build" / "wheelhouse" / f"{LAYER_PLATFORM}-py{LAYER_PYTHON_VERSION}-{key}"
    marker = path / ".complete"
    if not marker.exists():
        path.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--dest", str(path),
             "--platform", LAYER_PLATFORM, "--python-version", LAYER_PYTHON_VERSION, "--implementation", "cp",
             "--only-binary=:all:", *requirements],
            check=True, timeout=TIMEOUT,
        )
        marker.write_text("\n".join(requirements))
    return path


def offline_env(tmp: Path, proxy: ConnectionCounter, wheelhouse: Path) -> dict[str, str]:
    """No AWS credentials anywhere, no network: every HTTP(S) client is sent to the counting listener."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "CDK_")) and k.lower() not in (
        "http_proxy", "https_proxy", "no_proxy", "all_proxy")}
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    env.update(
        HOME=str(home),
        AWS_EC2_METADATA_DISABLED="true",
        AWS_CONFIG_FILE=str(home / "no-aws-config"),
        AWS_SHARED_CREDENTIALS_FILE=str(home / "no-aws-credentials"),
        CDK_DISABLE_VERSION_CHECK="1",
        npm_config_update_notifier="false",
        PIP_NO_INDEX="1",
        PIP_FIND_LINKS=str(wheelhouse),
        HTTP_PROXY=proxy.url, HTTPS_PROXY=proxy.url, http_proxy=proxy.url, https_proxy=proxy.url,
        NO_PROXY="", no_proxy="",
    )
    return env


@dataclass
class CliRun:
    result: subprocess.CompletedProcess[str]
    outdir: Path

    @property
    def output(self) -> str:
        return self.result.stdout + self.result.stderr


@pytest.fixture(scope="module")
def cli_synth(tmp_path_factory: pytest.TempPathFactory, proxy: ConnectionCounter, wheelhouse: Path) -> CliRun:
    tmp = tmp_path_factory.mktemp("cli-synth")
    outdir = tmp / "cdk.out"
    result = subprocess.run(
        [str(CDK), "synth", "--quiet", "--output", str(outdir), "-c", "skypilotEndpoint=https://skypilot.example.com"],
        capture_output=True, text=True, cwd=REPO_ROOT, env=offline_env(tmp, proxy, wheelhouse),
        timeout=TIMEOUT, check=False,
    )
    return CliRun(result, outdir)


def _engine_resources(run: CliRun, resource_type: str) -> list[dict]:
    """The engine's resources of a type (under the `Functions` construct: not the catalog deployment's handler and
    AWS CLI layer, which aws-cdk-lib ships ready-made)."""
    template = json.loads((run.outdir / "NpaWorkflow.template.json").read_text())
    return [
        r for lid, r in template["Resources"].items() if r["Type"] == resource_type and lid.startswith("Functions")
    ]


def _asset_dir(run: CliRun, resource_type: str) -> Path:
    paths = {r["Metadata"]["aws:asset:path"] for r in _engine_resources(run, resource_type)}
    assert len(paths) == 1, paths
    return run.outdir / paths.pop()


def _elf_machine(path: Path) -> int:
    header = path.read_bytes()[:20]
    assert header[:4] == b"\x7fELF", path
    return struct.unpack_from("<H", header, 18)[0]


def test_cli_synth_works_offline_without_docker(cli_synth: CliRun, proxy: ConnectionCounter) -> None:
    assert cli_synth.result.returncode == 0, cli_synth.output
    assert (cli_synth.outdir / "NpaWorkflow.template.json").exists()
    assert "Traceback" not in cli_synth.output
    assert proxy.count == 0, "something tried to reach the network"


def test_cli_synth_bundles_the_layer_for_lambda_arm64(cli_synth: CliRun) -> None:
    assert cli_synth.result.returncode == 0, cli_synth.output
    layer = _asset_dir(cli_synth, "AWS::Lambda::LayerVersion")
    python = layer / "python"
    assert (python / "npa_workflow" / "__init__.py").is_file()
    assert (python / "pydantic").is_dir()
    assert (python / "yaml").is_dir() and (python / "aws_lambda_powertools").is_dir()
    native = sorted((python / "pydantic_core").glob("*.so"))
    assert native and all("aarch64" in p.name and "cpython-314" in p.name for p in native), native
    assert {_elf_machine(p) for p in native} == {EM_AARCH64}
    assert not (python / "bin").exists()
    assert not (python / "boto3").exists() and not (python / "typer").exists()
    caches = list((python / "npa_workflow").rglob("__pycache__"))
    if layer_compiler() is None:  # no Python of the layer's version here: source only, and the synth says so
        assert not caches
        assert "the engine layer ships without bytecode" in cli_synth.output
    else:
        tag = f".cpython-{LAYER_PYTHON_VERSION.replace('.', '')}.pyc"
        assert caches and all(p.name.endswith(tag) for c in caches for p in c.iterdir())


def test_cli_synth_ships_only_the_handlers_python_files(cli_synth: CliRun) -> None:
    assert cli_synth.result.returncode == 0, cli_synth.output
    assert len(_engine_resources(cli_synth, "AWS::Lambda::Function")) == 7
    code = _asset_dir(cli_synth, "AWS::Lambda::Function")
    files = [p.relative_to(code) for p in code.rglob("*") if p.is_file()]
    assert files and all(f.parts[0] == "functions" and f.suffix == ".py" for f in files), files


def test_cli_synth_stages_the_catalog_the_deploy_publishes(cli_synth: CliRun) -> None:
    assert cli_synth.result.returncode == 0, cli_synth.output
    template = json.loads((cli_synth.outdir / "NpaWorkflow.template.json").read_text())
    [deployment] = [r for r in template["Resources"].values() if r["Type"] == "Custom::CDKBucketDeployment"]
    assert deployment["Properties"]["DestinationBucketKeyPrefix"] == "catalog/"
    [key] = deployment["Properties"]["SourceObjectKeys"]
    staged = cli_synth.outdir / f"asset.{key.removesuffix('.zip')}"
    files = {p.relative_to(staged).as_posix() for p in staged.rglob("*") if p.is_file()}
    assert "tools.yaml" in files and "specs/fanout.yaml" in files, files
    assert all(f in ("tools.yaml", "machines.json") or (f.startswith("specs/") and f.endswith(".yaml"))
               for f in files), files


def test_cli_synth_validation_report_has_no_nag_findings(cli_synth: CliRun) -> None:
    assert cli_synth.result.returncode == 0, cli_synth.output
    report = json.loads((cli_synth.outdir / "validation-report.json").read_text())
    violations = [v for r in report["pluginReports"] for v in r["violations"]]
    assert violations == [], violations


def test_deploy_without_credentials_fails_with_awss_own_message(
    tmp_path: Path, proxy: ConnectionCounter, wheelhouse: Path
) -> None:
    env = offline_env(tmp_path, proxy, wheelhouse)
    env["CDK_VALIDATION"] = "false"  # the template is validated by the synth test; this one is about credentials
    before = proxy.count
    result = subprocess.run(
        [str(CDK), "deploy", "--require-approval", "never", "--output", str(tmp_path / "cdk.out"),
         "-c", "skypilotEndpoint=https://skypilot.example.com"],
        capture_output=True, text=True, cwd=REPO_ROOT, env=env, timeout=TIMEOUT, check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "Unable to resolve AWS account" in output or "credentials" in output, output
    assert "Traceback" not in output, output
    assert "Synthesis time" in output, output  # our app ran to the end first
    assert proxy.count == before
