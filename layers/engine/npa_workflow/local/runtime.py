"""The local runtime: run a spec's compiled state machine on an embedded AWS, as the deployed stack runs it.

`LocalRuntime(options).run()` does on one machine what the cloud stack does (docs/local.md):

1. starts the embedded AWS (`embedded_aws`, `enter_embedded_aws`, shared with `local.serve`): moto in server mode
   on 127.0.0.1 (`embedded_aws.moto_server`) with its fixes and speed-ups, its Lambda invocations routed to the
   handlers in `functions/` in this process (`embedded_aws.moto_lambda`), every DynamoDB item and S3 object
   written through to disk (`embedded_aws.durable_aws`), and the step gate, the only endpoint a step is given
   (`embedded_aws.step_gate`);
2. deploys `serve`'s stack with this one spec (`local.embedded_stack`, from the deployment model the CDK app
   builds from): the engine bucket, the bucket(s) the spec's config names, the ledger table, a role, every
   function of the table with the stack's environment, the spec's state machine (`<stack>_<spec>`, logged) with
   the functions' ARNs substituted, the catalog and the event rules;
3. freezes the run (spec, catalog, vars, options), writes Distributed Map member lists, records the run and
   starts the execution named by the run id, with the inbox Lambda's own function (`engine.start.start_run`);
4. delivers the stack's events through the event pump (`embedded_aws.event_pump`), which invokes the deployed
   functions through the Lambda API: the scheduled watch event every `tick_seconds`, and at once when a job
   this run's ledger recorded exits (`local_jobs.job_exits`) or the ledger records a job that already ended
   (the durable layer's item-write listener); the execution's end is told by moto's interpreter
   (`embedded_aws.execution_ends`) and read with `DescribeExecution` then, and once a second anyway;
5. when the execution has ended, sends its "Execution Status Change" to the deployed reap function (SUCCEEDED
   records the run's end; a failure cancels its jobs; with `--no-cancel-on-timeout` none is sent for a failure);
   on Ctrl-C or SIGTERM: StopExecution, `engine.cleanup.reap`, then the ABORTED status change; then writes
   `meta.json` and `report.json` and returns the run report (`run_report`).

State that outlives the process lives under `.npa-workflow/` in the current directory (or
`$NPA_WORKFLOW_HOME`): `jobs/` (the local executor's job records and logs) and `runs/<run-id>/`
(`meta.json`, `report.json`, `lambdas.log`, `lambda-failures.jsonl` (the events a function failed on, see
`embedded_aws.event_pump`), `step-access/` (the step gate's grants), and `aws/`: every DynamoDB item and S3
object of the run, written through as moto changes them). `resume=True` restores `aws/` into a fresh moto,
cancels the jobs a dead runtime left active, and starts a new execution `<run-id>-r<n>` of the same run: its
launches replay the waves that succeeded, whose outputs are back in S3.

One local run at a time per process: moto's configuration, `MOTO_PORT` and the in-process Lambdas'
environment are process-wide.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import secrets
import shutil
import signal
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from botocore.exceptions import ClientError

from npa_workflow import decisions, wiring
from npa_workflow.adapters.sfn_executions import SfnExecutions
from npa_workflow.compile.asl import compile_spec
from npa_workflow.embedded_aws.durable_aws import (
    HANDOFF_WAIT_S,
    RUN_STATE_DIR,
    STATE_FILE,
    DurableAws,
    StateInUse,
    durable_aws,
    held_elsewhere,
)
from npa_workflow.embedded_aws.event_pump import EventPump
from npa_workflow.embedded_aws.execution_ends import execution_ends
from npa_workflow.embedded_aws.heap import settled_heap
from npa_workflow.embedded_aws.in_process_calls import in_process_calls
from npa_workflow.embedded_aws.moto_fixes import moto_fixes
from npa_workflow.embedded_aws.moto_speedups import moto_speedups
from npa_workflow.embedded_aws.sdk_models import sdk_models_parsed_once
from npa_workflow.engine.restage import restage
from npa_workflow.engine.runs import RunOptions
from npa_workflow.engine.start import start_run
from npa_workflow.ledger import DynamoLedger, RunStatus, WaveAttempt
from npa_workflow.ledger.items import WAVE_SK_PREFIX, run_pk
from npa_workflow.local.embedded_stack import (  # noqa: F401 - the twin's names, re-exported
    EmbeddedStack,
    StackSpec,
    config_buckets,
    create_bucket,
    deploy_stack,
    twin_deployment,
)
from npa_workflow.local.run_waves import RunWaves
from npa_workflow.local_jobs.code_checkout import stage_folder
from npa_workflow.local_jobs.job_exits import EXIT_SUFFIX, JobExits
from npa_workflow.protocol import environment, errors, run_ids
from npa_workflow.protocol import functions as function_table
from npa_workflow.protocol.deployment import DEFAULT_MAX_WAIT_SECONDS
from npa_workflow.protocol.environment import SKYPILOT_ENDPOINT
from npa_workflow.protocol.stack import LOCAL_BUCKET, LOCAL_LEDGER_TABLE
from npa_workflow.render.code import CodeError, spec_code_root
from npa_workflow.spec.buckets import FIX as BUCKET_FIX
from npa_workflow.spec.buckets import bucket_name_problem
from npa_workflow.spec.catalog import find_catalog
from npa_workflow.spec.load import load_spec
from npa_workflow.spec.validate import LoadedSpec
from npa_workflow.timestamps import utc_now

LOG = logging.getLogger(__name__)

REGION = "us-east-1"
# The handlers that run in this process: the whole function table (the inbox for `serve`).
AWS_STATE_DIR = RUN_STATE_DIR
PROGRESS_SECONDS = 0.5  # the live display's refresh
DESCRIBE_SECONDS = 1.0  # the execution's status is read at least this often, told of its end or not
WATCH_FAILURES_TOLERATED = 10  # consecutive failed watch events (each retried twice) before the run is stopped
_active = threading.Lock()
RESUME_NEEDS_RUN_ID = ("--resume needs the run to resume (fix: name it with --run-id RUN_ID; "
                       "`npa-workflow list` lists the runs kept here)")


class LocalRunError(Exception):
    """Something the user can fix (a run id, a port, a resume without a run): the message says what."""


class LocalUsageError(LocalRunError):
    """The command line names something that cannot be used (the run to resume, the home folder): exit 2."""


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived: stopped as Ctrl-C is (a KeyboardInterrupt, so no `except Exception` swallows it), but
    reported as SIGTERM and ended with its conventional exit status, 128 + 15."""

    signum = signal.SIGTERM
    reason = "interrupted (SIGTERM)"


