"""A protocol double of a SkyPilot 0.14.1 API server, serving the shapes recorded from a real one.

A tiny ``http.server`` on 127.0.0.1 in a thread. Every response is built from a recording in
``recordings/`` (written by the contract tests against a real server) with only ids, statuses
and values replaced, so the double cannot drift from the real wire format silently.

Scriptable:

* ``job_statuses``: the statuses a launched job walks through, one step per queue call that
  includes it (default PENDING → RUNNING → SUCCEEDED; a real server without a cloud cannot
  produce SUCCEEDED, so this is where that path is tested);
* ``launch_error``: make launch requests end FAILED with this ``(type, message)``;
* ``queue_error``: make queue requests end FAILED with this ``(type, message)``;
* ``request_polls``: how many ``/api/status`` calls report a request RUNNING before it ends;
* ``fail_next(503, times=2)``: answer the next matching calls with an HTTP error;
* ``delay_next(seconds)``: answer the next matching call late (to trip read timeouts);
* ``token``: require ``Authorization: Bearer <token>``, answering 401 like the real server;
* ``job_logs``: what each job (by id) wrote, streamed by ``POST /jobs/logs`` after the control lines
  the real server sends first (recorded from a job that never ran: no cloud, so no job output).

A stand-in for load and outages (benches and the watch's tests; `bench/watch_outage.py`):

* ``latency``: seconds every answer takes (a distant or loaded server; concurrent calls overlap);
* ``launch_seconds``: a launch request stays RUNNING this long on ``clock`` before its job id appears (a real
  server takes 10–40 s, minutes when it provisions a controller; None: ``request_polls`` decides);
* ``error_rate``: the share of calls answered HTTP 503 (seeded, so a run is reproducible);
* ``outage()`` / ``recover()``: stop listening (connections refused, as when the server is down) and listen
  again on the same port;
* ``seed_launch(name)`` / ``seed_job(name)``: requests and jobs made without a ``POST`` each (a bench's thousands);
* ``clock``: the double's time (a bench's simulated clock).

``calls`` lists every request received (method, path, query, headers, body).
"""

from __future__ import annotations

import copy
import json
import random
import sys
import threading
import time
import urllib.parse
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

RECORDINGS = Path(__file__).resolve().parent / "recordings"

TERMINAL_REQUEST = ("SUCCEEDED", "FAILED", "CANCELLED")
IN_PROGRESS_JOB = ("PENDING", "SUBMITTED", "STARTING", "RUNNING", "RECOVERING", "WINDING_DOWN", "CANCELLING")

FAILURE_REASONS = {
    "FAILED_NO_RESOURCE": "[sky.exceptions.ResourcesUnavailableError] Failed to acquire resources in all zones",
    "FAILED_PRECHECKS": "[sky.exceptions.NoCloudAccessError] Cloud access is not set up. Run: \x1b[1msky check\x1b[0m",
    "FAILED_CONTROLLER": "[RuntimeError] The jobs controller process died",
    "FAILED": "Job failed with exit code 1",
    "FAILED_SETUP": "Setup failed with exit code 1",
}


def load_recordings(directory: Path = RECORDINGS) -> dict[str, dict[str, Any]]:
    recordings = {p.stem: json.loads(p.read_text()) for p in sorted(directory.glob("*.json"))}
    missing = {
        "get_api_health_200",
        "post_jobs_launch_200",
        "api_status_sky.jobs.launch_PENDING",
        "api_get_sky.jobs.launch_200",
        "api_get_sky.jobs.launch_500",
        "api_get_sky.jobs.queue_v2_200_FAILED_PRECHECKS",
        "api_get_404",
    } - set(recordings)
    if missing:
        raise RuntimeError(
            f"recordings missing under {directory}: {sorted(missing)}; run the contract tests "
            "(pytest -m skypilot tests/integration/skypilot) with NPA_SKYPILOT_RECORD=1"
        )
    return recordings


@dataclass
class _Request:
    request_id: str
    name: str
    status: str = "PENDING"
    polls_left: int = 0
    return_value: Any = None
    error: tuple[str, str] | None = None
    ready_at: float | None = None  # with ``launch_seconds``: when the request ends (on the double's clock)


@dataclass
class _Job:
    job_id: int
    job_name: str
    task_name: str
    statuses: list[str]
    step: int = 0
    seen: bool = False
    cancelled: bool = False

    @property
    def status(self) -> str:
        return "CANCELLED" if self.cancelled else self.statuses[min(self.step, len(self.statuses) - 1)]


@dataclass
class _Fault:
    status: int | None
    times: int
    path_prefix: str
    delay: float = 0.0
    body: dict[str, Any] = field(default_factory=dict)


