"""The process's own AWS calls reach its embedded moto without a socket: the same WSGI app, called in place.

Everything in the twin's process that talks to the embedded AWS — the runtime deploying the stack, the handlers'
engine clients, moto's Step Functions interpreter invoking the Lambda functions — is a botocore client whose
endpoint is the moto server on 127.0.0.1 (`local.moto_server`). Over the socket each call also costs an HTTP
request written and parsed on both sides and a server thread started: about 1.7 ms of CPU a call on this machine,
a dozen calls a wave. While :func:`in_process_calls` is active, a request to a running server's endpoint is handed
to that server's own WSGI application (the very object its HTTP server calls: moto's routing, its handlers, the
twin's durable record and fixes all see it as before) in the calling thread, with the WSGI environment the server
would build from it (path and query, raw URI, headers, body), and its response handed back to botocore as the HTTP
response it would have read. botocore's own work is unchanged (signing, retries on a 5xx, parsing, checksums).

Step processes, `serve`'s clients in other processes and anything not aimed at a running server still go over
HTTP. Seam: `botocore.endpoint.Endpoint._send(self, request)`, the one call that hands a prepared request to the
HTTP session (after the `before-send` event, so a `mock_aws` stub still answers first), process-wide while
active, for every client of every session alike. (Not a `before-send` handler: botocore calls every handler of an
event, so a handler registered twice on one session — a session made while one stack's handler was a built-in,
then given another's — would send each request twice.)
"""

from __future__ import annotations

import contextlib
import io
import logging
import threading
import urllib.parse
from collections.abc import Iterator
from typing import Any

__all__ = ["in_process_calls"]

LOG = logging.getLogger(__name__)
_LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost"})

_apps: dict[int, Any] = {}  # port -> the WSGI app of the running server on it
_lock = threading.Lock()


class _Body(io.BytesIO):
    """A response body as botocore reads one from urllib3 (`read`, `stream`)."""

    def stream(self, **_: Any) -> Iterator[bytes]:
        chunk = self.read()
        while chunk:
            yield chunk
            chunk = self.read()


def _wsgi_text(value: str) -> str:
    # PEP 3333: the environment carries bytes as latin-1 strings (what werkzeug's server does with the raw URI)
    return value.encode("utf-8").decode("latin-1")


def _request_body(body: Any) -> bytes:
    if body is None:
        return b""
    if isinstance(body, str):
        return body.encode("utf-8")
    if isinstance(body, bytes | bytearray):
        return bytes(body)
    return body.read() or b""  # a file or botocore's aws-chunked wrapper (reset by botocore before a retry)


def _environ(request: Any, url: urllib.parse.SplitResult, body: bytes) -> dict[str, Any]:
    """What werkzeug's request handler builds from this request arriving on the socket."""
    target = url.path + (f"?{url.query}" if url.query else "")
    environ: dict[str, Any] = {
        "wsgi.version": (1, 0), "wsgi.url_scheme": url.scheme or "http", "wsgi.input": io.BytesIO(body),
        "wsgi.errors": io.StringIO(), "wsgi.multithread": True, "wsgi.multiprocess": False, "wsgi.run_once": False,
        "REQUEST_METHOD": request.method, "SCRIPT_NAME": "",
        "PATH_INFO": _wsgi_text(urllib.parse.unquote(url.path)), "QUERY_STRING": _wsgi_text(url.query),
        "REQUEST_URI": _wsgi_text(target), "RAW_URI": _wsgi_text(target),
        "REMOTE_ADDR": "127.0.0.1", "REMOTE_PORT": 0, "SERVER_NAME": url.hostname or "127.0.0.1",
        "SERVER_PORT": str(url.port or 80), "SERVER_PROTOCOL": "HTTP/1.1", "HTTP_HOST": url.netloc,
    }
    for name, value in request.headers.items():
        text = value.decode("latin-1") if isinstance(value, bytes) else str(value)
        key = name.upper().replace("-", "_")
        if "_" in name or key == "TRANSFER_ENCODING":  # the body is whole here, not chunked on a wire
            continue
        environ[key if key in ("CONTENT_TYPE", "CONTENT_LENGTH") else f"HTTP_{key}"] = text
    if body or request.method not in ("GET", "HEAD", "DELETE", "OPTIONS"):
        environ["CONTENT_LENGTH"] = str(len(body))  # what http.client sends for a body of known length
    return environ


def _call(app: Any, environ: dict[str, Any]) -> tuple[int, list[tuple[str, str]], bytes]:
    started: dict[str, Any] = {}

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        started["status"], started["headers"] = status, headers
        return lambda data: started.setdefault("written", []).append(data)

    result = app(environ, start_response)
    try:
        body = b"".join([*started.get("written", []), *result])
    finally:
        if hasattr(result, "close"):
            result.close()
    return int(str(started["status"]).split(" ", 1)[0]), list(started["headers"]), body


def _local_app(request: Any) -> tuple[Any, urllib.parse.SplitResult] | None:
    url = urllib.parse.urlsplit(request.url)
    if url.hostname not in _LOCAL_HOSTS:
        return None
    with _lock:
        app = _apps.get(url.port or 80)
    return (app, url) if app is not None else None


def _respond(request: Any, app: Any, url: urllib.parse.SplitResult) -> Any:
    """The response `app` gives `request`, as botocore's HTTP session would return it."""
    from botocore.awsrequest import AWSResponse

    body = _request_body(request.body)
    try:
        status, headers, content = _call(app, _environ(request, url, body))
    except Exception:  # noqa: BLE001 - what werkzeug's server answers for an app that raised
        LOG.exception("embedded AWS: %s %s failed in the app", request.method, request.url)
        status, headers, content = 500, [("Content-Type", "text/plain")], b"Internal Server Error"
    merged: dict[str, str] = {}
    for name, value in headers:
        merged[name] = f"{merged[name]},{value}" if name in merged else value
    return AWSResponse(request.url, status, merged, _Body(content))


@contextlib.contextmanager
def in_process_calls(port: int, app: Any) -> Iterator[None]:
    """While active, this process's botocore requests to 127.0.0.1:`port` (or localhost) go to `app` in place."""
    from botocore.endpoint import Endpoint

    with _lock:
        _apps[port] = app
        original = Endpoint.__dict__["_send"]
        installed = not getattr(original, "npa_in_process", False)
        if installed:
            def _send(self: Any, request: Any) -> Any:
                local = _local_app(request) if _apps else None
                return original(self, request) if local is None else _respond(request, *local)

            _send.npa_in_process = True  # type: ignore[attr-defined]
            Endpoint._send = _send  # type: ignore[method-assign]
    try:
        yield
    finally:
        with _lock:
            _apps.pop(port, None)
            if installed:
                Endpoint._send = original  # type: ignore[method-assign]
