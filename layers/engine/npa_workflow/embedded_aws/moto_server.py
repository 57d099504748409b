"""An embedded AWS for local runs: moto in server mode on 127.0.0.1, in this process.

Server mode (rather than ``mock_aws``) is what lets step subprocesses reach the local S3 and
DynamoDB through ``AWS_ENDPOINT_URL``. This module starts a ``moto.server.ThreadedMotoServer``
and prepares moto's Step Functions interpreter to run executions against it:

- ``stepfunctions.execute_state_machine`` is switched on (``default_user_config``; the server
  runs in this process, so this is the same as ``POST /moto-api/config``);
- ``lambda.use_docker`` stays ``True``: with ``False`` moto answers Lambda invocations with
  canned payloads and never reaches the in-process adapter (:mod:`.moto_lambda`);
- ``MOTO_PORT`` is set to the server's port: the interpreter's internal boto3 clients call
  ``http://localhost:$MOTO_PORT`` and read it at every call, so it must be right before the
  first execution. It is restored on :meth:`MotoServer.stop`.

Use it as a context manager::

    with start_moto_server() as aws:
        sfn = boto3.client("stepfunctions", endpoint_url=aws.endpoint_url, ...)
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import urllib.error
import urllib.request
from typing import Any

__all__ = ["MotoServer", "start_moto_server"]

_HOST = "127.0.0.1"
# How often the server's accept loop looks for a stop request: `socketserver.BaseServer.shutdown()` waits for the
# loop's next look, and werkzeug's default (0.5 s) made every `run` end half a second late. 20 looks a second cost
# nothing measurable.
_STOP_POLL_SECONDS = 0.02
_config_lock = threading.Lock()


class MotoServer:
    """A running moto server: ``endpoint_url``, ``port``, ``stop()``; a context manager."""

    def __init__(self, server: Any, host: str, port: int, restore: dict[str, Any]) -> None:
        self._server = server
        self.host = host
        self.port = port
        self.endpoint_url = f"http://{host}:{port}"
        self._restore = restore
        self._stopped = False
        self._stop_lock = threading.Lock()

    @property
    def wsgi_app(self) -> Any:
        """The WSGI application the HTTP server calls for every request (`embedded_aws.in_process_calls` calls it
        too)."""
        return self._server._server.app

    def client_env(self, region: str = "us-east-1") -> dict[str, str]:
        """Environment for a process (or boto3 session) that must talk to this server."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint_url,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_SESSION_TOKEN": "testing",
            "AWS_DEFAULT_REGION": region,
            "AWS_REGION": region,
        }

    def reset(self) -> None:
        """Drop every resource of every service (``POST /moto-api/reset``)."""
        request = urllib.request.Request(f"{self.endpoint_url}/moto-api/reset", method="POST", data=b"")
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()

    def stop(self) -> None:
        """Stop serving and restore ``MOTO_PORT`` and moto's config. Idempotent."""
        with self._stop_lock:
            if self._stopped:
                return
            self._stopped = True
            try:
                self._server.stop()
            finally:
                _restore_settings(self._restore)

    def __enter__(self) -> MotoServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"MotoServer(endpoint_url={self.endpoint_url!r})"


def _restore_settings(restore: dict[str, Any]) -> None:
    from moto.core.config import default_user_config

    with _config_lock:
        previous_port = restore.get("MOTO_PORT")
        if previous_port is None:
            os.environ.pop("MOTO_PORT", None)
        else:
            os.environ["MOTO_PORT"] = previous_port
        default_user_config["stepfunctions"] = restore["stepfunctions"]
        default_user_config["lambda"] = restore["lambda"]


