"""`npa-workflow logs RUN [STATE]`: a step's output, found through the run's ledger.

Every wave attempt in the ledger names its job; a local job's combined stdout and stderr is
`<home>/jobs/<job-id>.log` (home: `$NPA_WORKFLOW_HOME`, else `./.npa-workflow`, the folder the run or
`serve` was started from). Where the run's ledger comes from:

- a local `run`: its ledger kept under `<home>/runs/<run-id>/` (`embedded_aws.durable_aws.run_ledger_items`);
- a `serve` stack (`--endpoint`): its ledger table, the logs under serve's own home, which serve publishes in
  its bucket (`protocol.stack.SERVE_HOME_KEY`), so a client in any folder finds them;
- a deployed stack (`--stack`): its ledger table; a step is a SkyPilot managed job, whose log the
  SkyPilot API server keeps: read by exact job id through its REST API (`POST /jobs/logs`, bounded by
  `--bytes`; `--follow`: streamed until the job ends) when `--skypilot-endpoint` /
  `$SKYPILOT_API_SERVER_ENDPOINT` names the server (token:
  `$SKYPILOT_SERVICE_ACCOUNT_TOKEN` or `$SKYPILOT_TOKEN_SECRET_ARN`, as `run --executor skypilot`);
  otherwise the command says which job and how to read it. The handlers' own logs stay in CloudWatch.

Only the last `--bytes` of each log are read, so a multi-gigabyte training log costs what its tail costs.

What is printed is redacted (`npa_workflow.redact`) of the secrets the job was given (the names in its job record
and the run's frozen options), with the values this process's environment holds: a local job's log file is
already written redacted (`local_jobs.job_wrapper`); a SkyPilot job's log, read from the API server, is redacted here.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from npa_workflow.protocol import environment

DEFAULT_TAIL_BYTES = 64 * 1024
FOLLOW_POLL_SECONDS = 0.5


@dataclass(frozen=True)
class LogSource:
    """One wave attempt and where its job's log is."""

    state: str
    iteration: int | None
    attempt: int
    status: str
    job_id: str | None
    path: Path | None  # a local job's log file; None for a job that lives on SkyPilot
    where: str  # how to read it, in words
    secret_names: tuple[str, ...] = ()  # the job's secrets (names): redacted from what is printed
    error: str = ""  # the attempt's error (a wave that never launched a job says why here)

    def redactor(self) -> Callable[[str], str]:
        from npa_workflow import redact

        return redact.from_environment(self.secret_names)

    @property
    def label(self) -> str:
        iteration = f" iteration {self.iteration}" if self.iteration is not None else ""
        return f"{self.state}{iteration} attempt {self.attempt}"


def local_log_path(home: Path, job_id: str | None) -> Path | None:
    """A local job's log; job ids of other executors (a SkyPilot job id is a number) have none here."""
    if not job_id or not job_id.startswith("local-") or "/" in job_id:
        return None
    return home / "jobs" / f"{job_id}.log"


def log_location(home: Path, job_id: str | None) -> str:
    """One phrase saying where a wave's log is: what `status` prints beside each wave."""
    if not job_id:
        return "no job"
    path = local_log_path(home, job_id)
    if path is not None:
        return str(path)
    return f"SkyPilot managed job {job_id}: `sky jobs logs {job_id}` against the API server"


def log_lines(report: dict[str, Any], home: Path) -> list[str]:
    """`log of STATE [iteration N] attempt A: WHERE` for every wave of a run report (what `status` prints)."""
    lines = []
    for w in report.get("waves", []):
        if w.get("replayed"):
            continue
        iteration = f" iteration {w['iteration']}" if w.get("iteration") is not None else ""
        lines.append(f"log of {w['state']}{iteration} attempt {w['attempt']}: {log_location(home, w.get('job_id'))}")
    return lines


def read_tail(path: Path, budget: int) -> tuple[bytes, int]:
    """(the last `budget` bytes of the file, how many bytes before them were skipped)."""
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        size = fh.tell()
        start = max(0, size - budget)
        fh.seek(start)
        return fh.read(budget), start


# ------------------------------------------------------------------------------------------------ attempts
def logs_home() -> Path:
    from npa_workflow.local.runtime import local_home

    return local_home()