class RunInterrupted(Exception):  # noqa: N818 - not an error of the run, a request to stop it
    """Raised inside the run loop when `stop()` was called (or Ctrl-C / SIGTERM arrived)."""


@dataclass(frozen=True)
class LocalRunOptions:
    spec: Path
    catalog: Path | None = None
    variables: Mapping[str, str] = field(default_factory=dict)
    run_id: str | None = None
    retries: int = 0
    retry_interval_seconds: int = 30
    max_infrastructure_recoveries: int = 1
    max_concurrency: int = 0
    max_wait_seconds: int = DEFAULT_MAX_WAIT_SECONDS  # the cloud's default deadline per wave (7 days)
    cancel_on_timeout: bool = True
    assume_decision: str | None = None
    resume: bool = False
    port: int | None = None
    home: Path | None = None  # default: $NPA_WORKFLOW_HOME, else ./.npa-workflow
    secret_names: tuple[str, ...] = ()  # --secret-env: values from this process's environment at launch
    executor: str = "local"  # or "skypilot": jobs go to the SkyPilot API server at skypilot_endpoint
    skypilot_endpoint: str | None = None
    tick_seconds: float = 0.25
    allow_unknown_keys: bool = False  # a legacy spec's unknown keys become warnings


class Progress(Protocol):
    """What the CLI shows while a run goes (all optional no-ops in `NoProgress`). A progress may also have
    `trigger_waiting(watermark)`: called once per trigger that starts waiting for objects to land."""

    def started(self, run_id: str, execution_name: str, endpoint_url: str) -> None: ...

    def update(self, waves: list[WaveAttempt], execution_status: str) -> None: ...

    def finished(self) -> None: ...


class NoProgress:
    def started(self, run_id: str, execution_name: str, endpoint_url: str) -> None:
        pass

    def update(self, waves: list[WaveAttempt], execution_status: str) -> None:
        pass

    def finished(self) -> None:
        pass


def local_home(explicit: Path | None = None) -> Path:
    if explicit is not None:
        return Path(explicit).resolve()
    env = os.environ.get(environment.HOME, "").strip()
    return Path(env).resolve() if env else (Path.cwd() / ".npa-workflow").resolve()


def usable_home(home: Path, explicit: bool = False) -> Path:
    """`home` made if missing; `LocalUsageError` naming where it came from when it cannot be a folder of ours."""
    if explicit:
        source, fix = f"home {home}", "give a folder you can write"
    elif os.environ.get(environment.HOME, "").strip():
        source = f"${environment.HOME}={os.environ[environment.HOME].strip()}"
        fix = f"point ${environment.HOME} at a folder you can write, or unset it to use ./.npa-workflow"
    else:
        source = f"the run folder {home}"
        fix = f"run from a directory you can write, or set ${environment.HOME} to a folder you can write"
    if home.exists() and not home.is_dir():
        problem = "it is a file, not a folder"
    else:
        try:
            home.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            problem = f"cannot create it ({exc.strerror or exc})"
        else:
            problem = "" if os.access(home, os.W_OK | os.X_OK) else "it is not writable"
    if problem:
        raise LocalUsageError(f"{source}: {problem} (fix: {fix})")
    return home


def default_run_id(workflow: str) -> str:
    stem = re.sub(r"[^A-Za-z0-9-]+", "-", workflow).strip("-")[:24] or "run"
    return f"{stem}-{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"


def check_run_id(run_id: str) -> str:
    problem = run_ids.run_id_problem(run_id)  # the one rule `submit`, the inbox and resume use too
    if problem is not None:
        raise LocalRunError(problem)
    return run_id


def local_heartbeat_seconds(max_wait_seconds: int, default: int = 300) -> int:
    """Step Functions requires HeartbeatSeconds < TimeoutSeconds: a `run` deadline shorter than the stack's
    heartbeat is honoured exactly, with a heartbeat just inside it (the watch beats every 40 % of it)."""
    if max_wait_seconds <= 0:
        return default
    return min(default, max_wait_seconds - 1)  # 0 (no heartbeat) for a 1-second deadline


def _reset_quietly(server: Any) -> None:
    try:
        server.reset()
    except Exception as exc:  # noqa: BLE001 - the server is going away anyway
        LOG.debug("moto reset failed: %s", exc)


