"""`npa-workflow run`: run a spec on this machine, on the same state machine the cloud runs (local runtime)."""

from __future__ import annotations

import atexit
import gc
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console, Group
from rich.live import Live

from npa_workflow.cli.common import (
    AllowUnknownKeysOpt,
    CatalogOpt,
    InfraRecoveriesOpt,
    JsonOpt,
    MaxConcurrencyOpt,
    MaxWaitOpt,
    PassEnvOpt,
    RetriesOpt,
    RunAssumeOpt,
    apply_pass_env,
    check_assumption,
    check_run_id_option,
    parse_vars,
)
from npa_workflow.cli.output import print_json, print_problems
from npa_workflow.cli.progress import live_table, plan_states, print_summary, shown_status, wave_dicts
from npa_workflow.compile.deadlines import DEFAULT_MAX_WAIT_SECONDS
from npa_workflow.errors import SpecError
from npa_workflow.protocol import environment
from npa_workflow.protocol.keys import WaveKey

if TYPE_CHECKING:  # the ledger's models import pydantic: not at start-up (`--help`, validate)
    from npa_workflow.ledger import Watermark, WaveAttempt

EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports Ctrl-C
EXIT_USAGE = 2  # README: exit codes


def _label(wave: WaveAttempt) -> str:
    return WaveKey.parse(wave.wave_key, state=wave.state).label()


def trigger_waiting_line(mark: Watermark, endpoint_url: str) -> str:
    """What a waiting trigger needs, said once: where objects must land, how many have, and how to land one in
    the run's embedded S3 (moto takes any credentials; npa-workflow has no command of its own for it)."""
    where = f"{mark.state} ({mark.loops_key})" if mark.loops_key else mark.state
    target = mark.uri if mark.uri.endswith("/") else f"{mark.uri}NAME"
    return (f"{where} waits for objects under {mark.uri}: {mark.objects} of {mark.min_objects} landed; land one "
            f"in this run's local S3 ({endpoint_url}): AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing "
            f"aws --endpoint-url {endpoint_url} s3 cp FILE {target}")