def loops_of_spec(loaded: Any) -> dict[str, list[str]]:
    from npa_workflow.run_report import enclosing_loops

    return enclosing_loops(loaded) if loaded is not None else {}


def wave_round(wave: Any, loops_of: dict[str, list[str]]) -> int | None:
    """A wave's loop round: its leaf-loop iteration, else its innermost looped sequence's counter."""
    from npa_workflow.run_report import loop_counters, wave_iteration

    if loops_of:
        return wave_iteration(wave, loops_of)
    counters = loop_counters(wave)  # without the spec: a wave inside one loop still has its round
    return wave.iteration if wave.iteration is not None or len(counters) != 1 else next(iter(counters.values()))


def job_secret_names(home: Path, job_id: str | None) -> tuple[str, ...]:
    """The secret names a local job's record keeps ((): none, or no such record here)."""
    path = local_log_path(home, job_id)
    if path is None:
        return ()
    try:
        record = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ()
    names = record.get("secret_names") if isinstance(record, dict) else None
    return tuple(str(n) for n in names) if isinstance(names, list) else ()


def _sources(waves: list[Any], loaded: Any, home: Path, run_secrets: tuple[str, ...] = ()) -> list[LogSource]:
    loops_of = loops_of_spec(loaded)
    out = []
    for w in sorted(waves, key=lambda w: (w.submitted_at or w.started_at or "", w.wave_key, w.attempt)):
        secrets = tuple(dict.fromkeys([*run_secrets, *job_secret_names(home, w.job_id)]))
        out.append(LogSource(w.state, wave_round(w, loops_of), w.attempt, w.status.value, w.job_id,
                             local_log_path(home, w.job_id), log_location(home, w.job_id), secrets, w.error or ""))
    return out


def local_run_sources(run_id: str, home: Path) -> list[LogSource]:
    """The wave attempts of a local `run`, from the ledger file the runtime keeps."""
    from npa_workflow.embedded_aws.durable_aws import run_ledger_items
    from npa_workflow.ledger import WaveAttempt

    run_dir = home / "runs" / run_id
    items = run_ledger_items(run_dir)
    if items is None:
        raise LookupError(f"no local run {run_id!r} under {home / 'runs'} (a run's logs are found from the folder "
                          "it was started in, or $NPA_WORKFLOW_HOME; a serve stack: --endpoint URL)")
    waves = [WaveAttempt.from_item(item) for item in items if item.get("kind", {}).get("S") == "WAVE"]
    return _sources(waves, local_run_spec(run_dir), home)


def local_run_spec(run_dir: Path) -> Any:
    """The run's spec (for loop rounds), when its file is still readable; None otherwise."""
    from npa_workflow.errors import SpecError
    from npa_workflow.spec.load import load_spec

    try:
        meta = json.loads((run_dir / "meta.json").read_text(encoding="utf-8"))
        return load_spec(meta["spec"], overrides=meta.get("vars") or None, allow_unknown_keys=True)
    except (OSError, ValueError, KeyError, SpecError):
        return None


def stack_sources(client: Any, run_id: str, home: Path) -> list[LogSource]:
    from npa_workflow.adapters.s3_store import S3Store
    from npa_workflow.engine.runs import RunStore

    client.run(run_id)  # an unknown run is a StackError naming it
    waves = client.ledger.attempts(run_id)
    try:
        frozen = RunStore(S3Store(client.s3), client.bucket).load(run_id)
        loaded, run_secrets = frozen.loaded, _run_secret_names(frozen)
    except Exception:  # noqa: BLE001 - the spec only numbers loop rounds; logs are found without it
        loaded, run_secrets = None, ()
    return _sources(waves, loaded, home, run_secrets)


def _run_secret_names(frozen: Any) -> tuple[str, ...]:
    """The run's `--secret-env` names and every tool's `secretEnv` (a SkyPilot job keeps no record here)."""
    names = list(frozen.options.secret_names)
    for tool in getattr(frozen.loaded.catalog, "tools", {}).values():
        names += list(getattr(tool, "secret_env", []) or [])
    return tuple(dict.fromkeys(names))


