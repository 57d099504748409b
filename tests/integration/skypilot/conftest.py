"""A real SkyPilot 0.14.1 API server for contract tests, and a recorder of its responses.

The server runs on 127.0.0.1 (a free port) in consolidation mode (the jobs controller runs
inside the server, as on deployed servers) with ``HOME`` in a temporary folder, no cloud and
no cloud credentials: launches get a job id, jobs end FAILED_PRECHECKS, cancels end CANCELLED.
A test-only admin policy (``server_plugins/npa_test_hold_policy.py``) holds a job that asks for
it in STARTING, so that a cancel does not race the job's own failure. The server is sized down
(``SKYPILOT_POD_MEMORY_GB_LIMIT=4``: one jobs controller, one long worker) to start faster.

Responses seen by the tests can be recorded under ``recordings/`` (the protocol double of the
unit tests serves those shapes): ``NPA_SKYPILOT_RECORD=new`` adds shapes not recorded yet,
``NPA_SKYPILOT_RECORD=1`` rewrites them all. A plain test run writes nothing into the tree.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from npa_workflow.adapters.skypilot_api import SkyPilotApi, SkyPilotError

HERE = Path(__file__).resolve().parent
RECORDINGS = HERE / "recordings"
PLUGINS = HERE / "server_plugins"
SERVER_START_TIMEOUT = 180.0
HEALTH_TIMEOUT = 60.0
SERVER_STOP_TIMEOUT = 120.0
START_ATTEMPTS = 3
# How a port taken between our check and the server's bind shows in its log: the API server's own
# message for its HTTP port, and a bare bind error from the request-queue manager's listener.
PORT_TAKEN = ("is already in use by another process", "OSError: [Errno 98] Address already in use")

SERVER_CONFIG = """\
jobs:
  controller:
    consolidation_mode: true
# No cloud may ever be enabled here: kubernetes only, with a kubeconfig that does not exist.
allowed_clouds:
  - kubernetes
# Test-only: holds tasks that ask for it, so a cancel can be tested deterministically.
admin_policy: npa_test_hold_policy.HoldPolicy
"""


@dataclass(frozen=True)
class SkyServer:
    endpoint: str
    home: Path
    port: int
    log_path: Path
    startup_seconds: float

    def log_tail(self, lines: int = 80) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except OSError as e:
            return f"<no server log at {self.log_path}: {e}>"
        return "\n".join(text[-lines:])


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _free_port() -> int:
    """A free port for the API server whose companion queue-manager port is free as well.

    SkyPilot derives a second port from SKYPILOT_API_SERVER_LOCAL_PORT for its request-queue
    manager (``mp_queue.get_queue_manager_port``, in [50000, 60000)) and refuses to start when
    that one is taken. That range lies inside Linux's ephemeral range, so on a busy CI machine a
    client socket can hold it: check both, using SkyPilot's own derivation.
    """
    from unittest import mock

    from sky.server.requests.queues import mp_queue

    for _ in range(50):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        with mock.patch.dict(os.environ, {"SKYPILOT_API_SERVER_LOCAL_PORT": str(port)}):
            queue_port = mp_queue.get_queue_manager_port()
        if queue_port != port and _bindable(queue_port):
            return port
    raise RuntimeError("no free port pair for a SkyPilot API server after 50 tries")


def _server_env(home: Path, port: int) -> dict[str, str]:
    """A minimal environment: no cloud credentials of the developer's machine can leak in."""
    venv_bin = str(Path(sys.executable).parent)
    env = {
        "PATH": os.pathsep.join([venv_bin, os.environ.get("PATH", "/usr/bin:/bin")]),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONPATH": str(PLUGINS),
        "SKYPILOT_API_SERVER_LOCAL_PORT": str(port),
        "SKYPILOT_DISABLE_USAGE_COLLECTION": "1",
        # Size the server for a test: 1 jobs controller, 1 long worker (starts faster).
        "SKYPILOT_POD_MEMORY_GB_LIMIT": "4",
        # Belt and braces against an instance role or a developer kubeconfig.
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_CONFIG_FILE": str(home / "no-aws-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(home / "no-aws-credentials"),
        "KUBECONFIG": str(home / "no-kubeconfig"),
        "NO_COLOR": "1",
    }
    if "TMPDIR" in os.environ:
        env["TMPDIR"] = os.environ["TMPDIR"]
    return env


