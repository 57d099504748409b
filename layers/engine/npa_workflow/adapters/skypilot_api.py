"""A small client for a SkyPilot API server's REST protocol (SkyPilot 0.14.1, API version 62).

The full ``skypilot`` SDK is far too big and slow to import inside a Lambda, so this module
speaks the server's own, versioned wire protocol with the standard library only:

* every call sends ``X-SkyPilot-API-Version: 62`` and ``X-SkyPilot-Version: 0.14.1``;
* every ``POST`` is asynchronous: the server answers with a request id (header
  ``X-Skypilot-Request-ID``), ``GET /api/status`` reports the request's status without
  blocking, and ``GET /api/get`` (called only once the status is terminal) returns its result;
* every call has an explicit connect and read timeout; HTTP 503 and connection failures are
  retried with capped, jittered exponential backoff until a deadline, everything else is
  raised at once as one of the exceptions below;
* without server auth the server trusts the user named in the body, so every body carries the
  same constant user: every caller sees the same jobs.

The bearer token (a service-account token, ``sky_…``) never appears in a log line, an
exception or a ``repr``.

Contract-tested against a real server in ``tests/integration/skypilot/``.
"""

from __future__ import annotations

import base64
import http.client
import json
import logging
import os
import random
import re
import sys
import time
import urllib.parse
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from npa_workflow.engine import budget
from npa_workflow.protocol import environment

__all__ = [
    "API_VERSION",
    "SKYPILOT_VERSION",
    "JobOutcome",
    "FailureClass",
    "HealthInfo",
    "JobLogs",
    "JobRow",
    "RequestResult",
    "SkyPilotApi",
    "SkyPilotError",
    "SkyPilotUnavailable",
    "SkyPilotAuthError",
    "SkyPilotRequestFailed",
    "SkyPilotNotFound",
    "SkyPilotRequestTimeout",
    "classify_job_status",
    "classify_job",
    "classify_request_error",
    "classify_error",
]

logger = logging.getLogger(__name__)

#: Protocol version of SkyPilot 0.14.1's API server. Bump only together with the contract tests.
API_VERSION = 62
SKYPILOT_VERSION = "0.14.1"

#: The one user every caller acts as when the server does not authenticate requests.
#: ``SKYPILOT_USER_ID`` must match ``[a-zA-Z0-9][a-zA-Z0-9-]*``; it looks like SkyPilot's hashes.
DEFAULT_USER_ID = "npawflow"
DEFAULT_USER_NAME = "npa-workflow"

ENV_TOKEN = "SKYPILOT_SERVICE_ACCOUNT_TOKEN"

REQUEST_ID_HEADER = "x-skypilot-request-id"

# ---------------------------------------------------------------------------------------------
# Statuses and their classification (pure functions)
# ---------------------------------------------------------------------------------------------

JobOutcome = Literal["running", "succeeded", "failed", "infrastructure_failed", "configuration_failed", "cancelled"]
FailureClass = Literal["configuration_failed", "infrastructure_failed"]

REQUEST_ACTIVE_STATUSES = frozenset({"PENDING", "WAITING", "RUNNING"})
REQUEST_TERMINAL_STATUSES = frozenset({"SUCCEEDED", "FAILED", "CANCELLED"})

_JOB_OUTCOMES: dict[str, JobOutcome] = {
    "SUCCEEDED": "succeeded",
    "FAILED": "failed",
    "FAILED_SETUP": "failed",
    "FAILED_NO_RESOURCE": "infrastructure_failed",
    "FAILED_CONTROLLER": "infrastructure_failed",
    "FAILED_PRECHECKS": "configuration_failed",
    "CANCELLED": "cancelled",
    "PENDING": "running",
    "SUBMITTED": "running",  # deprecated alias of PENDING, still in 0.14.1's enum
    "STARTING": "running",
    "RUNNING": "running",
    "RECOVERING": "running",
    "WINDING_DOWN": "running",  # 0.14.1: the job's tasks are done, the controller is cleaning up
    "CANCELLING": "running",
}
JOB_IN_PROGRESS_STATUSES = frozenset(s for s, o in _JOB_OUTCOMES.items() if o == "running")
JOB_TERMINAL_STATUSES = frozenset(_JOB_OUTCOMES) - JOB_IN_PROGRESS_STATUSES


def classify_job_status(status: str) -> JobOutcome:
    """Map one managed-job status (a queue row's ``status``) to our outcome vocabulary.

    FAILED / FAILED_SETUP are the user's code; FAILED_NO_RESOURCE / FAILED_CONTROLLER are
    capacity or SkyPilot itself; FAILED_PRECHECKS is bad configuration or credentials.
    An unknown status is a protocol change and raises ``ValueError``.
    """
    try:
        return _JOB_OUTCOMES[status.upper()]
    except KeyError:
        raise ValueError(
            f"unknown SkyPilot managed-job status {status!r} (this client speaks SkyPilot "
            f"{SKYPILOT_VERSION}, API version {API_VERSION})"
        ) from None


def classify_job(rows: Iterable[JobRow]) -> JobOutcome:
    """The outcome of one managed job from all of its rows (a pipeline has one row per task).

    In progress while any task is; succeeded when every task did; otherwise the outcome of the
    first task (by ``task_id``) that did not succeed and was not merely cancelled because an
    earlier task failed; ``cancelled`` when every unfinished task was cancelled.
    """
    ordered = sorted(rows, key=lambda r: r.task_id if r.task_id is not None else -1)
    if not ordered:
        raise ValueError("classify_job needs at least one row")
    outcomes = [r.outcome for r in ordered]
    if "running" in outcomes:
        return "running"
    if all(o == "succeeded" for o in outcomes):
        return "succeeded"
    for outcome in outcomes:
        if outcome not in ("succeeded", "cancelled"):
            return outcome
    return "cancelled"