def select(sources: list[LogSource], state: str | None, iteration: int | None, attempt: int | None) -> list[LogSource]:
    chosen = [s for s in sources if (state is None or s.state == state)
              and (iteration is None or s.iteration == iteration)]
    if attempt is not None:
        return [s for s in chosen if s.attempt == attempt]
    latest: dict[tuple[str, int | None], LogSource] = {}
    for s in chosen:  # sorted by time: the last attempt of each wave wins
        latest[(s.state, s.iteration)] = s
    return list(latest.values())


def skypilot_client(endpoint: str) -> Any:
    """The SkyPilot API client for this endpoint, its token from the environment (as `run --executor skypilot`)."""
    from npa_workflow.adapters.skypilot_api import SkyPilotApi, SkyPilotError

    try:
        return SkyPilotApi.from_environment({**os.environ, environment.SKYPILOT_ENDPOINT: endpoint})
    except (SkyPilotError, ValueError) as exc:
        _err(f"npa-workflow logs: error: --skypilot-endpoint: {exc}")
        raise typer.Exit(2) from None


# ------------------------------------------------------------------------------------------------ printing
def _write(data: bytes) -> None:
    sys.stdout.buffer.write(data)
    sys.stdout.flush()


def _err(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


HANDLER_LOGS = ("the handlers' logs are in CloudWatch: each function's own log group (the stack's *Logs "
                "resources: `aws cloudformation describe-stack-resources --stack-name STACK`), each state machine's "
                "in /aws/vendedlogs/states/<stack>.<spec>")


def _redacted(source: LogSource, data: bytes) -> bytes:
    redactor = source.redactor()
    if not redactor:
        return data
    return redactor(data.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")


def show_skypilot(source: LogSource, budget: int, sky: Any) -> None:
    """Print the tail of a SkyPilot managed job's log, read from the API server by exact job id."""
    from npa_workflow.adapters.skypilot_api import SkyPilotError

    try:
        got = sky.job_logs(int(source.job_id or ""), max_bytes=budget)
    except (SkyPilotError, ValueError) as exc:
        _err(f"npa-workflow logs: {source.label}: cannot read SkyPilot job {source.job_id}'s log: {exc}")
        return
    if got.skipped_bytes:
        _err(f"npa-workflow logs: {source.label}: the first {got.skipped_bytes} bytes the server sent are not "
             "shown (--bytes N for more)")
    if not got.complete:
        _err(f"npa-workflow logs: {source.label}: the server's stream was cut off at the byte or time budget")
    _write(_redacted(source, got.text.encode()))


def local_runtime_alive(home: Path, run_id: str) -> bool:
    """Whether the `npa-workflow run` of this local run still runs (it holds its embedded AWS's state)."""
    from npa_workflow.embedded_aws.durable_aws import held_elsewhere
    from npa_workflow.local.runtime import AWS_STATE_DIR

    state = home / "runs" / run_id / AWS_STATE_DIR
    try:
        # No lock file: a run kept the older way (ledger.json), or not started yet: no runtime to judge by.
        return held_elsewhere(state) if (state / "lock").is_file() else True
    except OSError:
        return True  # cannot tell (an unreadable home): keep following, Ctrl-C ends it


def follow_skypilot(source: LogSource, budget: int, sky: Any) -> None:
    """Print a SkyPilot managed job's log as it grows, from its last lines (about `--bytes`), until the job
    ends: the API server ends the stream then (`SkyPilotApi.follow_job_logs`, by exact job id)."""
    from npa_workflow.adapters.skypilot_api import SkyPilotError

    lines = _LineRedactor(source)
    try:
        sky.follow_job_logs(int(source.job_id or ""), lines.write, tail_lines=max(1, budget // 16))
        lines.flush()
    except (SkyPilotError, ValueError) as exc:
        _err(f"npa-workflow logs: {source.label}: cannot follow SkyPilot job {source.job_id}'s log: {exc}")


def no_log_reason(source: LogSource, exc: OSError) -> str:
    """Why a local job's log cannot be read, said as it is (its record tells a job that ran from one this home
    never had)."""
    assert source.path is not None
    if not isinstance(exc, FileNotFoundError):
        return f"cannot read {source.path}: {exc.strerror or exc}"
    record = source.path.with_suffix(".json")
    jobs = source.path.parent
    if record.exists():
        return (f"no log at {source.path}: job {source.job_id} is recorded there but its log file is gone "
                "(removed by `npa-workflow gc`, or by hand)")
    return (f"no log at {source.path}: this home ({jobs.parent}) has no job {source.job_id}; a job's log is in the "
            "home of the runtime that ran it (run from the folder the run was started in, set $NPA_WORKFLOW_HOME, "
            "or give --endpoint URL of the serve that ran it)")


def _exit_if_never_launched(chosen: list[LogSource]) -> None:
    """No job, so no log: each chosen attempt that never launched says why, and with nothing to show, exit 1
    (an empty output and exit 0 read as "the step printed nothing")."""
    never = [s for s in chosen if not s.job_id]
    for source in never:
        reason = f": {source.error}" if source.error else " (its launch has not recorded a job yet)"
        _err(f"npa-workflow logs: {'error: ' if len(never) == len(chosen) else ''}{source.label} never launched a "
             f"job ({source.status}){reason}")
    if never and len(never) == len(chosen):
        raise typer.Exit(1)


def show(source: LogSource, budget: int, header: bool, sky: Any = None) -> int:
    """Print the tail of one log; returns the offset it ended at (for --follow), -1 when there is no log to read.
    ``sky``: a SkyPilot API client, for the waves whose job is a SkyPilot managed job."""
    if header:
        _write(f"==> {source.label} · {source.status} · {source.where} <==\n".encode())
    if source.path is None:
        if source.job_id and sky is not None and source.job_id.isdigit():
            show_skypilot(source, budget, sky)
        elif source.job_id:
            _err(f"npa-workflow logs: {source.label}: {source.where} (--skypilot-endpoint URL reads it here; "
                 f"{HANDLER_LOGS})")
        return 0
    try:
        data, skipped = read_tail(source.path, budget)
    except OSError as exc:
        _err(f"npa-workflow logs: {source.label}: {no_log_reason(source, exc)}")
        return -1
    if skipped:
        _err(f"npa-workflow logs: {source.label}: the first {skipped} bytes are not shown (--bytes N for more)")
    _write(_redacted(source, data))
    return skipped + len(data)


class _LineRedactor:
    """Text arriving in pieces, printed redacted a whole line at a time (a value cut across two pieces is still
    found); `flush` prints the rest."""

    def __init__(self, source: LogSource) -> None:
        self.source = source
        self.pending = ""

    def write(self, text: str) -> None:
        self.pending += text
        cut = self.pending.rfind("\n") + 1
        if cut:
            _write(_redacted(self.source, self.pending[:cut].encode("utf-8", "surrogateescape")))
            self.pending = self.pending[cut:]

    def flush(self) -> None:
        if self.pending:
            _write(_redacted(self.source, self.pending.encode("utf-8", "surrogateescape")))
            self.pending = ""


ENDED = ("SUCCEEDED", "FAILED", "CANCELLED")


def job_ended(path: Path | None) -> bool:
    """Whether a local job has ended, from its own files (its exit file, or a terminal record): true even when
    the runtime that would have recorded it in the ledger is gone."""
    if path is None:
        return False
    if path.with_suffix(".exit").exists():
        return True
    try:
        record = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(record, dict) and record.get("status") in ENDED


def follow(source: LogSource, offset: int, refresh: Callable[[], LogSource | None],
           runtime_alive: Callable[[], bool] = lambda: True) -> str:
    """Print what the log gains until its attempt ends (then what it still had), its job ended, or the runtime
    that runs it is gone; or Ctrl-C. Returns why it stopped."""
    assert source.path is not None
    done = ""
    lines = _LineRedactor(source)
    while True:
        try:
            with open(source.path, "rb") as fh:
                fh.seek(offset)
                data = fh.read()
        except FileNotFoundError:
            data = b""
        if data:
            lines.write(data.decode("utf-8", "surrogateescape"))
            offset += len(data)
        if done:
            lines.flush()
            return done
        time.sleep(FOLLOW_POLL_SECONDS)
        now = refresh()
        if now is None or now.status in ENDED:
            done = "ended"
        elif job_ended(source.path):
            done = "job-ended"
        elif not runtime_alive():
            done = "runtime-gone"


def logs_command(
    run: Annotated[str, typer.Argument(help="Run id", show_default=False)],
    state: Annotated[str | None, typer.Argument(help="Only this state's waves", show_default=False)] = None,
    iteration: Annotated[int | None, typer.Option("--iteration", min=1,
                                                  help="Only this loop round (a leaf loop's iteration, else the "
                                                       "round of the innermost looped sequence)")] = None,
    attempt: Annotated[int | None, typer.Option("--attempt", min=1, help="This attempt (default: the latest)")] = None,
    follow_: Annotated[bool, typer.Option("--follow", "-f", help="Keep printing until the step ends")] = False,
    budget: Annotated[int, typer.Option("--bytes", min=1, help="Show at most the last N bytes of each log")]
    = DEFAULT_TAIL_BYTES,
    endpoint: Annotated[str | None, typer.Option("--endpoint", envvar="NPA_WORKFLOW_ENDPOINT",
                                                 help="A `serve` stack (default: a local `run`)")] = None,
    stack: Annotated[str | None, typer.Option("--stack", help="A deployed stack (CloudFormation name)")] = None,
    region: Annotated[str | None, typer.Option("--region", help="AWS region (with --stack)")] = None,
    skypilot_endpoint: Annotated[str | None, typer.Option(
        "--skypilot-endpoint", envvar=environment.SKYPILOT_ENDPOINT,
        help="SkyPilot API server URL: reads a SkyPilot job's log by exact id (token: "
             "$SKYPILOT_SERVICE_ACCOUNT_TOKEN)")] = None,
) -> None:
    """Print the output of a run's steps (the latest attempt of each wave; one state with STATE)."""
    home = logs_home()

    def load() -> list[LogSource]:
        if endpoint or stack:  # an unknown run, an unreachable stack: one `logs: error:` line, exit 1
            from npa_workflow.cli.stack import _on_stack

            def sources(client: Any) -> list[LogSource]:  # a serve stack's logs: under its home, not ours
                return stack_sources(client, run, (client.serve_home() if endpoint else None) or home)

            return _on_stack("logs", sources, endpoint, stack, None, region)
        return local_run_sources(run, home)

    def load_or_exit() -> list[LogSource]:
        try:
            return load()
        except LookupError as exc:  # no such local run
            _err(f"npa-workflow logs: error: {exc}")
            raise typer.Exit(1) from None

    sources = load_or_exit()
    chosen = select(sources, state, iteration, attempt)
    if not chosen:
        states = sorted({s.state for s in sources})
        what = f"state {state!r}" if state else "any state"
        _err(f"npa-workflow logs: error: run {run!r} has no wave of {what}"
             + (f" with iteration {iteration}" if iteration is not None else "")
             + (f" and attempt {attempt}" if attempt is not None else "")
             + (f" (states with waves: {', '.join(states)})" if states else " yet"))
        raise typer.Exit(1)
    if follow_ and len(chosen) > 1:
        _err("npa-workflow logs: error: --follow follows one step: name STATE (and --iteration N in a loop)")
        raise typer.Exit(2)
    _exit_if_never_launched(chosen)
    sky = skypilot_client(skypilot_endpoint) if (endpoint or stack) and skypilot_endpoint else None
    missing = 0
    for source in chosen:
        if follow_ and source.path is None and sky is not None and (source.job_id or "").isdigit():
            try:
                follow_skypilot(source, budget, sky)
            except KeyboardInterrupt:
                raise typer.Exit(130) from None
            continue
        offset = show(source, budget, header=len(chosen) > 1, sky=sky)
        if offset < 0 and not (follow_ and source.status not in ENDED):
            missing += 1
            continue
        if follow_ and source.path is not None:

            def refresh(target: LogSource = source) -> LogSource | None:
                found = select(load_or_exit(), target.state, target.iteration, target.attempt)
                return found[0] if found else None

            try:
                why = follow(source, max(offset, 0), refresh,
                             (lambda: True) if (endpoint or stack) else (lambda: local_runtime_alive(home, run)))
            except KeyboardInterrupt:
                raise typer.Exit(130) from None
            if why == "runtime-gone":
                _err(f"npa-workflow logs: {source.label}: the `npa-workflow run` of {run!r} is no longer running "
                     f"and its job is not recorded as ended (resume it: npa-workflow run SPEC --resume --run-id {run})")
                raise typer.Exit(1)
    if missing:
        raise typer.Exit(1)