@pytest.fixture(scope="session")
def skypilot_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SkyServer]:
    if importlib.util.find_spec("sky") is None:
        pytest.skip("the skypilot package is not installed (pip install -e '.[dev]')")
    sky_bin = Path(sys.executable).with_name("sky")
    if not sky_bin.exists():
        pytest.fail(f"skypilot is importable but its CLI is missing at {sky_bin}")
    if shutil.which("rsync") is None:
        pytest.fail("a SkyPilot server in consolidation mode needs rsync: run scripts/install-system-deps.sh")

    started = time.monotonic()
    for attempt in range(1, START_ATTEMPTS + 1):
        home = tmp_path_factory.mktemp("skypilot-home")
        (home / ".sky").mkdir()
        (home / ".sky" / "config.yaml").write_text(SERVER_CONFIG)
        port = _free_port()
        env = _server_env(home, port)
        server = SkyServer(
            endpoint=f"http://127.0.0.1:{port}",
            home=home,
            port=port,
            log_path=home / ".sky" / "api_server" / "server.log",
            startup_seconds=0.0,
        )
        try:
            proc = subprocess.run(
                [str(sky_bin), "api", "start", "--host", "127.0.0.1", "--port", str(port)],
                env=env,
                cwd=home,
                capture_output=True,
                text=True,
                timeout=SERVER_START_TIMEOUT,
            )
        except subprocess.TimeoutExpired as e:
            _stop(sky_bin, env, home)
            pytest.fail(
                f"`sky api start` did not return within {SERVER_START_TIMEOUT:.0f} s\n"
                f"stdout:\n{e.stdout}\nstderr:\n{e.stderr}\nserver log:\n{server.log_tail()}"
            )
        if proc.returncode == 0:
            break
        _stop(sky_bin, env, home)
        # A port checked free can still be taken before the server binds it (another process's
        # client socket): that, and only that, is worth a fresh port pair.
        log_tail = server.log_tail(lines=1000)
        if attempt < START_ATTEMPTS and any(marker in log_tail for marker in PORT_TAKEN):
            print(f"\nSkyPilot API server port taken between check and bind; retrying ({attempt})")
            continue
        pytest.fail(
            f"`sky api start` failed with exit code {proc.returncode}\nstdout:\n{proc.stdout}\n"
            f"stderr:\n{proc.stderr}\nserver log:\n{server.log_tail()}"
        )
    if not server.log_path.exists():
        # `sky api start` happily reports success when some other server owns the port.
        _stop(sky_bin, env, home)
        pytest.fail(f"no server log in {server.log_path}: is another server on port {port}?\n{proc.stdout}")

    client = SkyPilotApi(server.endpoint, retry_deadline=5.0)
    health_deadline = time.monotonic() + HEALTH_TIMEOUT
    while True:
        try:
            client.health()
            break
        except SkyPilotError as e:
            if time.monotonic() > health_deadline:
                _stop(sky_bin, env, home)
                pytest.fail(
                    f"SkyPilot API server on port {port} not healthy within {HEALTH_TIMEOUT:.0f} s: {e}\n"
                    f"server log:\n{server.log_tail()}"
                )
            time.sleep(0.5)
    server = SkyServer(**{**server.__dict__, "startup_seconds": time.monotonic() - started})
    print(f"\nSkyPilot API server {server.endpoint} up in {server.startup_seconds:.1f} s (HOME={home})")
    try:
        yield server
    finally:
        stopped = time.monotonic()
        _stop(sky_bin, env, home)
        print(f"\nSkyPilot API server stopped in {time.monotonic() - stopped:.1f} s")