def _write_json(path: Path, doc: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1, sort_keys=True, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def metrics_off_in_this_process() -> None:
    """Powertools Metrics prints its EMF lines to stdout, where Lambda hands them to CloudWatch. Here they have
    nowhere to go and would land in the CLI's own output (`run --json`), also from a handler thread that outlives
    the run's environment (`process_environment` restores it): off for the whole process."""
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")


@contextlib.contextmanager
def process_environment(values: Mapping[str, str]) -> Iterator[None]:
    """Set environment variables for the run (in-process Lambdas read them), restore them afterwards."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


class _LogSink:
    """The handlers' log file, whose writes a full or read-only disk refuses quietly: `logging` would print a
    "--- Logging error ---" traceback for every line (hundreds a minute); the run says what the disk did once."""

    def __init__(self, file: Any) -> None:
        self._file = file

    def write(self, text: str) -> int:
        try:
            return self._file.write(text)
        except OSError:
            return 0

    def flush(self) -> None:
        with contextlib.suppress(OSError):
            self._file.flush()


@contextlib.contextmanager
def handler_logs_to(path: Path) -> Iterator[None]:
    """The handlers' structured logs go to a file: they would otherwise interleave with the CLI's output."""
    import importlib

    path.parent.mkdir(parents=True, exist_ok=True)
    swapped: list[tuple[logging.StreamHandler, Any]] = []
    with open(path, "a", encoding="utf-8") as file:
        sink = _LogSink(file)
        for name in function_table.NAMES:
            module = importlib.import_module(f"functions.{name}.handler")
            handler = getattr(getattr(module, "logger", None), "registered_handler", None)
            if isinstance(handler, logging.StreamHandler):
                swapped.append((handler, _swap_stream(handler, sink)))
        try:
            yield
        finally:
            for handler, stream in swapped:
                _swap_stream(handler, stream)


def _swap_stream(handler: logging.StreamHandler, stream: Any) -> Any:
    """`StreamHandler.setStream` without its flush of the old stream: a handler module imported while stdout was
    another one (a test's captured stdout, since closed; an embedding host's) would fail the whole start with
    "I/O operation on closed file" over a stream no line goes to any more."""
    with handler.lock:  # type: ignore[union-attr] # created by Handler.__init__
        old, handler.stream = handler.stream, stream
    return old


@contextlib.contextmanager
def warnings_quiet_after_storage_fault(fault: Callable[[], BaseException | None]) -> Iterator[None]:
    """Once the disk has refused the stack's state, the run stops with one line that says so and how to resume
    (`cli.run`); what the engine warns of meanwhile (a 500 from a write the disk refused, say "watch: noting
    changed runs") is that fault's echo, not news. The CLI configures no logging, so those warnings reach stderr
    through the last-resort handler: filtered there, for the run only (`serve` does not stop on a storage fault,
    and its later warnings may be news)."""
    handler = logging.lastResort
    if handler is None:
        yield
        return

    def news(record: logging.LogRecord) -> bool:
        return fault() is None or not record.name.startswith("npa_workflow")

    handler.addFilter(news)
    try:
        yield
    finally:
        handler.removeFilter(news)


@contextlib.contextmanager
def signals_interrupt() -> Iterator[None]:
    """SIGTERM behaves like Ctrl-C (main thread only; elsewhere `LocalRuntime.stop()` is the way)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_term(signum: int, frame: Any) -> None:
        raise Terminated

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def signals_ignored() -> Iterator[None]:
    """While cleaning up after an interrupt, a second Ctrl-C must not leave jobs behind."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


@dataclass
class _Deployed:
    clients: dict[str, Any]
    stack: EmbeddedStack
    state_machine_arn: str = ""


class LocalRuntime:
    """One local run (or the resumption of one). Not reusable: build one per run."""

    def __init__(self, options: LocalRunOptions, progress: Progress | None = None,
                 on_endpoint: Callable[[str], None] | None = None,
                 on_warnings: Callable[[list[Any]], None] | None = None) -> None:
        self.options = options
        self.progress = progress or NoProgress()
        self._shows_progress = not isinstance(self.progress, NoProgress)
        self.on_endpoint = on_endpoint
        self.on_warnings = on_warnings
        self.home = local_home(options.home)
        self._stop = threading.Event()
        self._stop_reason = ""
        self.terminated_by: int | None = None  # the signal that stopped the run (SIGTERM), not Ctrl-C or stop()
        self.endpoint_url = ""
        self.run_id = ""
        self.execution_arn = ""
        self.execution_name = ""
        self.loaded: LoadedSpec | None = None
        self._machine: Any = None  # the CompiledMachine, once deployed
        self._code: tuple[Path, str] = (Path(), "")  # the staged copy of the steps' code and its digest, once loaded
        self.pump: EventPump  # the event sources of the deployed stack, once deployed
        self._settle_heap: Callable[[], None] = lambda: None

    # ---------------------------------------------------------------------------------------- public
    def stop(self, reason: str = "stopped") -> None:
        """Ask a run going on another thread to stop as Ctrl-C would (StopExecution, then reap)."""
        self._stop_reason = reason
        self._stop.set()

    def run(self) -> dict[str, Any]:
        """Run to the end; returns the run report (`run_report.build_report`).

        Raises `SpecError` for an invalid spec and `LocalRunError` for anything else the user can fix;
        a failed run is not an exception: its report says FAILED.
        """
        self._began = time.monotonic()  # the run's duration: a wall clock set back or forward does not count
        if not _active.acquire(blocking=False):
            raise LocalRunError("another local run is already active in this process")
        usable_home(self.home, explicit=self.options.home is not None)
        metrics_off_in_this_process()
        try:
            with settled_heap() as self._settle_heap:  # settled once deployed (embedded_aws.heap)
                return self._run()
        finally:
            _active.release()

    # ---------------------------------------------------------------------------------------- phases
    def _prepare(self) -> tuple[LoadedSpec, str, str, dict[str, str], dict[str, Any]]:
        """Load and check everything before any server starts. Returns (loaded, spec text, catalog text,
        variables, meta)."""
        opt = self.options
        spec_path = Path(opt.spec)
        variables = {str(k): str(v) for k, v in opt.variables.items()}
        meta: dict[str, Any] = {}
        run_id = opt.run_id
        if opt.resume:
            if not run_id:
                raise LocalUsageError(RESUME_NEEDS_RUN_ID)
            meta_path = self.home / "runs" / check_run_id(run_id) / "meta.json"
            if not meta_path.is_file() or not (meta_path.parent / AWS_STATE_DIR / STATE_FILE).is_file():
                raise LocalRunError(
                    f"no local run {run_id!r} to resume under {meta_path.parent} "
                    "(runs are found under .npa-workflow/ in the directory they were started from, "
                    "or $NPA_WORKFLOW_HOME)"
                )
            meta = _resumable_meta(run_id, meta_path)
            # Before the run's vars meet this spec (another spec's vars would read as unknown tokens of this one).
            _check_same_workflow(run_id, meta, spec_path)
            variables = {**meta.get("vars", {}), **variables}  # the run's vars, overridden by the new ones
        loaded = load_spec(spec_path, catalog=opt.catalog, overrides=variables,
                           allow_unknown_keys=opt.allow_unknown_keys)
        if loaded.warnings and self.on_warnings:
            self.on_warnings(list(loaded.warnings))
        _preflight(loaded, spec_path, opt.secret_names, opt.executor)
        spec = loaded.spec
        if spec.runtime_only and opt.assume_decision:
            raise LocalRunError(
                f"{spec_path}: metadata.executionMode: runtime: this spec must follow the decisions its steps "
                "write; --assume-decision is refused (remove it, or remove executionMode: runtime)"
            )
        if meta and meta.get("workflow") != spec.name:
            raise LocalUsageError(_other_workflow(run_id, meta, spec.name, spec_path))
        run_id = check_run_id(default_run_id(spec.name) if run_id is None else run_id)  # "" is refused, not replaced
        if not opt.resume and (self.home / "runs" / run_id / "meta.json").exists():
            raise LocalRunError(
                f"run {run_id!r} already exists under {self.home / 'runs' / run_id}: "
                "pass --resume to continue it, or choose another --run-id"
            )
        self.run_id = run_id
        try:  # the steps start in a copy of their code, as a task in its file_mounts (local_jobs.code_checkout)
            self._code = stage_folder(spec_code_root(spec_path, loaded), self.home)
        except CodeError as exc:
            raise LocalRunError(f"{spec_path}: {exc}") from None
        spec_text = spec_path.read_text(encoding="utf-8")
        catalog_path = find_catalog(opt.catalog, spec_path)
        catalog_text = catalog_path.read_text(encoding="utf-8") if catalog_path else ""
        return loaded, spec_text, catalog_text, variables, meta

    def _run(self) -> dict[str, Any]:
        from npa_workflow.embedded_aws.moto_server import start_moto_server

        loaded, spec_text, catalog_text, variables, meta = self._prepare()
        self.loaded = loaded
        getattr(self.progress, "spec_loaded", lambda _: None)(loaded)  # optional: a progress may use the spec
        run_dir = self.home / "runs" / self.run_id
        if self.options.resume and held_elsewhere(run_dir / AWS_STATE_DIR, wait_s=HANDOFF_WAIT_S):
            # refused before anything starts (the durable state's own lock refuses it again, race-free, below);
            # a runtime killed a moment ago may still be handing the lock over (durable_aws.HANDOFF_WAIT_S)
            raise LocalRunError(in_use_message(run_dir))
        run_dir.mkdir(parents=True, exist_ok=True)
        executions = list(meta.get("executions", []))
        self.execution_name = run_ids.execution_name(self.run_id, len(executions) + 1)
        if not self.options.resume:  # a run killed before it wrote meta.json left nothing to resume
            shutil.rmtree(run_dir / AWS_STATE_DIR, ignore_errors=True)
        try:
            server = start_moto_server(self.options.port)
        except RuntimeError as exc:
            raise LocalRunError(str(exc)) from None
        self.endpoint_url = server.endpoint_url
        if self.on_endpoint:
            self.on_endpoint(self.endpoint_url)
        env = {
            **embedded_aws_env(server, self.home, self.options.executor),
            **({environment.SKYPILOT_ENDPOINT: self.options.skypilot_endpoint}
               if self.options.skypilot_endpoint else {}),
        }
        with contextlib.ExitStack() as stack:
            # Entered first, so it is left last: a handler still running when the run stops (the Lambda of a Catch
            # the disk's 500 led to) ends while the embedded AWS is left (`in_process_lambdas`), its echo quiet too.
            durables: list[DurableAws] = []
            stack.enter_context(warnings_quiet_after_storage_fault(
                lambda: durables[0].storage_fault if durables else None))
            durable = enter_embedded_aws(stack, server, env, run_dir / "lambdas.log", run_dir / AWS_STATE_DIR)
            durables.append(durable)
            stack.enter_context(signals_interrupt())
            self._exit_stack = stack  # the deployed stack's environment is entered on it
            return self._execute(loaded, spec_text, catalog_text, variables, executions, durable)

    def _execute(self, loaded: LoadedSpec, spec_text: str, catalog_text: str, variables: dict[str, str],
                 executions: list[dict[str, Any]], durable: DurableAws) -> dict[str, Any]:
        from npa_workflow.run_report import build_report

        engine = wiring.engine_from_environment()
        run_dir = self.home / "runs" / self.run_id
        interrupted = False
        deployed: _Deployed | None = None
        status: str | None = None
        previous_items: list[dict[str, Any]] = []
        try:
            if self.options.resume:
                # Everything the run wrote before (ledger, S3 outputs, frozen inputs) is back in place.
                durable.restore_objects()
            deployed = self._deploy(loaded, engine.ledger, durable)
            self._settle_heap()
            if self.options.resume:
                durable.restore_items()
                # Jobs still active in the ledger belong to a runtime that died (killed, machine restarted):
                # their local AWS died with it, so they cannot succeed. Cancel them by exact id (confirmed
                # gone) so the new execution relaunches those waves instead of adopting them.
                self._reap(engine, "its local runtime ended before the job did; relaunched by --resume", "ABORTED")
                # What had succeeded before this execution starts (the report's `replayed`), read after the reap:
                # a job that exited 0 (outputs in place) while its runtime died before recording it, e.g. killed
                # between the watch's SendTaskSuccess and its ledger write, is recorded SUCCEEDED by the reap and
                # replayed by the new execution like any other wave the earlier one finished.
                previous_items = self._ledger_items(engine.ledger)
            sfn = SfnExecutions(deployed.clients["stepfunctions"])  # the Executions port on the local Step Functions
            self.execution_arn = self._start(loaded, engine, sfn, deployed, spec_text, catalog_text, variables)
            executions.append({"name": self.execution_name, "arn": self.execution_arn, "started_at": utc_now()})
            self._write_meta(run_dir, loaded, variables, executions)
            self.progress.started(self.run_id, self.execution_name, self.endpoint_url)
            status = self._wait(engine, sfn, RunWaves(durable, engine.ledger.table_name, self.run_id))
        except (KeyboardInterrupt, RunInterrupted) as exc:
            interrupted = True
            if isinstance(exc, Terminated):
                self.terminated_by = exc.signum
                self._stop_reason = self._stop_reason or exc.reason
            with signals_ignored():
                status = self._interrupt(engine, deployed)
        finally:
            self.progress.finished()
            # an unexpected error is on its way up: still leave no job behind (none before the deploy ended)
            if status is None and deployed is not None:
                with contextlib.suppress(Exception), signals_ignored():
                    self._reap(engine, "the local runtime failed", "FAILED")
        with signals_ignored():
            if status == "SUCCEEDED":
                self._status_changed(engine, deployed, status)
            elif interrupted:
                self._reap(engine, self._stop_reason or "interrupted (Ctrl-C)", status)
                self._status_changed(engine, deployed, status)
            else:
                # A failure no Catch handled (so no cleanup recorded its cause) is recorded from the execution,
                # then the status change goes to the reap function: no job outlives a failed run.
                self._record_uncaught_failure(engine, deployed, status)
                if self.options.cancel_on_timeout:
                    self._status_changed(engine, deployed, status)
                # else: the cleanup left a timed-out wave's job running on purpose (--no-cancel-on-timeout)
            if executions and self.execution_arn:
                executions[-1].update(status=status, ended_at=utc_now())
            items = self._ledger_items(engine.ledger)
            self._write_meta(run_dir, loaded, variables, executions)
            report = build_report(
                run_id=self.run_id, workflow=loaded.spec.name, loaded=loaded, status=status, items=items,
                execution_arn=self.execution_arn,
                sfn=deployed.clients["stepfunctions"] if deployed and self.execution_arn else None,
                previous_items=previous_items,
                interrupted_reason=(self._stop_reason or "interrupted (Ctrl-C)") if interrupted else "",
            )
            report["elapsed_seconds"] = round(time.monotonic() - self._began, 3)
            _write_json(run_dir / "report.json", report)
        return report

    def _record_uncaught_failure(self, engine: Any, deployed: _Deployed | None, status: str) -> str:
        from npa_workflow.ledger import RunError
        from npa_workflow.run_report import execution_failure

        reason = f"execution ended {status}"
        run = engine.ledger.get_run(self.run_id)
        if deployed is None or not self.execution_arn or run is None or run.status != RunStatus.RUNNING:
            return reason
        state, message = execution_failure(deployed.clients["stepfunctions"], self.execution_arn, status=status)
        with contextlib.suppress(Exception):
            engine.ledger.update_run_status(self.run_id, RunStatus(status), RunError(state=state, message=message))
        return message

    def _status_changed(self, engine: Any, deployed: _Deployed | None, status: str) -> None:
        """EventBridge's "Execution Status Change" for the ended execution, to the reap function (SUCCEEDED:
        it records the run's end; FAILED/ABORTED/TIMED_OUT: it cancels every job of the run by exact id)."""
        if deployed is None or not self.execution_arn:
            return
        execution = SfnExecutions(deployed.clients["stepfunctions"]).describe(self.execution_arn)
        # moto may describe a stopped execution FAILED (see local.serve.record_stops): the status is the caller's
        if self.pump.execution_status_changed(replace(execution, status=status)) is None:
            # reap failed every attempt: still leave nothing
            if status == "SUCCEEDED":
                engine.ledger.update_run_status(self.run_id, RunStatus.SUCCEEDED)
            else:
                self._reap(engine, f"execution ended {status}", status)

    def _reap(self, engine: Any, reason: str, status: str) -> None:
        from npa_workflow.engine.cleanup import reap

        try:
            reap(engine, self.run_id, reason, status=RunStatus(status))
        except Exception as exc:  # noqa: BLE001 - reported; the report is still written
            from npa_workflow.storage_errors import is_storage_fault

            LOG.log(logging.DEBUG if is_storage_fault(exc) else logging.WARNING, "reap of run %s failed: %s",
                    self.run_id, exc)

    # ---------------------------------------------------------------------------------------- deploy
    def _deploy(self, loaded: LoadedSpec, ledger: DynamoLedger, durable: DurableAws) -> _Deployed:
        """`serve`'s stack with this one spec (`local.embedded_stack`), its machine compiled with the run's options."""
        import boto3

        opt = self.options
        session = boto3.session.Session(region_name=REGION)
        clients = {name: session.client(name, endpoint_url=self.endpoint_url)
                   for name in ("s3", "iam", "lambda", "stepfunctions", "logs", "events")}
        buckets = self._buckets(loaded)
        for bucket in buckets:
            if reason := bucket_name_problem(bucket):  # a run-time value (a run.* token) validation could not see
                raise LocalRunError(f"{opt.spec}: config: bucket {bucket!r} is not a legal S3 bucket "
                                    f"name: it {reason} (fix: {BUCKET_FIX})")
            try:
                create_bucket(clients["s3"], bucket)
            except ClientError as exc:
                error = exc.response.get("Error", {})
                raise LocalRunError(
                    f"{opt.spec}: config: cannot create the local bucket {bucket!r}: "
                    f"{error.get('Code')}: {error.get('Message')} (fix the bucket name in config)"
                ) from None
        heartbeat = local_heartbeat_seconds(opt.max_wait_seconds)
        deployment = twin_deployment(
            max_wait_seconds=opt.max_wait_seconds, executor=opt.executor,
            skypilot_endpoint=opt.skypilot_endpoint or os.environ.get(SKYPILOT_ENDPOINT, ""),
            trigger_event_buckets=[b for b in buckets if b != LOCAL_BUCKET],
            heartbeat=heartbeat if heartbeat != twin_deployment().heartbeat_seconds else None,
        )
        self._machine = compile_spec(loaded, deployment.compile_options(
            retries=opt.retries,
            retry_interval_seconds=opt.retry_interval_seconds,
            max_infrastructure_recoveries=opt.max_infrastructure_recoveries,
            max_concurrency_cap=opt.max_concurrency,
        ))
        catalog_path = find_catalog(opt.catalog, Path(opt.spec))
        spec = StackSpec(loaded.spec.name, Path(opt.spec).read_bytes(), self._machine.definition)
        try:
            catalog = catalog_path.read_bytes() if catalog_path else None
            stack = deploy_stack(clients, deployment, [spec], catalog=catalog,
                                 data_buckets=[b for b in buckets if b != LOCAL_BUCKET],
                                 failures_path=self.home / "runs" / self.run_id / "lambda-failures.jsonl",
                                 ledger=ledger, storage_fault=lambda: durable.storage_fault)
        except ClientError as exc:
            message = exc.response.get("Error", {}).get("Message") or str(exc)
            raise LocalRunError(f"{opt.spec}: the compiled state machine was rejected by the local "
                                f"Step Functions: {message[:1000]}") from None
        self._exit_stack.enter_context(process_environment(stack.process_environment()))
        self.pump = stack.pump
        return _Deployed(clients=clients, stack=stack, state_machine_arn=stack.machines[loaded.spec.name])

    def _buckets(self, loaded: LoadedSpec) -> list[str]:
        """The engine bucket, `config.bucket`, and any other bucket an `s3://` value of the config names."""
        return [LOCAL_BUCKET, *config_buckets(loaded, self.run_id)]

    def _start(self, loaded: LoadedSpec, engine: Any, sfn: SfnExecutions, deployed: _Deployed, spec_text: str,
               catalog_text: str, variables: dict[str, str]) -> str:
        """Freeze the run, record it and start its execution exactly as the inbox Lambda does (`engine.start`).
        The frozen files are written again on a resume: it runs with the spec and vars it is resumed with."""
        opt = self.options
        options = RunOptions(
            assume_decision=decisions.normalize(opt.assume_decision) if opt.assume_decision else "",
            workdir=str(self._code[0]), code_digest=self._code[1],  # the staged copy of the code
            cancel_on_timeout=opt.cancel_on_timeout,
            max_wait_seconds=opt.max_wait_seconds,
            secret_names=tuple(opt.secret_names),
        )
        if opt.resume:  # fixed code since the run failed: said in its report (engine.restage)
            restage(engine.runs, engine.ledger, self.run_id, "", self._code[1], rewrite=False)
        started = start_run(
            engine, sfn, machine_arn=deployed.state_machine_arn, compiled=self._machine, loaded=loaded,
            spec_text=spec_text, catalog_text=catalog_text, run_id=self.run_id, variables=variables,
            options=options, execution_name=self.execution_name,
            record_options={"local": True, **options.to_json()}, refreeze=True,
        )
        return started.execution_arn

    # ---------------------------------------------------------------------------------------- the run
    def _wait(self, engine: Any, sfn: SfnExecutions, waves: RunWaves) -> str:
        jobs = self.home / "jobs"
        exits = JobExits(jobs)
        ended = threading.Event()

        def execution_ended(arn: str) -> None:
            if arn == self.execution_arn:
                ended.set()
                exits.nudge()

        launched: set[str] = set()  # the jobs this run's ledger recorded (the waves the watch can finish)

        def recorded(job_id: str) -> None:
            if job_id not in launched:
                launched.add(job_id)
                # A job can end before its launch has recorded its id (a no-op step does): its exit was let pass
                # (`_wait_for_end`), so the watch looks now.
                if (jobs / f"{job_id}{EXIT_SUFFIX}").exists():
                    exits.nudge()

        ledger_table, run_key = engine.ledger.table_name, run_pk(self.run_id)

        def item_written(table: str, key: dict[str, Any], item: dict[str, Any] | None) -> None:
            # The launch records the job's id (its submission) before it re-checks for a cancel and returns: from
            # that write on, the watch can finish the job's wave.
            if (item is not None and table == ledger_table and key.get("pk", {}).get("S") == run_key
                    and key.get("sk", {}).get("S", "").startswith(WAVE_SK_PREFIX)):
                job_id = WaveAttempt.from_item(item).job_id
                if job_id:
                    recorded(job_id)

        with execution_ends(execution_ended), waves.durable.item_written(item_written):
            return self._wait_for_end(engine, sfn, waves, exits, ended, launched)

    def _wait_for_end(self, engine: Any, sfn: SfnExecutions, waves: RunWaves, exits: JobExits,
                      ended: threading.Event, launched: set[str]) -> str:
        failures = 0
        last_progress = 0.0
        last_described = time.monotonic()
        trigger_waiting = getattr(self.progress, "trigger_waiting", None)
        said_waiting: set[tuple[str, str]] = set()  # (state, loops key): each waiting trigger is said once
        while True:
            if self._stop.is_set():
                raise RunInterrupted(self._stop_reason)
            # The scheduled watch event, to the deployed watch function (its retries are the pump's).
            if self.pump.scheduled_watch() is not None:
                failures = 0
            elif waves.durable.storage_fault is not None:
                # it failed on the disk (the pump said nothing of it): the one line below says so, with the fix
                raise waves.durable.storage_fault
            else:  # a transient error must not end the run; a lasting one must
                failures += 1
                LOG.warning("the watch function failed (%d in a row)", failures)
                if failures >= WATCH_FAILURES_TOLERATED:
                    self._stop_reason = (f"the watch function failed {failures} times in a row; its events are in "
                                         f"{self.pump.failures_path}")
                    raise RunInterrupted(self._stop_reason) from None
            now = time.monotonic()
            # The interpreter says when the execution ends (embedded_aws.execution_ends); the API's status is read then,
            # and every DESCRIBE_SECONDS in case it could not say (not after every wake-up: a round trip a wave).
            status = "RUNNING"
            if ended.is_set() or now - last_described >= DESCRIBE_SECONDS:
                status = sfn.describe(self.execution_arn).status
                last_described = now
            if status != "RUNNING" or (self._shows_progress and now - last_progress >= PROGRESS_SECONDS):
                # every wave's items, growing with the run: read for the display (from the durable record, only
                # when an item changed: local.run_waves), not at every wake-up
                self.progress.update(waves.waves(), status)
                last_progress = now
                for mark in waves.watermarks() if trigger_waiting else ():
                    if mark.waiting and (mark.state, mark.loops_key) not in said_waiting:
                        said_waiting.add((mark.state, mark.loops_key))
                        trigger_waiting(mark)
            if waves.durable.storage_fault is not None:
                # The run's state can no longer be written (a full or read-only disk): nothing it does from now on
                # would be kept. Stop here, resumable, and say why (cli.run: one line with the fix). Before an
                # ended execution's status too: one the disk ended (a step's call answered 500) failed of the disk.
                raise waves.durable.storage_fault
            if status != "RUNNING":
                return self._settled_status(sfn, status)
            # Until the tick, a nudge, or the exit of a job the ledger recorded (the watch can finish its wave at
            # once). Another exit is let pass: a job of another run sharing the home, or one that ended before its
            # launch recorded it (that record nudges; a watch pass now could not finish the wave).
            deadline = time.monotonic() + self.options.tick_seconds
            while exits.wait(max(0.0, deadline - time.monotonic()), self._stop) and not exits.last_exits & launched:
                pass

    def _settled_status(self, sfn: SfnExecutions, status: str) -> str:
        """moto can report FAILED a moment before the error is set: wait briefly for it."""
        deadline = time.monotonic() + 1.0
        while status == "FAILED" and time.monotonic() < deadline:
            execution = sfn.describe(self.execution_arn)
            if execution.error is not None or execution.cause is not None:
                break
            time.sleep(0.05)
        return status

    def _interrupt(self, engine: Any, deployed: _Deployed | None) -> str:
        """Ctrl-C: stop the execution, cancel its jobs, release the tokens it waits on."""
        reason = self._stop_reason or "interrupted (Ctrl-C)"
        if not self.execution_arn or deployed is None:
            return "ABORTED"
        sfn = SfnExecutions(deployed.clients["stepfunctions"])
        tokens = [w.task_token for w in engine.ledger.active_waves() if w.run_id == self.run_id and w.task_token]
        tokens += [m.task_token for m in engine.ledger.active_watches() if m.run_id == self.run_id and m.task_token]
        with contextlib.suppress(Exception):
            sfn.stop(self.execution_arn, errors.RUN_INTERRUPTED, reason)
        self._reap(engine, reason, "ABORTED")
        # moto's interpreter notices a stop only when the waiting Task ends: end those Tasks now.
        for token in tokens:
            with contextlib.suppress(Exception):
                engine.callbacks.fail(token, errors.RUN_INTERRUPTED, reason)
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                if sfn.describe(self.execution_arn).status != "RUNNING":
                    break
            time.sleep(0.05)
        return "ABORTED"

    # ---------------------------------------------------------------------------------------- ledger file
    def _ledger_items(self, ledger: DynamoLedger) -> list[dict[str, Any]]:
        from npa_workflow.run_report import ledger_items

        return ledger_items(ledger, self.run_id)

    def _write_meta(self, run_dir: Path, loaded: LoadedSpec, variables: dict[str, str],
                    executions: list[dict[str, Any]]) -> None:
        _write_json(run_dir / "meta.json", {
            "run_id": self.run_id, "workflow": loaded.spec.name, "spec": str(Path(self.options.spec).resolve()),
            "vars": variables, "executions": executions,
        })


def _preflight(loaded: LoadedSpec, spec_path: Path, secret_names: tuple[str, ...], executor: str) -> None:
    """Every secret the plan's jobs need is in this environment before anything starts, and for local jobs every
    program they start is on its PATH (engine.preflight)."""
    from npa_workflow.engine.preflight import local_problems, local_secret_problems
    from npa_workflow.errors import SpecError

    problems = (local_problems(loaded, "run", wiring.local_job_env()["PATH"], secret_names) if executor == "local"
                else local_secret_problems(loaded, "run", secret_names))
    if problems:  # one line each, as the spec's own errors are printed
        raise SpecError([replace(p, file=str(spec_path)) for p in problems])


def _resumable_meta(run_id: str, meta_path: Path) -> dict[str, Any]:
    """A resumed run's `meta.json`, after checking that its kept state is whole: a damaged file is one line naming
    it and the fix, and an emptied state (no record of the run) is refused, never resumed as a new run."""
    import sqlite3

    from npa_workflow.embedded_aws.durable_aws import run_ledger_items

    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        if not isinstance(meta, dict):
            raise ValueError("not a JSON object")
    except (ValueError, UnicodeDecodeError) as exc:
        raise LocalRunError(f"{meta_path}: damaged ({exc}); run {run_id!r} cannot be resumed from it (fix: restore "
                            "the file from a backup, or start the run anew with another --run-id)") from None
    state = meta_path.parent / AWS_STATE_DIR / STATE_FILE
    try:
        items = run_ledger_items(meta_path.parent) or [] if state.stat().st_size else []
    except sqlite3.DatabaseError as exc:
        raise LocalRunError(f"{state}: damaged ({exc}); run {run_id!r} cannot be resumed from it (fix: restore the "
                            "file from a backup, or start the run anew with another --run-id)") from None
    if not any(item.get("kind", {}).get("S") == "RUN" for item in items):
        raise LocalRunError(f"{state}: holds no record of run {run_id!r} (emptied or truncated): resuming would "
                            "start it over as a new run (fix: restore the file from a backup, or start the run "
                            "anew with another --run-id)")
    return meta


def _check_same_workflow(run_id: str, meta: Mapping[str, Any], spec_path: Path) -> None:
    """A resume names the run's own spec: its metadata.name, read before anything else of it is checked."""
    from npa_workflow.errors import SpecError
    from npa_workflow.spec.loader import load_yaml_file

    try:
        raw = load_yaml_file(spec_path)
    except (SpecError, OSError):
        return  # the spec's own load reports it
    metadata = raw.get("metadata") if isinstance(raw, dict) else None
    name = metadata.get("name") if isinstance(metadata, dict) else None
    if isinstance(name, str) and name != meta.get("workflow"):
        raise LocalUsageError(_other_workflow(run_id, meta, name, spec_path))


def _other_workflow(run_id: str, meta: Mapping[str, Any], name: str, spec_path: Path) -> str:
    theirs = meta.get("spec") or "its spec file"
    return (f"{spec_path}: run {run_id!r} is a run of workflow {meta.get('workflow')!r} ({theirs}), not {name!r} "
            f"(fix: npa-workflow run {theirs} --resume --run-id {run_id})")


# ------------------------------------------------------------------------------------------------ shared helpers
# Used by the local runtime and by `npa-workflow serve` (local.serve): one embedded AWS, deployed the same way.
def embedded_aws_env(server: Any, home: Path, executor: str = "local") -> dict[str, str]:
    """The environment the in-process Lambdas (and `wiring.engine_from_environment`) read."""
    return {
        **server.client_env(REGION),
        environment.LEDGER_TABLE: LOCAL_LEDGER_TABLE,
        environment.BUCKET: LOCAL_BUCKET,
        environment.EXECUTOR: executor,
        environment.LOCAL_STATE_DIR: str(home),
        "POWERTOOLS_METRICS_DISABLED": "true",
        "POWERTOOLS_TRACE_DISABLED": "true",
    }


def enter_embedded_aws(stack: contextlib.ExitStack, server: Any, env: Mapping[str, str], lambdas_log: Path,
                       state_dir: Path) -> DurableAws:
    """Enter, on `stack`, everything a running embedded AWS needs: its environment, moto's fixes, the
    in-process Lambdas, the handlers' logs to `lambdas_log`, every DynamoDB/S3 change recorded in `state_dir`
    (returned: `restore()` puts a previous process's state back); on exit: let the handlers still running end
    (`moto_lambda.DRAIN_SECONDS`), reset moto's backends and stop it."""
    from npa_workflow.embedded_aws.moto_lambda import in_process_lambdas
    from npa_workflow.embedded_aws.pause_aware_waits import pause_aware_waits
    from npa_workflow.embedded_aws.step_gate import GRANTS_DIR, start_step_gate

    stack.callback(server.stop)
    # moto's backends are process-wide: drop this run's resources so a later run in this process
    # starts from an empty AWS (and moto's readiness probe, which serializes every model, still works).
    stack.callback(_reset_quietly, server)
    stack.enter_context(process_environment(env))
    stack.enter_context(sdk_models_parsed_once())
    stack.enter_context(in_process_calls(server.port, server.wsgi_app))
    # Steps reach the embedded AWS through their gate only (embedded_aws.step_gate): S3, the places their run names.
    gate = start_step_gate(server.wsgi_app, state_dir.parent / GRANTS_DIR)
    stack.callback(gate.stop)
    stack.enter_context(process_environment(gate.environment()))
    stack.callback(wiring.clear_cache)
    try:
        durable = stack.enter_context(durable_aws(state_dir))
    except StateInUse:
        raise LocalRunError(in_use_message(state_dir.parent)) from None
    stack.enter_context(moto_fixes())
    stack.enter_context(pause_aware_waits())  # a frozen runtime's Tasks do not time out for the freeze
    stack.enter_context(moto_speedups())
    # the handlers' logs go to the file until the last of them has ended (left after `in_process_lambdas`' drain)
    stack.enter_context(handler_logs_to(lambdas_log))
    stack.enter_context(in_process_lambdas())
    # Powertools warns on stderr when a pass published no metric (a quiet watch tick): not news for a CLI user.
    stack.enter_context(warnings.catch_warnings())
    warnings.filterwarnings("ignore", message="No application metrics to publish")
    return durable


def in_use_message(run_dir: Path) -> str:
    return (f"{run_dir} is in use by another npa-workflow process (a run being resumed, or serve on the same "
            "home) (fix: wait for it to end, or stop it)")


def machine_definition(definition: Mapping[str, Any], function_arns: Mapping[str, str]) -> str:
    """A compiled definition with the functions' ARNs in place of the compiler's placeholders."""
    return function_table.substitute(definition, function_arns)


def run_local(options: LocalRunOptions, progress: Progress | None = None,
              on_endpoint: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run a spec locally to the end and return its report (see `LocalRuntime`)."""
    return LocalRuntime(options, progress, on_endpoint).run()