class _Server(ThreadingHTTPServer):
    # The listen backlog (socketserver's default is 5): a pool of concurrent clients connecting at once would see
    # dropped SYNs, each retried by the kernel only after a second.
    request_queue_size = 128
    dropped = 0

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that reset its connection (a killed process, a client's timeout) is no error of the server's:
        # werkzeug's servers ignore it the same way (WSGIRequestHandler.handle). socketserver's default prints a
        # traceback from this thread into whatever stderr is current — a test's, or the suite's progress line.
        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            self.dropped += 1
            return
        super().handle_error(request, client_address)


class SkyPilotDouble:
    def __init__(self, recordings: dict[str, dict[str, Any]] | None = None, *, token: str | None = None) -> None:
        self.recordings = recordings if recordings is not None else load_recordings()
        self.token = token
        self.job_statuses: list[str] = ["PENDING", "RUNNING", "SUCCEEDED"]
        self.launch_error: tuple[str, str] | None = None
        self.queue_error: tuple[str, str] | None = None
        self.request_polls = 1
        self.job_logs: dict[int, str] = {}
        self.calls: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._requests: dict[str, _Request] = {}
        self._jobs: dict[int, _Job] = {}
        self._next_job_id = 1
        self._faults: list[_Fault] = []
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.latency = 0.0
        self.launch_seconds: float | None = None
        self.error_rate = 0.0
        self.clock = time.monotonic
        self._random = random.Random(17)
        self._port = 0

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> SkyPilotDouble:
        self._listen()
        return self

    def outage(self) -> None:
        """The server goes down: nothing listens on its port (a client's connect is refused)."""
        self.stop()

    def recover(self) -> None:
        """The server is back, on the same port (its requests and jobs kept, as a restarted server's database)."""
        if self._server is None:
            self._listen()

    def _listen(self) -> None:
        double = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802
                self._quietly()

            def do_POST(self) -> None:  # noqa: N802
                self._quietly()

            def _quietly(self) -> None:
                # A client that gave up (its timeout during a delay_next) closed the socket: the answer has
                # nobody to go to. That is the scripted fault working, not an error to print a traceback for.
                try:
                    double._handle(self)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                return

        self._server = _Server(("127.0.0.1", self._port), Handler)
        self._server.daemon_threads = True
        self._port = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, name="skypilot-double", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> SkyPilotDouble:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def dropped_connections(self) -> int:
        """Connections the clients reset before their request was read (handled quietly)."""
        return self._server.dropped if self._server is not None else 0

    @property
    def endpoint(self) -> str:
        assert self._port, "start() the double first"
        return f"http://127.0.0.1:{self._port}"

    def seed_launch(self, job_name: str, *, statuses: list[str] | None = None) -> str:
        """A launch request as ``POST /jobs/launch`` would make it (its job exists once the request ends)."""
        with self._lock:
            return self._make_launch(job_name, [{"name": job_name}], statuses)

    def seed_job(self, job_name: str, *, statuses: list[str] | None = None) -> int:
        """A managed job whose launch finished long ago."""
        with self._lock:
            job_id = self._next_job_id
            self._next_job_id += 1
            self._jobs[job_id] = _Job(job_id, job_name, job_name, list(statuses or self.job_statuses))
            return job_id

    # -- scripting ----------------------------------------------------------------------------

    def fail_next(self, status: int = 503, *, times: int = 1, path_prefix: str = "/") -> None:
        detail = {
            503: "Server is shutting down, please try again later.",
            401: "Invalid or expired service account token",
            500: "Internal Server Error",
        }.get(status, "error")
        with self._lock:
            self._faults.append(_Fault(status=status, times=times, path_prefix=path_prefix, body={"detail": detail}))

    def delay_next(self, seconds: float, *, times: int = 1, path_prefix: str = "/") -> None:
        with self._lock:
            self._faults.append(_Fault(status=None, times=times, path_prefix=path_prefix, delay=seconds))

    def calls_to(self, path: str) -> list[dict[str, Any]]:
        return [c for c in self.calls if c["path"] == path]

    def job_status(self, job_id: int) -> str:
        with self._lock:
            return self._jobs[job_id].status

    # -- HTTP ---------------------------------------------------------------------------------

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        url = urllib.parse.urlsplit(handler.path)
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else None
        call = {
            "method": handler.command,
            "path": url.path,
            "query": urllib.parse.parse_qs(url.query),
            "headers": {k.lower(): v for k, v in handler.headers.items()},
            "body": body,
        }
        with self._lock:
            self.calls.append(call)
            fault = self._take_fault(url.path)
            erred = self.error_rate > 0 and self._random.random() < self.error_rate
        if self.latency:
            time.sleep(self.latency)
        if erred:
            return self._send(handler, 503, {"detail": "Server is shutting down, please try again later."})
        if fault is not None and fault.delay:
            time.sleep(fault.delay)
        if fault is not None and fault.status is not None:
            return self._send(handler, fault.status, fault.body)
        if self.token is not None and call["headers"].get("authorization") != f"Bearer {self.token}":
            return self._send(handler, 401, {"detail": "Invalid or expired service account token"})
        route = {
            ("GET", "/api/health"): self._health,
            ("GET", "/api/status"): self._status,
            ("GET", "/api/get"): self._get,
            ("POST", "/jobs/launch"): self._launch,
            ("POST", "/jobs/queue/v2"): self._queue,
            ("POST", "/jobs/cancel"): self._cancel,
            ("POST", "/api/cancel"): self._cancel_requests,
            ("POST", "/jobs/logs"): self._logs,
        }.get((handler.command, url.path))
        if route is None:
            return self._send(handler, 404, {"detail": "Not Found"})
        with self._lock:
            status, payload, request_id = route(call)
        self._send(handler, status, payload, request_id=request_id)

    def _take_fault(self, path: str) -> _Fault | None:
        for fault in self._faults:
            if fault.times > 0 and path.startswith(fault.path_prefix):
                fault.times -= 1
                return fault
        return None

    def _send(
        self, handler: BaseHTTPRequestHandler, status: int, payload: Any, *, request_id: str | None = None
    ) -> None:
        streamed = isinstance(payload, bytes)  # a log: the body is the text itself
        data = payload if streamed else json.dumps(payload).encode()
        handler.send_response(status)
        headers = self.recordings["get_api_health_200"]["response"]["headers"]
        handler.send_header("Content-Type", "text/plain" if streamed else headers.get("content-type",
                                                                                        "application/json"))
        handler.send_header("X-SkyPilot-API-Version", headers.get("x-skypilot-api-version", "62"))
        handler.send_header("X-SkyPilot-Version", headers.get("x-skypilot-version", "0.14.1"))
        handler.send_header("X-Skypilot-Request-ID", request_id or str(uuid.uuid4()))
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    # -- endpoints (called with the lock held) ------------------------------------------------

    def _health(self, call: dict[str, Any]) -> tuple[int, Any, None]:
        return 200, copy.deepcopy(self.recordings["get_api_health_200"]["response"]["body"]), None

    def _new_request(self, name: str, **kwargs: Any) -> _Request:
        req = _Request(request_id=str(uuid.uuid4()), name=name, polls_left=self.request_polls, **kwargs)
        self._requests[req.request_id] = req
        return req

    def _launch(self, call: dict[str, Any]) -> tuple[int, Any, str]:
        if self.launch_error is not None:
            return 200, None, self._new_request("sky.jobs.launch", error=self.launch_error).request_id
        docs = [d for d in yaml.safe_load_all(call["body"]["task"]) if d]
        job_name = docs[0].get("name") or "job"
        return 200, None, self._make_launch(job_name, docs[1:] if len(docs) > 1 else docs, None)

    def _make_launch(self, job_name: str, tasks: list[dict[str, Any]], statuses: list[str] | None) -> str:
        job_id = self._next_job_id
        self._next_job_id += 1
        task_name = job_name if len(tasks) == 1 else (tasks[0].get("name") or f"{job_name}-0")
        self._jobs[job_id] = _Job(job_id, job_name, task_name, list(statuses or self.job_statuses))
        req = self._new_request("sky.jobs.launch", return_value={"job_id": [job_id], "handle": "<pickled>"})
        if self.launch_seconds is not None:
            req.ready_at = self.clock() + self.launch_seconds
        return req.request_id

    def _queue(self, call: dict[str, Any]) -> tuple[int, Any, str]:
        body = call["body"] or {}
        if self.queue_error is not None:
            return 200, None, self._new_request("sky.jobs.queue_v2", error=self.queue_error).request_id
        job_ids = body.get("job_ids")
        name_match = body.get("name_match")
        jobs = [
            j
            for j in self._jobs.values()
            if (job_ids is None or j.job_id in job_ids)
            and (name_match is None or name_match.lower() in j.job_name.lower())  # SQL LIKE %x%
        ]
        rows = []
        template = self._queue_row_template()
        for job in jobs:
            # The first queue call after a launch sees the first status; each later one steps on.
            if job.seen and not job.cancelled and job.step < len(job.statuses) - 1:
                job.step += 1
            job.seen = True
            row = {k: copy.deepcopy(v) for k, v in template.items()}
            row.update(
                job_id=job.job_id,
                task_id=0,
                job_name=job.job_name,
                task_name=job.task_name,
                status=job.status,
                failure_reason=FAILURE_REASONS.get(job.status),
                details=None if job.status not in FAILURE_REASONS else f"Failure: {FAILURE_REASONS[job.status]}",
                end_at=None if job.status in IN_PROGRESS_JOB else time.time(),
            )
            rows.append(row)
        counts: dict[str, int] = {}
        for row in rows:
            counts[row["status"]] = counts.get(row["status"], 0) + 1
        value = {
            "jobs": rows,
            "total": len(rows),
            "total_no_filter": len(self._jobs),
            "status_counts": counts,
            "infra_options": [],
        }
        return 200, None, self._new_request("sky.jobs.queue_v2", return_value=value).request_id

    def _queue_row_template(self) -> dict[str, Any]:
        body = self.recordings["api_get_sky.jobs.queue_v2_200_FAILED_PRECHECKS"]["response"]["body"]
        value = json.loads(body["return_value"])
        jobs = value.get("jobs") if isinstance(value, dict) else value
        if not jobs:
            raise RuntimeError("the recorded queue result has no job row to use as a template")
        return jobs[0]

    def _cancel(self, call: dict[str, Any]) -> tuple[int, Any, str]:
        body = call["body"] or {}
        for job_id in body.get("job_ids") or []:
            job = self._jobs.get(job_id)
            if job is not None and job.status in IN_PROGRESS_JOB:
                job.cancelled = True
        return 200, None, self._new_request("sky.jobs.cancel", return_value=None).request_id

    def _logs(self, call: dict[str, Any]) -> tuple[int, Any, str]:
        """The recorded stream's control lines, then the job's scripted log (its last ``tail`` lines)."""
        job_id = (call["body"] or {}).get("job_id")
        tail = (call["body"] or {}).get("tail")
        recorded = self.recordings["post_jobs_logs_200"]["response"]["body"]
        control = "".join(line for line in recorded.splitlines(keepends=True) if line.startswith("<sky-payload>"))
        if job_id not in self._jobs and job_id not in self.job_logs:
            text = f"Job {job_id} not found.\n"
        else:
            lines = self.job_logs.get(job_id, "").splitlines(keepends=True)
            text = "".join(lines[-tail:] if tail else lines)
        req = self._new_request("sky.jobs.logs", return_value=0)
        req.status = "SUCCEEDED"
        return 200, (control.replace("--controller 1", f"--controller {job_id}") + text).encode(), req.request_id

    def _cancel_requests(self, call: dict[str, Any]) -> tuple[int, Any, str]:
        cancelled = []
        for rid in (call["body"] or {}).get("request_ids") or []:
            req = self._requests.get(rid)
            if req is not None and req.status not in TERMINAL_REQUEST:
                req.status = "CANCELLED"
                cancelled.append(rid)
        return 200, None, self._new_request("sky.api_cancel", return_value=cancelled).request_id

    def _status(self, call: dict[str, Any]) -> tuple[int, Any, None]:
        template = self.recordings["api_status_sky.jobs.launch_PENDING"]["response"]["body"][0]
        out = []
        for rid in call["query"].get("request_ids", []):
            exact = self._requests.get(rid)  # the server matches prefixes; an exact id is the common case
            for req in [exact] if exact is not None else list(self._requests.values()):
                if not req.request_id.startswith(rid):
                    continue
                self._advance(req)
                payload = copy.deepcopy(template)
                payload.update(request_id=req.request_id, name=req.name, status=req.status)
                payload["finished_at"] = time.time() if req.status in TERMINAL_REQUEST else None
                out.append(payload)
        return 200, out, None

    def _advance(self, req: _Request) -> None:
        if req.status in TERMINAL_REQUEST:
            return
        if req.ready_at is not None:
            if self.clock() < req.ready_at:
                req.status = "RUNNING"
                return
            req.ready_at = None
            req.polls_left = 0
        if req.polls_left > 0:
            req.polls_left -= 1
            req.status = "RUNNING"
            return
        req.status = "FAILED" if req.error is not None else "SUCCEEDED"

    def _get(self, call: dict[str, Any]) -> tuple[int, Any, None]:
        rid = (call["query"].get("request_id") or [""])[0]
        req = self._requests.get(rid)
        if req is None:
            body = copy.deepcopy(self.recordings["api_get_404"]["response"]["body"])
            body["detail"] = f"Request {rid!r} not found"
            return 404, body, None
        req.ready_at = None  # /api/get blocks until done: here the wait is skipped
        while req.status not in TERMINAL_REQUEST:
            self._advance(req)
        if req.status == "FAILED":
            assert req.error is not None
            detail = copy.deepcopy(self.recordings["api_get_sky.jobs.launch_500"]["response"]["body"]["detail"])
            error = json.loads(detail["error"])
            error.update(type=req.error[0], message=req.error[1])
            detail.update(request_id=req.request_id, name=req.name, status="FAILED", error=json.dumps(error))
            return 500, {"detail": detail}, None
        body = copy.deepcopy(self.recordings["api_get_sky.jobs.launch_200"]["response"]["body"])
        body.update(
            request_id=req.request_id,
            name=req.name,
            status=req.status,
            return_value=json.dumps(req.return_value),
        )
        return 200, body, None