class LiveProgress:
    """A live table of the run's waves (TTY only)."""

    def __init__(self, console: Console, loaded: Any = None) -> None:
        from npa_workflow.cli.logs import loops_of_spec

        self.console = console
        self.live: Live | None = None
        self.header = ""
        self.endpoint_url = ""
        self.started_at = time.monotonic()
        # Every state of the plan is shown from the start (pending ones too), each wave with its round.
        self.states = plan_states(loaded) if loaded is not None else []
        self.loops_of = loops_of_spec(loaded)

    def started(self, run_id: str, execution_name: str, endpoint_url: str) -> None:
        self.header = f"run {run_id} — execution {execution_name}"
        self.endpoint_url = endpoint_url
        self.started_at = time.monotonic()
        self.live = Live(self._render([], "RUNNING"), console=self.console, refresh_per_second=8, transient=False)
        self.live.start()

    def update(self, waves: list[WaveAttempt], execution_status: str) -> None:
        if self.live is not None:
            self.live.update(self._render(waves, execution_status))

    def trigger_waiting(self, mark: Watermark) -> None:
        # above the live table, which stays at the bottom
        self.console.print(trigger_waiting_line(mark, self.endpoint_url), markup=False, highlight=False)

    def finished(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None

    def _render(self, waves: list[WaveAttempt], status: str) -> Group:
        return live_table(self.header, self.states, wave_dicts(waves, self.loops_of), status,
                          time.monotonic() - self.started_at, self.console.width)


class LineProgress:
    """Plain lines when stdout is not a terminal: one per change of a wave's status."""

    def __init__(self) -> None:
        self.seen: dict[tuple[str, int], str] = {}
        self.started_at = time.monotonic()
        self.endpoint_url = ""
        self.loops_of: dict[str, list[str]] | None = None  # the spec's, once the runtime loaded it

    def spec_loaded(self, loaded: Any) -> None:
        from npa_workflow.cli.logs import loops_of_spec

        self.loops_of = loops_of_spec(loaded)

    def _label(self, wave: WaveAttempt) -> str:
        """A wave's counters are those of every loop running when it ran: a state after a loop (`route`, reached by
        the loop's next) carries the loop's last round. Shown are only those of the loops that enclose it."""
        key = WaveKey.parse(wave.wave_key, state=wave.state)
        if self.loops_of is None:
            return key.label()
        enclosing = self.loops_of.get(wave.state, [])
        return WaveKey(key.state, {k: v for k, v in key.loops.items() if k in enclosing}).label()

    def started(self, run_id: str, execution_name: str, endpoint_url: str) -> None:
        self.started_at = time.monotonic()
        self.endpoint_url = endpoint_url
        _out(f"run {run_id}: execution {execution_name} started")

    def update(self, waves: list[WaveAttempt], execution_status: str) -> None:
        for w in waves:
            key = (w.wave_key, w.attempt)
            status = shown_status(w.status.value, w.job_id)  # WAITING_FOR_GPUS, not LAUNCHING, while held
            if self.seen.get(key) != status:
                self.seen[key] = status
                job = f" job {w.job_id}" if w.job_id else ""
                _out(f"[{time.monotonic() - self.started_at:6.1f}s] {self._label(w)} attempt {w.attempt}: "
                     f"{status}{job}")

    def trigger_waiting(self, mark: Watermark) -> None:
        _out(f"[{time.monotonic() - self.started_at:6.1f}s] {trigger_waiting_line(mark, self.endpoint_url)}")

    def finished(self) -> None:
        pass


def _out(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _err(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def _save_traceback(exc: BaseException) -> Path:
    import traceback

    from npa_workflow.local.runtime import local_home

    path = local_home() / "last-error.txt"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(traceback.format_exception(exc)), encoding="utf-8")
    except OSError:
        return Path("(could not be written)")
    return path


def _spec_or_none(spec: Path, catalog: Path | None, var: list[str] | None, allow_unknown_keys: bool) -> Any:
    """The spec for the live view's list of states; the run itself reports a spec that does not load."""
    from npa_workflow.spec.load import load_spec

    try:
        return load_spec(spec, catalog=catalog, overrides=parse_vars(var), allow_unknown_keys=allow_unknown_keys)
    except Exception:  # noqa: BLE001
        return None


def run_command(
    spec: Annotated[Path, typer.Argument(help="Spec file", show_default=False)],
    catalog: CatalogOpt = None,
    var: Annotated[
        list[str] | None,
        typer.Option("--var", help="Override a config key: KEY=VALUE (repeatable; --resume keeps the run's others)"),
    ] = None,
    run_id: Annotated[str | None, typer.Option("--run-id", callback=check_run_id_option,
                                                   help="Run id (default: <workflow>-<time>-<random>)")] = None,
    retries: RetriesOpt = 0,
    retry_interval_seconds: Annotated[
        int, typer.Option("--retry-interval-seconds", min=1, max=86_400,
                          help="First retry's delay (doubles each retry)")
    ] = 30,
    max_infrastructure_recoveries: InfraRecoveriesOpt = 1,
    max_concurrency: MaxConcurrencyOpt = 0,
    max_wait_seconds: MaxWaitOpt = DEFAULT_MAX_WAIT_SECONDS,  # the cloud's default (7 days)
    no_cancel_on_timeout: Annotated[
        bool, typer.Option("--no-cancel-on-timeout",
                           help="When a wave passes --max-wait-seconds the run fails, but that wave's job is left "
                                "running (default: it is cancelled)")
    ] = False,
    assume_decision: RunAssumeOpt = None,
    resume: Annotated[bool, typer.Option("--resume", help="Continue run --run-id: replay its succeeded waves")] = False,
    local_port: Annotated[
        int | None, typer.Option("--local-port", min=1, max=65535, help="Port of the local AWS (default: a free one)")
    ] = None,
    secret_env: Annotated[
        list[str] | None,
        typer.Option("--secret-env", help="Forward the secret NAME from this environment to every step (repeatable)"),
    ] = None,
    pass_env: PassEnvOpt = None,
    executor: Annotated[
        str, typer.Option("--executor", help="Where steps run: local (processes here) or skypilot (managed jobs)")
    ] = "local",
    skypilot_endpoint: Annotated[
        str | None,
        typer.Option("--skypilot-endpoint", envvar=environment.SKYPILOT_ENDPOINT,
                     help="SkyPilot API server URL (with --executor skypilot); token: $SKYPILOT_SERVICE_ACCOUNT_TOKEN"),
    ] = None,
    allow_unknown_keys: AllowUnknownKeysOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Run a spec on this machine: its state machine on an embedded AWS (moto), its steps as local processes."""
    from npa_workflow.local.runtime import (
        RESUME_NEEDS_RUN_ID,
        LocalRunError,
        LocalRunOptions,
        LocalRuntime,
        LocalUsageError,
        Terminated,
    )

    # The interpreter's last collection at exit would walk every object moto and botocore left (~400,000, a
    # quarter of a second): frozen first, they are skipped (the process is ending; memory only, see embedded_aws.heap).
    atexit.register(gc.freeze)

    if resume and not run_id:
        _err(f"npa-workflow run: error: {RESUME_NEEDS_RUN_ID}")
        raise typer.Exit(EXIT_USAGE)
    check_assumption(assume_decision)
    apply_pass_env(pass_env)
    if executor not in ("local", "skypilot"):
        raise typer.BadParameter("must be 'local' or 'skypilot'", param_hint="--executor")
    if executor == "skypilot" and not skypilot_endpoint:
        raise typer.BadParameter("--executor skypilot needs --skypilot-endpoint URL", param_hint="--skypilot-endpoint")
    if executor == "skypilot":
        from npa_workflow.adapters.skypilot_preflight import PreflightFailed, preflight

        try:  # seconds, not the launch's minutes of retries, when the server is not there or refuses us
            preflight(skypilot_endpoint)
        except PreflightFailed as exc:
            _err(f"npa-workflow run: error: {exc}")
            raise typer.Exit(1) from None
    console = Console(soft_wrap=True)
    progress: Any
    if as_json:
        progress = None
    elif sys.stdout.isatty():
        progress = LiveProgress(console, _spec_or_none(spec, catalog, var, allow_unknown_keys))
    else:
        progress = LineProgress()

    def announce(endpoint: str) -> None:
        line = f"npa-workflow: local AWS (moto) at {endpoint}"
        _err(line) if as_json else _out(line)

    options = LocalRunOptions(
        spec=spec, catalog=catalog, variables=parse_vars(var), run_id=run_id, retries=retries,
        retry_interval_seconds=retry_interval_seconds, max_infrastructure_recoveries=max_infrastructure_recoveries,
        max_concurrency=max_concurrency, max_wait_seconds=max_wait_seconds, cancel_on_timeout=not no_cancel_on_timeout,
        assume_decision=assume_decision, resume=resume, port=local_port,
        executor=executor, skypilot_endpoint=skypilot_endpoint, secret_names=tuple(secret_env or ()),
        allow_unknown_keys=allow_unknown_keys,
    )
    runtime = LocalRuntime(options, progress, announce, print_problems)
    try:
        report = runtime.run()
    except SpecError as exc:
        print_problems(exc.problems + exc.warnings)
        raise typer.Exit(1) from None
    except LocalRunError as exc:
        _err(f"npa-workflow run: error: {exc}")
        raise typer.Exit(EXIT_USAGE if isinstance(exc, LocalUsageError) else 1) from None
    except Terminated as exc:  # before the run started: nothing to stop
        _err(f"npa-workflow run: {exc.reason}")
        raise typer.Exit(128 + exc.signum) from None
    except KeyboardInterrupt:
        _err("npa-workflow run: interrupted")
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except Exception as exc:  # noqa: BLE001 - a bug of ours: one line for the user, the traceback in a file
        from npa_workflow.storage_errors import storage_problem_in

        hint = f"npa-workflow run {spec} --resume --run-id {runtime.run_id}" if runtime.run_id else ""
        problem = storage_problem_in(exc, hint, runtime.home)
        if problem is not None:  # the disk, not us: one line, the run left resumable
            _err(f"npa-workflow run: error: {problem}")
            raise typer.Exit(1) from None
        _err(f"npa-workflow run: internal error: {type(exc).__name__}: {exc}")
        _err(f"  (the traceback is in {_save_traceback(exc)}; please report it)")
        raise typer.Exit(1) from None
    if as_json:
        print_json(report)
    else:
        print_summary(report, console)
        failed = (report.get("error") or {}).get("state")
        if report["status"] != "SUCCEEDED" and failed:
            console.print(f"its output: npa-workflow logs {report['run_id']} {failed}", highlight=False)
    if report["status"] == "SUCCEEDED":
        return
    interrupted = report["status"] == "ABORTED" and report["error"] and report["error"]["state"] is None
    if interrupted and runtime.terminated_by is not None:
        raise typer.Exit(128 + runtime.terminated_by)  # 143 for SIGTERM
    raise typer.Exit(EXIT_INTERRUPTED if interrupted else 1)