_CONFIGURATION_ERRORS = frozenset(
    {
        "NoCloudAccessError",
        "InvalidSkyPilotConfigError",
        "InvalidCloudConfigs",
        "InvalidCloudCredentials",
        "CloudUserIdentityError",
        "ClusterOwnerIdentityMismatchError",
        "PermissionDeniedError",
        "NoWorkspaceAccessError",
        "UserRequestRejectedByPolicy",
        "ProvisionPrechecksError",
        "NotSupportedError",
        "InvalidClusterNameError",
        "InvalidWorkspaceNameError",
        "WorkspaceAmbiguousError",
        "ClusterDoesNotExist",
        "PoolDoesNotExistError",
        "VolumeNotFoundError",
        "StorageSpecError",
        "StorageSourceError",
        "StorageNameError",
        "StorageModeError",
        "KubernetesValidationError",
        "APIVersionMismatchError",
        "APINotSupportedError",
        "ApiServerAuthenticationError",
        "GitError",
        "ValueError",
        "TypeError",
        "KeyError",
        "AttributeError",
        "AssertionError",
        "FileNotFoundError",
        "PermissionError",
        "NotImplementedError",
        "JSONDecodeError",
        "ValidationError",
    }
)
_INFRASTRUCTURE_ERRORS = frozenset(
    {
        "ResourcesUnavailableError",
        "KubeAPIUnreachableError",
        "ManagedJobReachedMaxRetriesError",
        "ClusterNotUpError",
        "ClusterSetUpError",
        "CachedClusterUnavailable",
        "FetchClusterInfoError",
        "ClusterStatusFetchingError",
        "NetworkError",
        "AWSAzFetchingError",
        "ServerTemporarilyUnavailableError",
        "ApiServerConnectionError",
        "RequestInterruptedError",
        "ExecutionRetryableError",
        "ExecutionPausedError",
        "ExecutionPoolFullError",
        "ConcurrentWorkerExhaustedError",
        "SkyletInternalError",
        "SkyletUnavailableError",
        "StorageBucketCreateError",
        "StorageBucketGetError",
        "StorageUploadError",
        "CommandError",
        "ConnectionError",
        "ConnectionResetError",
        "ConnectionRefusedError",
        "TimeoutError",
        "OSError",
        "RuntimeError",
    }
)
_CONFIGURATION_HINTS = re.compile(
    r"(auth|permission|credential|forbidden|invalid|validation|yaml|schema|config|valueerror)",
    re.IGNORECASE,
)


def classify_request_error(type_name: str | None) -> FailureClass:
    """Classify the error ``type`` of a FAILED SkyPilot request (e.g. ``NoCloudAccessError``).

    Bad input, missing cloud access and authorisation problems are ``configuration_failed``
    (retrying cannot help); capacity, transport and server-side trouble are
    ``infrastructure_failed``. A type we do not know is treated as infrastructure: the
    infrastructure retry budget is finite and a relaunch always reconciles by job name first.
    """
    name = (type_name or "").rsplit(".", 1)[-1].strip()
    if name in _CONFIGURATION_ERRORS:
        return "configuration_failed"
    if name in _INFRASTRUCTURE_ERRORS:
        return "infrastructure_failed"
    if _CONFIGURATION_HINTS.search(name):
        return "configuration_failed"
    return "infrastructure_failed"


def classify_error(error: BaseException) -> FailureClass:
    """Classify an exception raised by this client (or a transport error) for retry policy."""
    if isinstance(error, SkyPilotAuthError):
        return "configuration_failed"
    if isinstance(error, SkyPilotRequestFailed):
        return classify_request_error(error.error_type)
    if isinstance(error, SkyPilotError) and error.status_code is not None:
        if 400 <= error.status_code < 500 and error.status_code not in (404, 408, 409, 429):
            return "configuration_failed"
    return "infrastructure_failed"


# ---------------------------------------------------------------------------------------------
# Exceptions: one hierarchy
# ---------------------------------------------------------------------------------------------


