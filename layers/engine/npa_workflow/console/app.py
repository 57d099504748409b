"""The console's web application (Starlette): pages rendered on the server, live updates as server-sent events.

Routes:
  GET  /                              runs: filter by workflow and status, 50 a page
  GET  /runs/{run}                    a run: graph, timeline, failure, decisions, cost, actions
  GET  /runs/{run}/events             its live updates (text/event-stream), from the run's one watcher
  GET  /runs/{run}/logs?state=&iteration=&attempt=     a step's log, its tail, redacted
  GET  /runs/{run}/logs/events?...    the same log as it grows, until its attempt ends
  GET  /runs/{run}/cancel|resume      the confirmation form (a GET changes nothing)
  POST /runs/{run}/cancel|resume      the action: a per-session token in the form, and the request's Origin
                                      (else Referer) must be this console's own
  GET  /static/...                    the page's CSS and script, shipped in the package

Cross-site requests: the session cookie is SameSite=Strict and HttpOnly; a POST without the token of its session,
or from another origin, is refused (403). Only the hosts the console listens as are answered (a DNS-rebinding page
cannot reach it by name).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import secrets
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.convertors import Convertor, register_url_convertor
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from npa_workflow.console import svg, views
from npa_workflow.console.sources import ActionRefused, RunData
from npa_workflow.console.watch import Hub, Update
from npa_workflow.protocol.run_ids import RUN_ID_MAX

HERE = Path(__file__).parent


class _RunIdConvertor(Convertor[str]):
    """A URL's run id matches the run-id rule (protocol.run_ids) or the route does not match (404): the id names a
    folder under the home (`runs/<run id>/`), so `..` or anything else a run id cannot be never reaches a path."""

    regex = f"[A-Za-z0-9][A-Za-z0-9_-]{{0,{RUN_ID_MAX - 1}}}"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("run_id", _RunIdConvertor())
PAGE_SIZE = 50
LOG_TAIL_BYTES = 64 * 1024
SESSION_COOKIE = "npa_console_session"
ACTIONS = ("cancel", "resume")
TERMINAL_JOB = ("SUCCEEDED", "FAILED", "CANCELLED")


class Console:
    def __init__(self, source: Any, *, assume_minutes: float = 0.0, hosts: list[str] | None = None) -> None:
        self.source = source
        self.assume_minutes = assume_minutes
        self.hosts = hosts or ["127.0.0.1", "localhost"]  # it listens on IPv4 loopback only
        self.secret = secrets.token_bytes(32)
        self.env = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(["html"]),
                               trim_blocks=True, lstrip_blocks=True)
        from npa_workflow.cli.cost import usd

        self.env.globals.update(status_class=views.status_class, duration=views.duration_text, usd=usd)
        self._specs: dict[str, views.SpecView | None] = {}  # run id → its spec's view (a run's spec is frozen)
        self.notices: dict[str, str] = {}  # run id → what the last action said
        self.hub = Hub(source, self.render_update)
        self.closing = threading.Event()  # set when the server stops: the event streams end
        self.server_exiting: Any = lambda: False  # the server's own flag (Ctrl-C), set by `server.ConsoleServer`

    def stopping(self) -> bool:
        return self.closing.is_set() or bool(self.server_exiting())

    # ---------------------------------------------------------------------------------------------- rendering
    def spec_view(self, run_id: str, data: RunData | None) -> views.SpecView | None:
        if run_id not in self._specs and data is not None and data.loaded is not None:
            self._specs[run_id] = views.spec_view(data.loaded, self.assume_minutes)
        return self._specs.get(run_id)

    def render_update(self, run_id: str, data: RunData | None) -> Update:
        """Everything the run page shows that changes, from one read: the graph's classes and the sections."""
        if data is None:
            return Update({"run_id": run_id, "missing": True}, None)
        view = self.spec_view(run_id, data)
        ctx = self.run_context(run_id, data, view)
        sections = {name: self.env.get_template(f"_{name}.html").render(ctx)
                    for name in ("summary", "failure", "timeline", "decisions", "cost")}
        payload = {"run_id": run_id, "status": data.report.get("status", ""), "statuses": ctx["statuses"],
                   "rounds": ctx["rounds"], "sections": sections}
        return Update(payload, data)

    def run_context(self, run_id: str, data: RunData, view: views.SpecView | None) -> dict[str, Any]:
        report = data.report
        status = str(report.get("status", ""))
        waves = report.get("waves") or []
        return {
            "run_id": run_id, "report": report, "status": status, "workflow": report.get("workflow", ""),
            "statuses": views.statuses(view, report), "rounds": views.rounds(view, report),
            "timeline": views.timeline(view, report), "failure": views.failure(report, self.source.can_act),
            "decisions": views.decision_rows(view, report), "cost": views.cost_view(view, report),
            "started_at": min((w.get("submitted_at") or w.get("started_at") or "" for w in waves), default=""),
            "console_link": data.console_link, "execution_arn": report.get("execution_arn", ""),
            "can_act": self.source.can_act, "running": status == "RUNNING", "notice": self.notices.get(run_id, ""),
        }

    def page(self, request: Request, template: str, **ctx: Any) -> HTMLResponse:
        session = request.cookies.get(SESSION_COOKIE) or ""
        new_session = not session
        if new_session:
            session = secrets.token_urlsafe(24)
        ctx.setdefault("source", self.source.describe())
        html = self.env.get_template(template).render(csrf=self.csrf_token(session), **ctx)
        response = HTMLResponse(html, status_code=ctx.get("status_code", 200))
        if new_session:
            response.set_cookie(SESSION_COOKIE, session, httponly=True, samesite="strict", path="/")
        return response

    def csrf_token(self, session: str) -> str:
        return hmac.new(self.secret, session.encode(), hashlib.sha256).hexdigest()

    def error(self, request: Request, status: int, title: str, message: str) -> HTMLResponse:
        return self.page(request, "error.html", title=title, message=message, status_code=status)

    # ---------------------------------------------------------------------------------------------- runs page
    async def runs(self, request: Request) -> HTMLResponse:
        workflow = request.query_params.get("workflow", "")
        status = request.query_params.get("status", "")
        try:
            page = max(1, int(request.query_params.get("page", "1")))
        except ValueError:
            page = 1
        try:
            rows = await asyncio.to_thread(self.source.runs)
        except ActionRefused as exc:
            return self.error(request, 502, "cannot list runs", str(exc))
        workflows = sorted({r["workflow"] for r in rows})
        statuses = sorted({r["status"] for r in rows})
        chosen = [r for r in rows
                  if (not workflow or r["workflow"] == workflow) and (not status or r["status"] == status)]
        pages = max(1, -(-len(chosen) // PAGE_SIZE))
        page = min(page, pages)
        shown = [dict(r) for r in chosen[(page - 1) * PAGE_SIZE: page * PAGE_SIZE]]

        def annotate() -> None:  # only the rows on this page: a running one's current states (one read each)
            for row in shown:
                row["duration"] = views.duration_text(views.seconds_between(
                    row.get("started_at"), row.get("ended_at") or None,
                    datetime.now(UTC) if row["status"] == "RUNNING" else None))
                row["current"] = ", ".join(self.source.current_states(row["run_id"])) \
                    if row["status"] == "RUNNING" else ""

        await asyncio.to_thread(annotate)

        def link(n: int) -> str:
            query = {k: v for k, v in (("workflow", workflow), ("status", status), ("page", str(n))) if v}
            return "/?" + urlencode(query)

        return self.page(request, "runs.html", rows=shown, workflows=workflows, statuses=statuses,
                         workflow=workflow, status=status, page=page, pages=pages, total=len(chosen),
                         prev_link=link(page - 1) if page > 1 else "", next_link=link(page + 1) if page < pages else "")

    # ---------------------------------------------------------------------------------------------- run page
    async def run_page(self, request: Request) -> HTMLResponse:
        run_id = request.path_params["run_id"]
        update = await self.hub.current(run_id)
        if update.data is None:
            return self.error(request, 404, "no such run", f"no run {run_id!r} in {self.source.describe()}")
        view = self.spec_view(run_id, update.data)
        ctx = self.run_context(run_id, update.data, view)
        graph_svg = svg.render_svg(view.graph, ctx["statuses"], ctx["rounds"]) if view is not None else ""
        return self.page(request, "run.html", graph_svg=graph_svg, **ctx)

    async def events(self, request: Request) -> StreamingResponse:
        run_id = request.path_params["run_id"]
        watcher, queue = await self.hub.subscribe(run_id)

        async def stream() -> Any:
            try:
                yield "retry: 1000\n\n"
                quiet = 0.0
                while not self.stopping():
                    try:
                        update = await asyncio.wait_for(queue.get(), timeout=1.0)
                    except TimeoutError:
                        quiet += 1.0
                        if quiet >= 15.0:
                            quiet = 0.0
                            yield ": keep-alive\n\n"  # proxies and the browser keep the stream open
                        continue
                    quiet = 0.0
                    yield f"event: run\ndata: {update.text}\n\n"
            finally:
                self.hub.unsubscribe(watcher, queue)

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})

    # ---------------------------------------------------------------------------------------------- logs
    def _log_source(self, request: Request) -> tuple[Any, list[Any]]:
        from npa_workflow.cli.logs import select

        run_id = request.path_params["run_id"]
        q = request.query_params
        try:
            iteration = int(q["iteration"]) if q.get("iteration") else None
            attempt = int(q["attempt"]) if q.get("attempt") else None
        except ValueError:
            return None, []
        sources = self.source.log_sources(run_id)
        chosen = select(sources, q.get("state") or None, iteration, attempt)
        return (chosen[-1] if chosen else None), sources

    @staticmethod
    def _redactor(source: Any) -> Any:
        """The values of the secrets the job was given (`cli.logs.LogSource`: its record's and the run's names),
        as this process's environment holds them: what `npa-workflow logs` redacts too."""
        return source.redactor()

    async def log_page(self, request: Request) -> HTMLResponse:
        from npa_workflow.cli.logs import read_tail

        run_id = request.path_params["run_id"]
        found, sources = await asyncio.to_thread(self._log_source, request)
        if found is None:
            states = sorted({s.state for s in sources})
            return self.error(request, 404, "no such log", f"run {run_id!r} has no wave matching that"
                              + (f" (states with waves: {', '.join(states)})" if states else ""))
        text, skipped, note = "", 0, ""
        if found.path is None:
            note = found.where
        else:
            try:
                data, skipped = await asyncio.to_thread(read_tail, found.path, LOG_TAIL_BYTES)
                text = self._redactor(found)(data.decode("utf-8", errors="replace"))
            except FileNotFoundError:
                note = f"no log at {found.path} yet (the job has not started, or its files were removed)"
        query = urlencode({k: v for k, v in (("state", found.state), ("iteration", found.iteration),
                                              ("attempt", found.attempt)) if v is not None})
        return self.page(request, "log.html", run_id=run_id, log=found, text=text, skipped=skipped, note=note,
                         follow=found.path is not None and found.status not in TERMINAL_JOB,
                         offset=skipped + len(text.encode()) if text else skipped, query=query,
                         attempts=[s for s in sources if s.state == found.state])

    async def log_events(self, request: Request) -> StreamingResponse:
        found, _ = await asyncio.to_thread(self._log_source, request)
        try:
            offset = max(0, int(request.query_params.get("offset", "0")))
        except ValueError:
            offset = 0
        redactor = self._redactor(found) if found is not None else None

        def job_ended() -> bool:
            from npa_workflow.cli.logs import logs_home

            try:
                record = json.loads((logs_home() / "jobs" / f"{found.job_id}.json").read_text(encoding="utf-8"))
            except (OSError, ValueError):
                return False
            return record.get("status") in TERMINAL_JOB

        async def stream() -> Any:
            nonlocal offset
            if found is None or found.path is None:
                yield "event: end\ndata: {}\n\n"
                return
            pending = b""
            ended = False
            while not self.stopping():
                try:
                    with open(found.path, "rb") as fh:
                        fh.seek(offset)
                        chunk = fh.read(LOG_TAIL_BYTES)
                except FileNotFoundError:
                    chunk = b""
                offset += len(chunk)
                pending += chunk
                # Whole lines only (a secret split across two reads would escape the redaction), unless ending.
                cut = len(pending) if ended else pending.rfind(b"\n") + 1
                if cut:
                    text = redactor(pending[:cut].decode("utf-8", errors="replace"))
                    pending = pending[cut:]
                    yield f"event: log\ndata: {json.dumps(text)}\n\n"
                if ended and not chunk:
                    yield "event: end\ndata: {}\n\n"
                    return
                if not chunk:
                    ended = await asyncio.to_thread(job_ended)
                    await asyncio.sleep(0.25)

        return StreamingResponse(stream(), media_type="text/event-stream", headers={"Cache-Control": "no-store"})

    # ---------------------------------------------------------------------------------------------- actions
    async def confirm(self, request: Request) -> HTMLResponse:
        run_id, action = request.path_params["run_id"], request.path_params["action"]
        if action not in ACTIONS:
            return self.error(request, 404, "no such page", f"/runs/{run_id}/{action}")
        return self.page(request, "confirm.html", run_id=run_id, action=action, can_act=self.source.can_act)

    def _same_origin(self, request: Request) -> bool:
        own = f"{request.url.scheme}://{request.headers.get('host', '')}"
        origin = request.headers.get("origin")
        if origin is not None:
            return origin == own
        referer = request.headers.get("referer")
        if referer:
            parts = urlsplit(referer)
            return f"{parts.scheme}://{parts.netloc}" == own
        return False  # neither: a browser always sends one of them with a form POST

    async def act(self, request: Request) -> Response:
        run_id, action = request.path_params["run_id"], request.path_params["action"]
        if action not in ACTIONS:
            return self.error(request, 404, "no such page", f"/runs/{run_id}/{action}")
        body = (await request.body())[:4096].decode("utf-8", errors="replace")
        token = (parse_qs(body).get("csrf") or [""])[0]
        session = request.cookies.get(SESSION_COOKIE) or ""
        if not self._same_origin(request):
            return self.error(request, 403, "refused", "this request came from another site (its Origin is not this "
                              "console's): actions are taken from the console's own pages only")
        if not session or not hmac.compare_digest(token, self.csrf_token(session)):
            return self.error(request, 403, "refused", "the form's session token is missing or stale: reload the "
                              "run page and try again")
        if not self.source.can_act:
            try:
                getattr(self.source, action)(run_id)
            except ActionRefused as exc:
                return self.error(request, 409, f"cannot {action}", str(exc))
        self.notices[run_id] = f"{action} requested at {time.strftime('%H:%M:%S')}"

        def do() -> None:
            try:
                getattr(self.source, action)(run_id)
                self.notices[run_id] = f"{action}: done"
            except ActionRefused as exc:
                self.notices[run_id] = f"{action} failed: {exc}"
            poke = getattr(self.source, "poke", None)
            if poke is not None:  # the outcome is shown live (a polled source shows it at its next read)
                poke(run_id)

        threading.Thread(target=do, name=f"console-{action}-{run_id}", daemon=True).start()
        return RedirectResponse(f"/runs/{run_id}", status_code=303)

    # ---------------------------------------------------------------------------------------------- app
    def app(self) -> Starlette:
        routes = [
            Route("/", self.runs),
            Route("/runs/{run_id:run_id}", self.run_page),
            Route("/runs/{run_id:run_id}/events", self.events),
            Route("/runs/{run_id:run_id}/logs", self.log_page),
            Route("/runs/{run_id:run_id}/logs/events", self.log_events),
            Route("/runs/{run_id:run_id}/{action}", self.confirm, methods=["GET"]),
            Route("/runs/{run_id:run_id}/{action}", self.act, methods=["POST"]),
            Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
        ]
        return Starlette(routes=routes, middleware=[Middleware(TrustedHostMiddleware, allowed_hosts=self.hosts)])
