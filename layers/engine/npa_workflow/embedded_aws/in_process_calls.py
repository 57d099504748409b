"""The process's own AWS calls reach its embedded moto without a socket: the same WSGI app, called in place.

Everything in the twin's process that talks to the embedded AWS — the runtime deploying the stack, the handlers'
engine clients, moto's Step Functions interpreter invoking the Lambda functions — is a botocore client whose
endpoint is the moto server on 127.0.0.1 (`embedded_aws.moto_server`). Over the socket each call also costs an HTTP
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

Two more costs of a call that buy nothing in place (together about an eighth of the CPU of a ledger call, measured
with the two on and off in one process):

- **Flask around moto's handler.** moto's server wraps each service's handlers in a Flask app: a request context
  pushed and popped, the URL matched against the service's rules, CORS headers added after, the response built
  twice. In place, the request goes to the handler that app would choose — the same `DomainDispatcherApplication`
  picks the service's app, the rule is matched once per (app, method, path) and kept (bounded), and the handler is
  called exactly as moto's `convert_to_flask_response` calls it (moto's normalized request built from the same
  WSGI environment, its raw URL, its headers; a `ClientError` answered 400 as there) and its answer made the same
  werkzeug response. What is left out only concerns browsers (CORS headers). A path no rule matches, or a rule
  that is not a moto handler, goes through the whole app as before (it answers 404 or moto's API).
- **The SigV4 signature.** moto's server reads a request's credential scope (the access key names the account,
  the scope the region and service) and never checks the signature (the twin does not enable moto's IAM
  enforcement). For a request answered in place, `SigV4Auth` (DynamoDB, Step Functions, Lambda, EventBridge…:
  not S3's signer, whose payload-hash header moto reads) sets the same headers — the date, the session token,
  an `Authorization` with the real credential scope — but a zero signature, skipping the canonical request and
  four HMACs. Seam: `botocore.auth.SigV4Auth.add_auth(self, request)`, for that class exactly.
"""

from __future__ import annotations

import contextlib
import io
import logging
import threading
import urllib.parse
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

__all__ = ["in_process_calls"]

LOG = logging.getLogger(__name__)
_LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost"})

_apps: dict[int, Any] = {}  # port -> the WSGI app of the running server on it
_lock = threading.Lock()
KEPT_ROUTES = 1024  # (service app, method, path) -> moto handler; a stack uses a few dozen paths
_routes: OrderedDict[tuple[int, str, str], Any] = OrderedDict()
_UNSIGNED = "0" * 64  # what a skipped signature reads as: moto never checks it


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


def _handler(backend_app: Any, environ: dict[str, Any]) -> Any:
    """The moto handler `backend_app` routes this request to, or None (no rule, or not a moto handler)."""
    from moto.core.utils import convert_to_flask_response
    from werkzeug.exceptions import HTTPException

    key = (id(backend_app), environ["REQUEST_METHOD"], environ["PATH_INFO"])
    with _lock:
        known = _routes.get(key)
        if known is not None:
            _routes.move_to_end(key)
            return known[1]
    try:
        endpoint, _ = backend_app.url_map.bind_to_environ(environ).match()
    except HTTPException:  # no rule (404/405) or a redirect: the whole app answers that
        return None
    view = backend_app.view_functions.get(endpoint)
    handler = view if isinstance(view, convert_to_flask_response) else None
    with _lock:
        _routes[key] = (backend_app, handler)  # the app kept with it: its id is not reused while kept
        while len(_routes) > KEPT_ROUTES:
            _routes.popitem(last=False)
    return handler