class SkyPilotError(Exception):
    """Anything that went wrong talking to the SkyPilot API server."""

    def __init__(self, message: str, *, status_code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status_code = status_code


class SkyPilotUnavailable(SkyPilotError):
    """The server could not be reached (connection errors, timeouts, HTTP 503) within the deadline.

    ``maybe_received`` is true when the request was fully sent before the transport failed:
    the server may have acted on it (for a launch: reconcile by job name before retrying).
    """

    def __init__(
        self,
        message: str,
        *,
        attempts: int = 1,
        maybe_received: bool = False,
        status_code: int | None = None,
    ) -> None:
        super().__init__(message, status_code=status_code)
        self.attempts = attempts
        self.maybe_received = maybe_received


class SkyPilotAuthError(SkyPilotError):
    """HTTP 401/403, a server that asks for authentication, or a token that cannot be read."""


class SkyPilotRequestFailed(SkyPilotError):
    """A request ended FAILED; carries the server's error ``type`` and ``message``."""

    def __init__(
        self,
        message: str,
        *,
        request_id: str,
        error_type: str,
        error_message: str,
        request_name: str | None = None,
    ) -> None:
        super().__init__(message, status_code=500)
        self.request_id = request_id
        self.error_type = error_type
        self.error_message = error_message
        self.request_name = request_name

    @property
    def failure_class(self) -> FailureClass:
        return classify_request_error(self.error_type)


class SkyPilotNotFound(SkyPilotError):
    """The server does not know the request id (never existed, or purged: kept 24 h by default)."""

    def __init__(self, message: str, *, request_id: str) -> None:
        super().__init__(message, status_code=404)
        self.request_id = request_id


class SkyPilotRequestTimeout(SkyPilotError):
    """A request we waited for did not reach a terminal status in time (it may still finish)."""

    def __init__(self, message: str, *, request_id: str, last_status: str | None) -> None:
        super().__init__(message)
        self.request_id = request_id
        self.last_status = last_status


# ---------------------------------------------------------------------------------------------
# Typed results
# ---------------------------------------------------------------------------------------------

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


def _plain(text: Any) -> str | None:
    """Server messages carry terminal colour codes (e.g. ``\\x1b[1msky check\\x1b[0m``)."""
    if text is None:
        return None
    return _ANSI.sub("", str(text))


def _opt_int(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _opt_float(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class HealthInfo:
    status: str
    api_version: str | None
    version: str | None
    commit: str | None
    user: dict[str, Any] | None
    raw: dict[str, Any] = field(repr=False, compare=False)

    @property
    def healthy(self) -> bool:
        return self.status == "healthy"


@dataclass(frozen=True)
class JobRow:
    """One row of ``/jobs/queue/v2``: one task of one managed job."""

    job_id: int
    task_id: int | None
    job_name: str | None
    task_name: str | None
    status: str
    submitted_at: float | None
    start_at: float | None
    end_at: float | None
    failure_reason: str | None
    details: str | None
    recovery_count: int | None
    user_name: str | None
    user_hash: str | None
    raw: dict[str, Any] = field(repr=False, compare=False)

    @property
    def outcome(self) -> JobOutcome:
        return classify_job_status(self.status)

    @property
    def terminal(self) -> bool:
        return self.outcome != "running"

    @classmethod
    def from_wire(cls, raw: Mapping[str, Any]) -> JobRow:
        return cls(
            job_id=int(raw["job_id"]),
            task_id=_opt_int(raw.get("task_id")),
            job_name=raw.get("job_name"),
            task_name=raw.get("task_name"),
            status=str(raw.get("status")),
            submitted_at=_opt_float(raw.get("submitted_at")),
            start_at=_opt_float(raw.get("start_at")),
            end_at=_opt_float(raw.get("end_at")),
            failure_reason=_plain(raw.get("failure_reason")),
            details=_plain(raw.get("details")),
            recovery_count=_opt_int(raw.get("recovery_count")),
            user_name=raw.get("user_name"),
            user_hash=raw.get("user_hash"),
            raw=dict(raw),
        )


@dataclass(frozen=True)
class RequestResult:
    """The result of one server request. ``return_value`` is the parsed JSON (None until done)."""

    request_id: str
    status: str
    name: str | None = None
    return_value: Any = None

    @property
    def done(self) -> bool:
        return self.status in REQUEST_TERMINAL_STATUSES


@dataclass(frozen=True)
class JobLogs:
    """The tail of one managed job's log, as the server streamed it (control lines removed).

    ``skipped_bytes``: bytes received before the tail kept (the budget cut them); ``complete`` is
    false when the stream was cut off at the wire budget or the deadline before the server ended it.
    """

    job_id: int
    text: str
    skipped_bytes: int
    complete: bool
    request_id: str | None


# SkyPilot's own control lines inside a streamed log (spinner updates, heartbeats): `<sky-payload…>…</sky-payload>`.
_PAYLOAD_LINE = re.compile(r"<sky-payload[^>]*>.*?</sky-payload>\r?\n?")


def _log_text(data: bytes) -> str:
    """Whole lines of a streamed log as text, without SkyPilot's control lines (`<sky-payload…>`) and colours."""
    return _plain(_PAYLOAD_LINE.sub("", data.decode("utf-8", "replace"))) or ""


class _LogLines:
    """A streamed log handed on as it arrives, whole lines at a time (one endless line in 64 KiB pieces)."""

    PIECE = 64 * 1024

    def __init__(self, sink: Callable[[str], None]) -> None:
        self.sink = sink
        self._partial = b""

    def add(self, chunk: bytes) -> None:
        data = self._partial + chunk
        cut = data.rfind(b"\n") + 1
        if cut == 0 and len(data) > self.PIECE:
            cut = len(data)
        self._partial = data[cut:]
        self._emit(data[:cut])

    def end(self) -> None:
        self._emit(self._partial)
        self._partial = b""

    def _emit(self, data: bytes) -> None:
        text = _log_text(data) if data else ""
        if text:
            self.sink(text)


class _LogTail:
    """The last ``keep`` bytes of a streamed log, line by line, without SkyPilot's control lines and colours."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.skipped = 0  # bytes of log text dropped from the front to stay within ``keep``
        self._partial = b""
        self._kept = bytearray()

    def add(self, chunk: bytes) -> None:
        data = self._partial + chunk
        cut = data.rfind(b"\n") + 1
        self._partial = data[cut:]
        if len(self._partial) > self.keep:  # one endless line: keep its end only
            self.skipped += len(self._partial) - self.keep
            self._partial = self._partial[-self.keep:]
        self._keep(data[:cut])

    def end(self) -> None:
        self._keep(self._partial)
        self._partial = b""

    def _keep(self, data: bytes) -> None:
        if not data:
            return
        self._kept += _log_text(data).encode()
        if len(self._kept) > self.keep:
            self.skipped += len(self._kept) - self.keep
            del self._kept[: len(self._kept) - self.keep]

    def text(self) -> str:
        return self._kept.decode("utf-8", "replace")


#: Queue fields we ask for (the rest of a row is heavy: the task YAML, paths, pickles).
QUEUE_FIELDS = (
    "job_id",
    "task_id",
    "job_name",
    "task_name",
    "status",
    "submitted_at",
    "start_at",
    "end_at",
    "failure_reason",
    "details",
    "recovery_count",
    "user_name",
    "user_hash",
    "schedule_state",
)


def parse_launch_job_ids(return_value: Any) -> list[int]:
    """Job ids of a finished ``jobs.launch`` request: ``{"job_id": [5], "handle": …}``."""
    if not isinstance(return_value, Mapping) or "job_id" not in return_value:
        raise SkyPilotError(f"unexpected jobs.launch result shape: {type(return_value).__name__}")
    job_id = return_value["job_id"]
    ids = job_id if isinstance(job_id, list) else [job_id]
    if not ids or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        raise SkyPilotError(f"jobs.launch returned no job id: {job_id!r}")
    return [int(i) for i in ids]


def parse_queue_rows(return_value: Any) -> list[JobRow]:
    """Rows of a finished ``jobs.queue_v2`` request (``{"jobs": [...], ...}`` or a bare list)."""
    jobs = return_value.get("jobs") if isinstance(return_value, Mapping) else return_value
    if not isinstance(jobs, list):
        raise SkyPilotError(f"unexpected jobs.queue_v2 result shape: {type(return_value).__name__}")
    return [JobRow.from_wire(j) for j in jobs]


# ---------------------------------------------------------------------------------------------
# Task documents: make the job name authoritative
# ---------------------------------------------------------------------------------------------

_PIPELINE_HEADER_KEYS = ({"name"}, {"name", "execution"})


def with_job_name(task_yaml: str, name: str) -> str:
    """Return ``task_yaml`` so that the managed job it creates is named exactly ``name``.

    The server names a managed job after the YAML (the header document's ``name``, or the
    single task's ``name``); the ``name`` field of the launch body is ignored by 0.14.1 (the
    SDK rewrites the DAG's name client side). A document whose header already carries a name
    must carry this one; otherwise a ``name`` header document is prepended, which leaves a
    single task or a pipeline's tasks unchanged.
    """
    import yaml  # lazy: only launches need it

    if not name or not isinstance(name, str):
        raise ValueError("a managed job needs a non-empty name")
    try:
        docs = list(yaml.safe_load_all(task_yaml))
    except yaml.YAMLError as e:
        raise ValueError(f"task YAML does not parse: {e}") from None
    docs = [d for d in docs if d is not None]
    if not docs or not all(isinstance(d, dict) for d in docs):
        raise ValueError("task YAML must be one or more mapping documents")
    first = docs[0]
    is_group = len(docs) > 1 and first.get("execution") == "parallel"
    is_header = len(docs) > 1 and set(first) in _PIPELINE_HEADER_KEYS
    if is_group or is_header:
        if first.get("name") != name:
            raise ValueError(
                f"the task YAML's header names the job {first.get('name')!r}, but it is launched "
                f"as {name!r}: render the header with name {name!r}"
            )
        return task_yaml
    if len(docs) == 1 and first.get("name") == name:
        return task_yaml
    header = f"name: {json.dumps(name)}\n"
    if task_yaml.lstrip().startswith("---"):
        return header + task_yaml
    return header + "---\n" + task_yaml


# ---------------------------------------------------------------------------------------------
# The client
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Response:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        if not self.body:
            return None
        return json.loads(self.body)


class _TransportError(Exception):
    """Internal: one attempt failed at the transport level."""

    def __init__(self, cause: BaseException, *, sent: bool) -> None:
        super().__init__(f"{type(cause).__name__}: {cause}")
        self.cause = cause
        self.sent = sent


class SkyPilotApi:
    """REST client for one SkyPilot API server.

    ``connect_timeout`` and ``read_timeout`` bound every HTTP exchange; ``retry_deadline``
    bounds the retries of one call (503 and transport errors); ``request_timeout`` bounds how
    long :meth:`queue`, :meth:`cancel` and friends wait for their server request to finish.
    """

    def __init__(
        self,
        endpoint: str,
        token: str | None = None,
        *,
        connect_timeout: float = 5.0,
        read_timeout: float = 30.0,
        retry_deadline: float = 30.0,
        request_timeout: float = 90.0,
        backoff_initial: float = 0.5,
        backoff_max: float = 8.0,
        poll_interval: float = 0.25,
        poll_interval_max: float = 2.0,
        user_id: str = DEFAULT_USER_ID,
        user_name: str = DEFAULT_USER_NAME,
    ) -> None:
        parts = urllib.parse.urlsplit(endpoint.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"SkyPilot API server endpoint must be an http(s) URL, got {_safe_url(endpoint)!r}")
        self._scheme = parts.scheme
        self._host = parts.hostname
        self._port = parts.port or (443 if parts.scheme == "https" else 80)
        self._base_path = parts.path.rstrip("/")
        host_for_url = f"[{self._host}]" if ":" in self._host else self._host
        default_port = (parts.scheme == "https" and self._port == 443) or (parts.scheme == "http" and self._port == 80)
        netloc = host_for_url if default_port else f"{host_for_url}:{self._port}"
        self.endpoint = f"{parts.scheme}://{netloc}{self._base_path}"

        self._secrets: list[str] = []
        self._auth_header: str | None = None
        self._auth_kind = "none"
        if token:
            token = token.strip()
            self._secrets.append(token)
            self._auth_header = f"Bearer {token}"
            self._auth_kind = "bearer"
        elif parts.username is not None:
            user = urllib.parse.unquote(parts.username)
            password = urllib.parse.unquote(parts.password or "")
            if password:
                self._secrets.append(password)
            basic = base64.b64encode(f"{user}:{password}".encode()).decode()
            self._secrets.append(basic)
            self._auth_header = f"Basic {basic}"
            self._auth_kind = "basic"

        self.connect_timeout = float(connect_timeout)
        self.read_timeout = float(read_timeout)
        self.retry_deadline = float(retry_deadline)
        self.request_timeout = float(request_timeout)
        self.backoff_initial = float(backoff_initial)
        self.backoff_max = float(backoff_max)
        self.poll_interval = float(poll_interval)
        self.poll_interval_max = float(poll_interval_max)
        self.user_id = user_id
        self.user_name = user_name

    # -- construction -------------------------------------------------------------------------

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None, **kwargs: Any) -> SkyPilotApi:
        """Build a client from ``SKYPILOT_API_SERVER_ENDPOINT`` and a token.

        The token comes from Secrets Manager when ``SKYPILOT_TOKEN_SECRET_ARN`` is set (the
        secret string is the token, or a JSON object with a ``token`` key), otherwise from
        ``SKYPILOT_SERVICE_ACCOUNT_TOKEN`` (local development), otherwise there is none.
        """
        env = os.environ if environ is None else environ
        endpoint = (env.get(environment.SKYPILOT_ENDPOINT) or "").strip()
        if not endpoint:
            raise SkyPilotError(
                f"{environment.SKYPILOT_ENDPOINT} is not set: set it to the SkyPilot API server URL, e.g. https://skypilot.example.com"
            )
        secret_arn = (env.get(environment.SKYPILOT_TOKEN_SECRET_ARN) or "").strip()
        if secret_arn:
            token: str | None = _token_from_secrets_manager(secret_arn)
        else:
            token = (env.get(ENV_TOKEN) or "").strip() or None
        return cls(endpoint, token, **kwargs)

    def __repr__(self) -> str:
        return (
            f"SkyPilotApi(endpoint={self.endpoint!r}, auth={self._auth_kind!r}, "
            f"connect_timeout={self.connect_timeout}, read_timeout={self.read_timeout}, "
            f"retry_deadline={self.retry_deadline})"
        )

    __str__ = __repr__

    # -- public API ---------------------------------------------------------------------------

    def health(self) -> HealthInfo:
        """``GET /api/health``. Raises :class:`SkyPilotAuthError` if the server wants a login."""
        data = self._call("GET", "/api/health", idempotent=True).json() or {}
        if not isinstance(data, dict):
            raise SkyPilotError("unexpected /api/health response shape")
        info = HealthInfo(
            status=str(data.get("status", "")),
            api_version=None if data.get("api_version") is None else str(data["api_version"]),
            version=data.get("version"),
            commit=data.get("commit"),
            user=data.get("user"),
            raw=data,
        )
        if info.status == "needs_auth":
            raise SkyPilotAuthError(
                f"SkyPilot API server at {self.endpoint} requires authentication: set a service-account token"
            )
        return info

    def launch(self, task_yaml: str, name: str, *, named: bool = False) -> str:
        """Submit a managed job named exactly ``name``; returns the server's request id. ``named``: the caller
        wrote the header document that names the job ``name`` (``render.JobDocument`` does), so the YAML is
        sent as it is; otherwise it is read to name the job (:func:`with_job_name`).

        The request takes 10–40 s (minutes when a controller VM must be provisioned): poll it
        with :meth:`request_status` / :meth:`launched_job_ids`, never wait for it in one
        Lambda invocation. A transport failure after the body was sent raises
        :class:`SkyPilotUnavailable` with ``maybe_received=True`` (reconcile with
        :meth:`find_jobs_by_name` before launching again); a launch is never retried blindly.
        """
        if not name or not isinstance(name, str):
            raise ValueError("a managed job needs a non-empty name")
        body = {"task": task_yaml if named else with_job_name(task_yaml, name), "name": name}
        return self._submit("/jobs/launch", body, idempotent=False)

    def request_status(self, request_ids: Sequence[str]) -> dict[str, str]:
        """Status of each request (PENDING, WAITING, RUNNING, SUCCEEDED, FAILED, CANCELLED).

        Non-blocking. An id the server does not know (or has purged) is absent from the result.
        """
        return {rid: payload["status"] for rid, payload in self._status_payloads(request_ids).items()}

    def request_result(self, request_id: str) -> RequestResult:
        """The result of a request: not done yet, SUCCEEDED with its parsed return value, or
        CANCELLED. A FAILED request raises :class:`SkyPilotRequestFailed`; an unknown one
        :class:`SkyPilotNotFound`. ``/api/get`` (a long poll) is only called once terminal.
        """
        payloads = self._status_payloads([request_id])
        payload = payloads.get(request_id)
        if payload is None:
            raise SkyPilotNotFound(
                f"SkyPilot request {request_id} is unknown to {self.endpoint} (or purged)",
                request_id=request_id,
            )
        status = str(payload.get("status"))
        name = payload.get("name")
        if status not in REQUEST_TERMINAL_STATUSES or status == "CANCELLED":
            return RequestResult(request_id=request_id, status=status, name=name)
        return self._get_result(request_id)

    def wait_for_request(self, request_id: str, timeout: float | None = None) -> RequestResult:
        """Poll a request until it is terminal, then return its result (as :meth:`request_result`).

        Raises :class:`SkyPilotRequestTimeout` after ``timeout`` (default ``request_timeout``)
        seconds and :class:`SkyPilotRequestFailed` if the request failed.
        """
        limit = self.request_timeout if timeout is None else float(timeout)
        deadline = time.monotonic() + limit
        interval = self.poll_interval
        last_status: str | None = None
        while True:
            result = self.request_result(request_id)
            last_status = result.status
            if result.done:
                return result
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise SkyPilotRequestTimeout(
                    f"SkyPilot request {request_id} still {last_status} after {limit:.0f} s",
                    request_id=request_id,
                    last_status=last_status,
                )
            time.sleep(min(interval, remaining))
            interval = min(interval * 1.5, self.poll_interval_max)

    def launched_job_ids(self, request_id: str) -> list[int] | None:
        """Job ids created by a launch request; ``None`` while the request is not finished.

        Raises :class:`SkyPilotRequestFailed` if the launch failed and :class:`SkyPilotError`
        if it was cancelled.
        """
        result = self.request_result(request_id)
        if not result.done:
            return None
        if result.status == "CANCELLED":
            raise SkyPilotError(f"SkyPilot launch request {request_id} was cancelled")
        return parse_launch_job_ids(result.return_value)

    def finished_launch_job_ids(self, request_id: str) -> list[int]:
        """Job ids of a launch request whose status a batched :meth:`request_status` already read as
        SUCCEEDED or FAILED: the one ``/api/get`` it needs (no second status call). Raises
        :class:`SkyPilotRequestFailed` for a failed launch, :class:`SkyPilotNotFound` once purged."""
        return parse_launch_job_ids(self._get_result(request_id).return_value)

    def queue(self, job_ids: Sequence[int]) -> list[JobRow]:
        """Queue rows of exactly these managed jobs (all users). Unknown ids give no rows."""
        ids = _job_ids(job_ids)
        if not ids:
            return []
        return self._queue({"job_ids": ids})

    def find_jobs_by_name(self, name: str) -> list[JobRow]:
        """Rows of every managed job named exactly ``name`` (to adopt a job after a retry).

        The server's ``name_match`` is a SQL ``LIKE %name%``; rows are filtered here to the
        exact name.
        """
        if not name:
            raise ValueError("find_jobs_by_name needs a non-empty name")
        rows = self._queue({"name_match": name})
        return [r for r in rows if r.job_name == name]

    def cancel(self, job_ids: Sequence[int], *, wait: bool = True) -> str | None:
        """Cancel these managed jobs by exact id (never by name); returns the request id.

        With ``wait`` (the default) returns once the server has run the cancel request (a few
        seconds). A cancelled job passes through CANCELLING; ids that are unknown or already
        terminal are skipped silently by the server: confirm with :meth:`queue`.
        """
        ids = _job_ids(job_ids)
        if not ids:
            return None
        rid = self._submit("/jobs/cancel", {"job_ids": ids}, idempotent=True)
        if wait:
            self.wait_for_request(rid)
        return rid

    def cancel_requests(self, request_ids: Sequence[str]) -> list[str]:
        """Cancel pending/running server requests (e.g. a launch); returns the ids cancelled."""
        ids = [str(r) for r in request_ids if r]
        if not ids:
            return []  # an absent list would mean "every request" to the server
        rid = self._submit("/api/cancel", {"request_ids": ids}, idempotent=True)
        result = self.wait_for_request(rid)
        value = result.return_value
        return [str(v) for v in value] if isinstance(value, list) else []

    def job_logs(self, job_id: int, *, max_bytes: int = 64 * 1024, tail_lines: int | None = None,
                 timeout: float | None = None) -> JobLogs:
        """The last ``max_bytes`` of managed job ``job_id``'s log (exact id; never by name).

        ``POST /jobs/logs`` with ``follow: false`` answers with the log itself as a streamed body
        (the request's own output; the request id is in the usual header) that ends once the server
        has sent what the job wrote so far. ``tail`` (lines, server side) keeps the server from
        sending a whole training log: by default one line per 16 bytes of the budget. What arrives
        beyond the budget is dropped from the front as it comes; the stream is abandoned after
        4 × ``max_bytes`` (+64 KiB) on the wire or ``timeout`` seconds (default ``read_timeout``), so
        neither memory nor time is unbounded. A request the server failed (unknown job, no jobs
        controller) raises :class:`SkyPilotRequestFailed` once the stream ended.
        """
        if isinstance(job_id, bool) or not isinstance(job_id, int):
            raise TypeError(f"a job id is an integer, got {job_id!r}")
        if max_bytes < 1:
            raise ValueError("max_bytes must be at least 1")
        lines = tail_lines if tail_lines is not None else max(1, max_bytes // 16)
        body = {"job_id": job_id, "follow": False, "controller": False, "refresh": False, "tail": lines}
        limit = self.read_timeout if timeout is None else float(timeout)
        tail = _LogTail(max_bytes)
        request_id, complete = self._stream("/jobs/logs", body, tail.add, 4 * max_bytes + 64 * 1024, limit)
        tail.end()
        if complete and request_id:
            with_result = self._status_payloads([request_id]).get(request_id)
            if with_result is not None and with_result.get("status") == "FAILED":
                raise self._get_result_error(request_id)
        return JobLogs(job_id=job_id, text=tail.text(), skipped_bytes=tail.skipped, complete=complete,
                       request_id=request_id)

    def follow_job_logs(self, job_id: int, sink: Callable[[str], None], *, tail_lines: int = 1000) -> str | None:
        """Managed job ``job_id``'s log as the job writes it (exact id), handed to ``sink`` a line or more at a
        time, until the server ends the stream: the job ended, or was cancelled. Returns the request id.

        ``POST /jobs/logs`` with ``follow: true``: the server first sends the last ``tail_lines`` lines, then
        what the job adds; while the job waits for resources it sends only control lines (dropped here, with
        the colours). A silent job is not an error: between chunks the read blocks, without a deadline (Ctrl-C
        stops following). A request the server failed raises :class:`SkyPilotRequestFailed` once it ended.
        """
        if isinstance(job_id, bool) or not isinstance(job_id, int):
            raise TypeError(f"a job id is an integer, got {job_id!r}")
        body = {"job_id": job_id, "follow": True, "controller": False, "refresh": False, "tail": max(1, tail_lines)}
        lines = _LogLines(sink)
        request_id, complete = self._stream("/jobs/logs", body, lines.add, None, None)
        lines.end()
        if complete and request_id:
            with_result = self._status_payloads([request_id]).get(request_id)
            if with_result is not None and with_result.get("status") == "FAILED":
                raise self._get_result_error(request_id)
        return request_id

    # -- request plumbing ---------------------------------------------------------------------

    def _queue(self, filters: dict[str, Any]) -> list[JobRow]:
        body = {"refresh": False, "skip_finished": False, "all_users": True, "fields": list(QUEUE_FIELDS)}
        body.update(filters)
        rid = self._submit("/jobs/queue/v2", body, idempotent=True)
        try:
            result = self.wait_for_request(rid)
        except SkyPilotRequestFailed as e:
            if e.error_type.rsplit(".", 1)[-1] == "ClusterNotUpError":
                return []  # no jobs controller running: nothing in progress
            raise
        if result.status == "CANCELLED":
            raise SkyPilotError(f"SkyPilot queue request {rid} was cancelled")
        return parse_queue_rows(result.return_value)

    def _submit(self, path: str, body: dict[str, Any], *, idempotent: bool) -> str:
        payload = dict(body)
        payload["env_vars"] = {"SKYPILOT_USER_ID": self.user_id, "SKYPILOT_USER": self.user_name}
        payload["using_remote_api_server"] = True
        response = self._call("POST", path, body=payload, idempotent=idempotent)
        request_id = response.headers.get(REQUEST_ID_HEADER)
        if not request_id:
            raise SkyPilotError(f"POST {path}: the server returned no request id", status_code=response.status)
        logger.debug("SkyPilot request %s submitted: POST %s", request_id, path)
        return request_id

    def _status_payloads(self, request_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        ids = [str(r) for r in request_ids if r]
        if not ids:
            return {}
        query = [("request_ids", rid) for rid in ids] + [("all_status", "true")]
        data = self._call("GET", "/api/status", query=query, idempotent=True).json()
        if not isinstance(data, list):
            raise SkyPilotError("unexpected /api/status response shape")
        wanted = set(ids)
        # The server matches ids as prefixes: keep exact matches only.
        return {
            p["request_id"]: p for p in data if isinstance(p, dict) and p.get("request_id") in wanted and "status" in p
        }

    def _get_result(self, request_id: str) -> RequestResult:
        response = self._call(
            "GET",
            "/api/get",
            query=[("request_id", request_id)],
            idempotent=True,
            ok_statuses=(200, 404, 500),
        )
        if response.status == 404:
            raise SkyPilotNotFound(
                f"SkyPilot request {request_id} is unknown to {self.endpoint} (or purged)",
                request_id=request_id,
            )
        data = _json_or_none(response.body)
        if response.status == 500:
            raise self._request_failed(request_id, data)
        if not isinstance(data, dict):
            raise SkyPilotError(f"unexpected /api/get response shape for {request_id}")
        raw_value = data.get("return_value")
        try:
            value = json.loads(raw_value) if isinstance(raw_value, str) else raw_value
        except ValueError:
            raise SkyPilotError(f"request {request_id}: return_value is not JSON") from None
        return RequestResult(
            request_id=request_id,
            status=str(data.get("status", "SUCCEEDED")),
            name=data.get("name"),
            return_value=value,
        )

    def _request_failed(self, request_id: str, data: Any) -> SkyPilotError:
        detail = data.get("detail") if isinstance(data, dict) else None
        error: Any = detail.get("error") if isinstance(detail, dict) else None
        if isinstance(error, str):
            try:
                error = json.loads(error)
            except ValueError:
                error = {"type": "UnknownError", "message": error}
        if not isinstance(error, dict):
            # A 500 that is not a failed request (an internal server error).
            return SkyPilotError(
                f"GET /api/get?request_id={request_id}: HTTP 500: {self._describe(data)}",
                status_code=500,
            )
        error_type = str(error.get("type") or "UnknownError")
        error_message = self._redact(_plain(error.get("message")) or "")
        request_name = detail.get("name") if isinstance(detail, dict) else None
        return SkyPilotRequestFailed(
            f"SkyPilot request {request_id} ({request_name or 'unknown'}) failed: {error_type}: {error_message}",
            request_id=request_id,
            error_type=error_type,
            error_message=error_message,
            request_name=request_name,
        )

    def _get_result_error(self, request_id: str) -> SkyPilotError:
        try:
            self._get_result(request_id)
        except SkyPilotError as e:
            return e
        return SkyPilotError(f"SkyPilot request {request_id} reported FAILED but returned a result")

    def _stream(self, path: str, body: dict[str, Any], sink: Callable[[bytes], None], wire_budget: int | None,
                timeout: float | None) -> tuple[str | None, bool]:
        """POST a request whose answer is a streamed body, handing each chunk to ``sink``: (request id,
        whether the server ended the stream before ``wire_budget`` bytes or the deadline). Both None: follow
        the stream until the server ends it, each read blocking (a socket timeout would leave the response
        unreadable, so there is none).

        One attempt, no retry: a log read is cheap to ask again, and the caller says what failed.
        """
        following = wire_budget is None
        wire_budget = sys.maxsize if wire_budget is None else wire_budget
        payload = dict(body)
        payload["env_vars"] = {"SKYPILOT_USER_ID": self.user_id, "SKYPILOT_USER": self.user_name}
        payload["using_remote_api_server"] = True
        data = json.dumps(payload).encode()
        headers = self._headers(True)
        headers["Accept"] = "*/*"
        conn = self._connection()
        deadline = float("inf") if timeout is None else time.monotonic() + timeout
        try:
            try:
                conn.connect()
                sock = conn.sock  # kept: getresponse() may hand the socket over to the response
                if sock is not None:
                    sock.settimeout(self.read_timeout if timeout is None else min(self.read_timeout, timeout))
                conn.request("POST", self._base_path + path, body=data, headers=headers)
                resp = conn.getresponse()
            except (OSError, http.client.HTTPException) as e:
                raise SkyPilotUnavailable(f"POST {path} to {self.endpoint}: {self._redact(str(e))}") from None
            if resp.status != 200:
                raw = resp.read(64 * 1024)
                kind = SkyPilotAuthError if resp.status in (401, 403) else (
                    SkyPilotUnavailable if resp.status == 503 else SkyPilotError)
                raise kind(f"POST {path}: HTTP {resp.status} from {self.endpoint}: "
                           f"{self._describe(_json_or_none(raw), raw)}", status_code=resp.status)
            request_id = resp.getheader(REQUEST_ID_HEADER)
            if following and sock is not None:
                sock.settimeout(None)  # the answer has begun: from here a silent job only means waiting
            received = 0
            while received < wire_budget and time.monotonic() < deadline:
                try:
                    chunk = resp.read1(min(64 * 1024, wire_budget - received))
                except (OSError, http.client.HTTPException):
                    break  # what arrived is still worth showing; the caller is told it is cut short
                if not chunk:
                    return request_id, True
                received += len(chunk)
                sink(chunk)
            return request_id, False
        finally:
            conn.close()

    # -- transport ----------------------------------------------------------------------------

    def _call(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]] | None = None,
        body: Any = None,
        idempotent: bool,
        ok_statuses: tuple[int, ...] = (200,),
    ) -> _Response:
        """One API call with retries of 503 and transport errors until ``retry_deadline``."""
        target = self._base_path + path
        if query:
            target += "?" + urllib.parse.urlencode(list(query))
        data = None if body is None else json.dumps(body).encode()
        headers = self._headers(data is not None)
        start = time.monotonic()
        deadline = start + self.retry_deadline
        left = budget.remaining()  # the invocation's own deadline (engine/budget.py): never outlive the Lambda
        if left is not None:
            if left <= 0:
                raise SkyPilotUnavailable(f"{method} {path}: not sent: this invocation's time budget is spent",
                                          attempts=0)
            deadline = min(deadline, start + left)
        attempt = 0
        while True:
            attempt += 1
            try:
                response = self._exchange(method, target, data, headers)
            except _TransportError as e:
                if e.sent and not idempotent:
                    raise SkyPilotUnavailable(
                        f"{method} {path} to {self.endpoint}: the connection failed after the "
                        f"request was sent ({self._redact(str(e))}); the server may have acted on it",
                        attempts=attempt,
                        maybe_received=True,
                    ) from None
                reason = self._redact(str(e))
                retry_after = None
            else:
                if response.status in ok_statuses:
                    return response
                if response.status in (401, 403):
                    raise SkyPilotAuthError(
                        f"{method} {path}: HTTP {response.status} from {self.endpoint}: "
                        f"{self._describe(_json_or_none(response.body), response.body)}",
                        status_code=response.status,
                    )
                if response.status != 503:
                    raise SkyPilotError(
                        f"{method} {path}: HTTP {response.status} from {self.endpoint}: "
                        f"{self._describe(_json_or_none(response.body), response.body)}",
                        status_code=response.status,
                    )
                reason = "HTTP 503 " + self._describe(_json_or_none(response.body), response.body)
                retry_after = _retry_after(response.headers.get("retry-after"))
            delay = min(self.backoff_max, self.backoff_initial * (2 ** (attempt - 1)))
            delay = delay / 2 + random.uniform(0, delay / 2)
            if retry_after is not None:
                delay = max(delay, min(retry_after, self.backoff_max))
            remaining = deadline - time.monotonic()
            if remaining <= delay:
                raise SkyPilotUnavailable(
                    f"{method} {path}: SkyPilot API server at {self.endpoint} unavailable after "
                    f"{attempt} attempt(s) in {time.monotonic() - start:.1f} s: {reason}",
                    attempts=attempt,
                    status_code=503 if reason.startswith("HTTP 503") else None,
                )
            logger.warning(
                "SkyPilot %s %s failed (attempt %d: %s); retrying in %.2f s",
                method,
                path,
                attempt,
                reason,
                delay,
                extra={"skypilot_path": path, "attempt": attempt, "delay_s": round(delay, 2)},
            )
            time.sleep(delay)

    def _headers(self, has_body: bool) -> dict[str, str]:
        headers = {
            "Accept": "application/json",
            "User-Agent": f"npa-workflow-skypilot-client (api {API_VERSION})",
            "X-SkyPilot-API-Version": str(API_VERSION),
            "X-SkyPilot-Version": SKYPILOT_VERSION,
        }
        if has_body:
            headers["Content-Type"] = "application/json"
        if self._auth_header:
            headers["Authorization"] = self._auth_header
        return headers

    def _connection(self) -> http.client.HTTPConnection:
        if self._scheme == "https":
            import ssl  # already imported by http.client; named here for the context

            return http.client.HTTPSConnection(self._host, self._port, timeout=self.connect_timeout,
                                               context=ssl.create_default_context())
        return http.client.HTTPConnection(self._host, self._port, timeout=self.connect_timeout)

    def _exchange(self, method: str, target: str, data: bytes | None, headers: dict[str, str]) -> _Response:
        """One HTTP exchange with separate connect and read timeouts. No retries here."""
        conn = self._connection()
        try:
            try:
                conn.connect()
            except OSError as e:
                raise _TransportError(e, sent=False) from None
            if conn.sock is not None:
                conn.sock.settimeout(self.read_timeout)
            try:
                # A failure from here on may come after the server read the whole request.
                conn.request(method, target, body=data, headers=headers)
                resp = conn.getresponse()
                body = resp.read()
            except (OSError, http.client.HTTPException) as e:
                raise _TransportError(e, sent=True) from None
            return _Response(
                status=resp.status,
                headers={k.lower(): v for k, v in resp.getheaders()},
                body=body,
            )
        finally:
            conn.close()

    # -- secrets hygiene ----------------------------------------------------------------------

    def _redact(self, text: str) -> str:
        for secret in self._secrets:
            if secret:
                text = text.replace(secret, "***")
        return text

    def _describe(self, data: Any, raw: bytes = b"") -> str:
        if isinstance(data, dict) and "detail" in data:
            detail = data["detail"]
            text = detail if isinstance(detail, str) else json.dumps(detail, default=str)
        elif data is not None:
            text = json.dumps(data, default=str)
        else:
            text = raw.decode("utf-8", "replace")
        text = _plain(text) or ""
        if len(text) > 500:
            text = text[:500] + "…"
        return self._redact(text)


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------


def _job_ids(job_ids: Sequence[int]) -> list[int]:
    if isinstance(job_ids, (str, bytes)):
        raise TypeError("job_ids must be a sequence of integers")
    ids: list[int] = []
    for j in job_ids:
        if isinstance(j, bool) or not isinstance(j, int):
            raise TypeError(f"job ids are integers, got {j!r}")
        if j not in ids:
            ids.append(j)
    return ids


def _json_or_none(body: bytes) -> Any:
    try:
        return json.loads(body) if body else None
    except ValueError:
        return None


def _retry_after(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None


def _safe_url(url: str) -> str:
    """A URL with any userinfo removed, for error messages."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return "<unparseable URL>"
    netloc = parts.netloc.rsplit("@", 1)[-1]
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _token_from_secrets_manager(secret_arn: str) -> str:
    import boto3  # lazy: only this branch needs it, and it costs ~0.3 s to import
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        secret = boto3.client("secretsmanager").get_secret_value(SecretId=secret_arn)
    except ClientError as e:
        code = e.response.get("Error", {}).get("Code", "ClientError")
        raise SkyPilotAuthError(
            f"cannot read the SkyPilot token from Secrets Manager secret {secret_arn}: {code}"
        ) from None
    except BotoCoreError as e:
        raise SkyPilotAuthError(
            f"cannot read the SkyPilot token from Secrets Manager secret {secret_arn}: {type(e).__name__}"
        ) from None
    value = (secret.get("SecretString") or "").strip()
    if value.startswith("{"):
        try:
            value = str(json.loads(value).get("token") or "").strip()
        except (ValueError, AttributeError):
            value = ""
    if not value:
        raise SkyPilotAuthError(
            f"Secrets Manager secret {secret_arn} holds no SkyPilot token (expected the token, "
            'or JSON {"token": "sky_…"})'
        )
    return value