def _stop(sky_bin: Path, env: dict[str, str], home: Path) -> None:
    (home / ".npa-test-release-holds").touch()
    try:
        proc = subprocess.run(
            [str(sky_bin), "api", "stop"],
            env=env,
            cwd=home,
            capture_output=True,
            text=True,
            timeout=SERVER_STOP_TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        print(f"WARNING: `sky api stop` did not return within {SERVER_STOP_TIMEOUT:.0f} s", file=sys.stderr)
        return
    if proc.returncode != 0:
        print(f"WARNING: `sky api stop` failed: {proc.stdout}\n{proc.stderr}", file=sys.stderr)


# ---------------------------------------------------------------------------------------------
# Recorder
# ---------------------------------------------------------------------------------------------

_PICKLED_KEYS = {"entrypoint", "request_body", "object", "handle"}
_KEPT_HEADERS = ("content-type", "x-skypilot-api-version", "x-skypilot-version", "x-skypilot-request-id")


class Recorder:
    """Keeps the first real exchange of each kind, sanitized, and writes them as JSON files."""

    def __init__(self, home_marker: str = "") -> None:
        self.exchanges: dict[str, dict[str, Any]] = {}
        self.home_marker = home_marker

    def add(
        self, method: str, target: str, data: bytes | None, status: int, headers: dict[str, str], body: bytes
    ) -> None:
        path, _, query = target.partition("?")
        try:
            payload = json.loads(body) if body else None
        except ValueError:
            payload = body.decode("utf-8", "replace")
        key = self._key(method, path, status, payload)
        if key in self.exchanges:
            return
        self.exchanges[key] = {
            "request": {
                "method": method,
                "path": path,
                "query": query,
                "body": json.loads(data) if data else None,
            },
            "response": {
                "status": status,
                "headers": {k: v for k, v in headers.items() if k in _KEPT_HEADERS},
                "body": payload,
            },
        }

    @staticmethod
    def _key(method: str, path: str, status: int, payload: Any) -> str:
        if path == "/api/status" and isinstance(payload, list) and payload:
            first = payload[0]
            return f"api_status_{first.get('name')}_{first.get('status')}"
        if path == "/api/get":
            name = None
            if isinstance(payload, dict):
                detail = payload.get("detail")
                name = payload.get("name") or (detail.get("name") if isinstance(detail, dict) else None)
            if name == "sky.jobs.queue_v2" and status == 200:
                # One recording per set of row statuses (STARTING, FAILED_PRECHECKS, CANCELLED, none).
                value = json.loads(payload.get("return_value") or "null")
                rows = value.get("jobs") if isinstance(value, dict) else value
                statuses = sorted({r.get("status") for r in rows or []})
                return f"api_get_{name}_{status}_{'_'.join(statuses) or 'empty'}"
            return f"api_get_{name}_{status}" if name else f"api_get_{status}"
        slug = re.sub(r"[^a-z0-9]+", "_", path.lower()).strip("_")
        return f"{method.lower()}_{slug}_{status}"

    def sanitize(self, value: Any) -> Any:
        if isinstance(value, dict):
            out = {}
            for k, v in value.items():
                if k in _PICKLED_KEYS and isinstance(v, str) and _looks_pickled(v):
                    out[k] = f"<pickled, {len(v)} chars, omitted>"
                elif k in ("return_value", "error") and isinstance(v, str) and v not in ("null", ""):
                    try:
                        out[k] = json.dumps(self.sanitize(json.loads(v)))
                    except ValueError:
                        out[k] = self.sanitize(v)
                else:
                    out[k] = self.sanitize(v)
            return out
        if isinstance(value, list):
            return [self.sanitize(v) for v in value]
        if isinstance(value, str) and self.home_marker:
            return value.replace(self.home_marker, "<HOME>")
        return value

    def write(self, directory: Path, *, overwrite: bool) -> list[Path]:
        directory.mkdir(parents=True, exist_ok=True)
        written = []
        for key, exchange in sorted(self.exchanges.items()):
            path = directory / f"{key}.json"
            if path.exists() and not overwrite:
                continue
            path.write_text(json.dumps(self.sanitize(exchange), indent=2, sort_keys=True) + "\n")
            written.append(path)
        return written


def _looks_pickled(value: str) -> bool:
    if not value.startswith("gAS"):
        return False
    try:
        base64.b64decode(value[:64] + "=" * (-len(value[:64]) % 4))
    except ValueError:
        return False
    return True


class RecordingSkyPilotApi(SkyPilotApi):
    """The production client, with every HTTP exchange handed to a :class:`Recorder`."""

    def __init__(self, *args: Any, recorder: Recorder, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._recorder = recorder

    def _exchange(self, method, target, data, headers):  # type: ignore[override]
        response = super()._exchange(method, target, data, headers)
        self._recorder.add(
            method, target[len(self._base_path) :], data, response.status, response.headers, response.body
        )
        return response

    def _stream(self, path, body, sink, wire_budget, timeout):  # type: ignore[override]
        # A streamed answer (a job's log) is recorded whole: its body is the log text the server sent.
        seen: list[bytes] = []

        def both(chunk: bytes) -> None:
            seen.append(chunk)
            sink(chunk)

        request_id, complete = super()._stream(path, body, both, wire_budget, timeout)
        data = json.dumps(body).encode()
        self._recorder.add("POST", path, data, 200, {"x-skypilot-request-id": request_id or ""}, b"".join(seen))
        return request_id, complete


@pytest.fixture(scope="session")
def recorder(skypilot_server: SkyServer) -> Iterator[Recorder]:
    rec = Recorder(home_marker=str(skypilot_server.home))
    yield rec
    mode = os.environ.get("NPA_SKYPILOT_RECORD", "")
    if mode not in ("1", "new"):
        return
    written = rec.write(RECORDINGS, overwrite=mode == "1")
    if written:
        print(f"\nrecorded {len(written)} SkyPilot responses under {RECORDINGS}")


@pytest.fixture(scope="session")
def sky_api(skypilot_server: SkyServer, recorder: Recorder) -> SkyPilotApi:
    return RecordingSkyPilotApi(
        skypilot_server.endpoint,
        recorder=recorder,
        retry_deadline=20.0,
        request_timeout=120.0,
        read_timeout=60.0,
    )