def _dispatch(app: Any, environ: dict[str, Any]) -> tuple[int, list[tuple[str, str]], bytes] | None:
    """moto's answer to the request, from the handler its server's Flask app would call (the module doc), or
    None when only the whole app can answer it."""
    from botocore.exceptions import ClientError
    from moto.core.request import normalize_request
    from moto.moto_api import recorder

    backend_app = app.get_application(environ)
    view = _handler(backend_app, environ)
    if view is None:
        return None
    # What convert_to_flask_response.__call__ does with the request Flask made from this environment.
    request = normalize_request(backend_app.request_class(environ))
    recorder._record_request(request)
    try:
        result = view.callback(request, request.raw_url, dict(request.headers))
    except ClientError as exc:
        result = 400, {}, exc.response["Error"]["Message"]
    status, headers, content = result if len(result) == 3 else (200, {}, result)
    response = backend_app.response_class(response=content, status=status, headers=headers)
    if request.method == "HEAD" and "content-length" in headers:
        response.headers["Content-Length"] = headers["content-length"]
    return _call(response, environ)


def _unsigned_in_place(add_auth: Any) -> Any:
    """`SigV4Auth.add_auth` that, for a request answered in place, sets a signature's headers but not its
    value (the module doc)."""
    from botocore.auth import SIGV4_TIMESTAMP, SigV4Auth, get_current_datetime
    from botocore.exceptions import NoCredentialsError

    def sign(self: Any, request: Any) -> Any:
        if type(self) is not SigV4Auth or not _apps or _local_app(request) is None:
            return add_auth(self, request)
        if self.credentials is None:
            raise NoCredentialsError()
        request.context["timestamp"] = get_current_datetime().strftime(SIGV4_TIMESTAMP)
        self._modify_request_before_signing(request)  # a retry's old header removed; date and token set
        request.headers["Authorization"] = (f"AWS4-HMAC-SHA256 Credential={self.scope(request)}, "
                                            f"SignedHeaders=host;x-amz-date, Signature={_UNSIGNED}")
        return None

    sign.npa_in_process = True  # type: ignore[attr-defined]
    return sign


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
        environ = _environ(request, url, body)
        answered = _dispatch(app, environ) if hasattr(app, "get_application") else None
        status, headers, content = answered if answered is not None else _call(app, environ)
    except Exception as exc:  # noqa: BLE001 - what werkzeug's server answers for an app that raised
        from npa_workflow.storage_errors import is_storage_fault

        if is_storage_fault(exc):  # a full or read-only disk: said once, by the command, with the fix
            LOG.debug("embedded AWS: %s %s failed: %s", request.method, request.url, exc)
        else:
            LOG.exception("embedded AWS: %s %s failed in the app", request.method, request.url)
        status, headers, content = 500, [("Content-Type", "text/plain")], b"Internal Server Error"
    merged: dict[str, str] = {}
    for name, value in headers:
        merged[name] = f"{merged[name]},{value}" if name in merged else value
    return AWSResponse(request.url, status, merged, _Body(content))


@contextlib.contextmanager
def in_process_calls(port: int, app: Any) -> Iterator[None]:
    """While active, this process's botocore requests to 127.0.0.1:`port` (or localhost) go to `app` in place."""
    from botocore.auth import SigV4Auth
    from botocore.endpoint import Endpoint

    with _lock:
        _apps[port] = app
        original = Endpoint.__dict__["_send"]
        original_auth = SigV4Auth.__dict__["add_auth"]
        installed = not getattr(original, "npa_in_process", False)
        if installed:
            def _send(self: Any, request: Any) -> Any:
                local = _local_app(request) if _apps else None
                return original(self, request) if local is None else _respond(request, *local)

            _send.npa_in_process = True  # type: ignore[attr-defined]
            Endpoint._send = _send  # type: ignore[method-assign]
            SigV4Auth.add_auth = _unsigned_in_place(original_auth)  # type: ignore[method-assign]
    try:
        yield
    finally:
        with _lock:
            _apps.pop(port, None)
            if installed:
                Endpoint._send = original  # type: ignore[method-assign]
                SigV4Auth.add_auth = original_auth  # type: ignore[method-assign]
                _routes.clear()