def _wait_ready(endpoint_url: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        # Any HTTP answer means the server serves. (`/moto-api/data.json` would serialize every resource of every
        # service loaded in this process, which may not even be serializable: a Lambda function a test left.)
        try:
            with urllib.request.urlopen(f"{endpoint_url}/moto-api/config", timeout=2) as response:
                response.read()
                return
        except urllib.error.HTTPError:
            return
        except (urllib.error.URLError, OSError) as exc:
            last = exc
            time.sleep(0.02)
    raise RuntimeError(f"moto server at {endpoint_url} did not answer within {timeout}s: {last}")


def _lazy_url_builders() -> None:
    """Start-up: moto routes Lambda's and S3's REST calls through a werkzeug URL map of every operation, built on
    each service's first request, and werkzeug compiles two URL *builders* (`url_for`) per rule as it adds it: about
    0.25 s of the first Lambda request on this machine, for builders moto never calls (it only matches). Each
    builder is compiled on its first use instead, with the same code, so a caller that builds URLs still gets
    them. Idempotent; process-wide (werkzeug's `Rule`), which only moves work later."""
    from werkzeug.routing.rules import Rule

    compile_builder = Rule._compile_builder
    if getattr(compile_builder, "_npa_lazy", False):
        return

    def lazy_compile_builder(rule: Any, append_unknown: bool = True) -> Any:
        compiled: list[Any] = []

        def build(bound_rule: Any, *args: Any, **kwargs: Any) -> Any:
            if not compiled:
                compiled.append(compile_builder(bound_rule, append_unknown))
            return compiled[0](bound_rule, *args, **kwargs)

        return build

    lazy_compile_builder._npa_lazy = True  # type: ignore[attr-defined]
    Rule._compile_builder = lazy_compile_builder  # type: ignore[method-assign]


def _check_port_free(host: str, port: int) -> None:
    """Fail fast: ``ThreadedMotoServer.start()`` waits forever if its thread cannot bind."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise RuntimeError(
                f"cannot start the local AWS (moto) on {host}:{port}: {exc.strerror or exc}; "
                "choose another port or omit it to use a free one"
            ) from exc


def _skip_batch_models() -> None:
    """Start-up: moto's Step Functions interpreter imports its AWS Batch integration, which needs only
    `moto.batch.utils.JobStatus`, but importing any `moto.batch` submodule runs `moto/batch/__init__.py`, which
    imports the Batch and EC2 models (about 3 s of a 4.7 s first Step Functions request on this machine). The
    twin's machines never run a Batch task, so `moto.batch` is registered as a bare package: its submodules import
    from their files as usual, its `__init__` (the models) never runs. Without this, everything still works,
    slower. A process that already imported `moto.batch` keeps it."""
    import importlib.util
    import sys
    import types

    if "moto.batch" in sys.modules:
        return
    found = importlib.util.find_spec("moto.batch")
    if found is None or not found.submodule_search_locations:
        return
    package = types.ModuleType("moto.batch", "moto.batch without its models (embedded_aws.moto_server)")
    package.__path__ = list(found.submodule_search_locations)
    package.__package__ = "moto.batch"
    package.__spec__ = found
    package.npa_bare = True  # type: ignore[attr-defined]  # (what `patched_versions.replaced_attributes` lists)
    sys.modules["moto.batch"] = package


def _promptly_stopping_server(host: str, port: int, verbose: bool) -> Any:
    """moto's ``ThreadedMotoServer`` whose accept loop notices ``stop()`` within ``_STOP_POLL_SECONDS``."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from moto.server import ThreadedMotoServer
    from werkzeug.serving import make_server

    class PromptlyStoppingMotoServer(ThreadedMotoServer):
        def _server_entry(self) -> None:  # ThreadedMotoServer's own, but with the poll interval
            app = DomainDispatcherApplication(create_backend_app)
            self._server = make_server(self._ip_address, self._port, app, True, request_handler=MotoRequestHandler)
            self._server_ready_event.set()
            self._server.serve_forever(poll_interval=_STOP_POLL_SECONDS)

    return PromptlyStoppingMotoServer(ip_address=host, port=port, verbose=verbose)


def start_moto_server(
    port: int | None = None,
    *,
    host: str = _HOST,
    quiet: bool = True,
    ready_timeout: float = 10.0,
) -> MotoServer:
    """Start moto on ``host:port`` (a free port when ``port`` is None) and return it running.

    ``quiet`` keeps werkzeug's per-request lines and moto's Step Functions failure dumps out of
    the console.
    """
    from npa_workflow.embedded_aws.patched_versions import check_patched_versions

    check_patched_versions()  # the patches below and in the stack are written against exact versions

    from moto.core.config import default_user_config

    from npa_workflow.embedded_aws.moto_lambda import quiet_moto_logs

    if quiet:
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
        quiet_moto_logs()
    _skip_batch_models()
    _lazy_url_builders()

    if port:
        _check_port_free(host, port)
    # Port 0 lets the OS pick a free port at bind time: no window for another process to take it.
    server = _promptly_stopping_server(host, port or 0, verbose=not quiet)
    with _config_lock:
        restore = {
            "MOTO_PORT": os.environ.get("MOTO_PORT"),
            "stepfunctions": dict(default_user_config.get("stepfunctions", {})),
            "lambda": dict(default_user_config.get("lambda", {})),
        }
        default_user_config["stepfunctions"] = {
            **default_user_config.get("stepfunctions", {}),
            "execute_state_machine": True,
        }
        default_user_config["lambda"] = {**default_user_config.get("lambda", {}), "use_docker": True}
    try:
        server.start()
        bound_port = int(server.get_host_and_port()[1])
        os.environ["MOTO_PORT"] = str(bound_port)
        running = MotoServer(server, host, bound_port, restore)
        _wait_ready(running.endpoint_url, ready_timeout)
    except BaseException:
        try:
            server.stop()
        except Exception:  # noqa: BLE001 - best effort while reporting the real error
            pass
        _restore_settings(restore)
        raise
    return running
