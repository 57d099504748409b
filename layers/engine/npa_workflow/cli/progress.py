"""How a run is shown while it goes and when it ends: the live table (a terminal), one line per change
(a pipe), and the summary; the same views for `run`, `status --watch` and `submit --wait`.

The summary tells the latest execution's truth in one sentence per failure; a running run shows no
error. Tables fit the terminal by dropping columns, never by cutting a job id.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

# A local job held until the GPUs it asks for are free (local_jobs.executor): the ledger says LAUNCHING (the report
# RUNNING) — its job exists but has not started, and would not until another job gives its devices back.
WAITING_FOR_GPUS = "WAITING_FOR_GPUS"
# A timed-out wave whose job --no-cancel-on-timeout kept, and which still runs (the ledger says FAILED).
LEFT_RUNNING = "LEFT_RUNNING"
STYLE = {"SUCCEEDED": "green", "FAILED": "red", "CANCELLED": "yellow", "RUNNING": "cyan", "ABORTED": "yellow",
         "TIMED_OUT": "red", "PENDING": "dim", "REPLAYED": "green", WAITING_FOR_GPUS: "magenta",
         LEFT_RUNNING: "yellow"}
_ENDED = ("SUCCEEDED", "FAILED", "CANCELLED")
# The normalized decision → the word a spec's `when`/`until` uses for it.
SPEC_WORD = {"promote_checkpoint": "promote_checkpoint", "loop_back_to_inner_loop": "loop_back"}
# Columns in the order they are given up when the terminal is narrow (state, status and job stay).
_OPTIONAL = ("duration", "group", "attempt", "iter")


def _epoch(text: str | None) -> float | None:
    from npa_workflow.timestamps import to_epoch

    return to_epoch(text)


def shown_status(status: str, job_id: str | None, home: Path | None = None) -> str:
    """The status a view shows for a wave: WAITING_FOR_GPUS while its local job waits for devices."""
    if status in _ENDED or not job_id or not job_id.startswith("local-"):
        return status  # a SkyPilot job's id is a number: SkyPilot's own queue says what it waits for
    from npa_workflow.cli.logs import logs_home
    from npa_workflow.local_jobs.executor import waiting_for_gpus

    return WAITING_FOR_GPUS if waiting_for_gpus(home or logs_home(), job_id) else status


def with_gpu_waits(report: dict[str, Any], home: Path | None = None) -> dict[str, Any]:
    """The report with each wave whose job waits for GPUs marked so (its status; `waiting_for_gpus`: true)."""
    waves = []
    for w in report.get("waves", []):
        status = shown_status(w["status"], w.get("job_id"), home)
        waves.append({**w, "status": status, "waiting_for_gpus": True} if status != w["status"] else w)
    return {**report, "waves": waves}


def duration(start: str | None, end: str | None) -> str:
    begin = _epoch(start)
    if begin is None:
        return ""
    finish = _epoch(end) or time.time()
    if finish < begin:  # the clock went back between the two stamps: no duration rather than a false one
        return ""
    return f"{finish - begin:.1f}s"


def run_duration(report: dict[str, Any]) -> str:
    """A local run's own monotonic measure once it ended (`elapsed_seconds`: a wall clock set back or forward
    during the run does not count), else from the first wave's start to the last one's end (or now, while
    running), of the report's execution: a resumed run's replayed waves, and those of its earlier executions,
    ran before it started."""
    elapsed = report.get("elapsed_seconds")
    if isinstance(elapsed, int | float) and not isinstance(elapsed, bool) and report.get("status") != "RUNNING":
        return f"{elapsed:.1f}s"
    since = report.get("execution_started_at") or ""
    waves = [w for w in report.get("waves", []) if not w.get("replayed")
             and (w.get("submitted_at") or w.get("started_at") or "") >= since]
    starts = [t for w in waves for t in (w.get("submitted_at"), w.get("started_at")) if t]
    ends = [w["ended_at"] for w in waves if w.get("ended_at")]
    if not starts:
        return ""
    end = max(ends) if ends and report.get("status") != "RUNNING" else None
    return duration(min(starts), end)


def error_sentence(error: dict[str, Any] | None) -> str:
    """`state 'x': …` once, however many layers repeated it (`state 'x': state 'x' (job …): …`)."""
    if not error:
        return ""
    message = str(error.get("message") or "").strip()
    state = error.get("state")
    if state:
        prefix = f"state '{state}'"
        while message.startswith(prefix + ": ") or message.startswith(prefix + " "):
            message = message[len(prefix):].lstrip(": ").strip()
        job = re.match(r"\(job ([^)\s]+)\):\s*", message)
        if job and job.group(1) in message[job.end():]:  # `(job J): job J … failed` says J once
            message = message[job.end():]
        return f"{prefix}: {message}"
    return message


def decision_words(value: str) -> str:
    """`loop_back (loop_back_to_inner_loop)`: the spec's word, then what the engine compares."""
    word = SPEC_WORD.get(value)
    return f"{word} ({value})" if word and word != value else value


def fit_columns(columns: list[str], rows: list[list[str]], width: int, keep: Iterable[str]) -> list[str]:
    """Drop optional columns (in `_OPTIONAL` order) until the widest row fits `width`."""
    shown = list(columns)
    keep = set(keep)

    def needed(cols: list[str]) -> int:
        idx = [columns.index(c) for c in cols]
        widths = [max([len(c)] + [len(r[i]) for r in rows]) for c, i in zip(cols, idx, strict=True)]
        return sum(widths) + 3 * len(cols) + 1  # cell padding and borders

    for col in _OPTIONAL:
        if needed(shown) <= width:
            break
        if col in shown and col not in keep:
            shown.remove(col)
    return shown


def _table(title: str, columns: list[str], rows: list[list[Any]], width: int) -> Table:
    plain = [[c.plain if isinstance(c, Text) else str(c) for c in r] for r in rows]
    shown = fit_columns(columns, plain, width, keep=("state", "status", "job"))
    table = Table(title=title)
    for col in shown:
        # Ids are whole or absent: the state and job columns never wrap.
        table.add_column(col, no_wrap=col in ("state", "job"), overflow="fold")
    for row in rows:
        table.add_row(*(row[columns.index(c)] for c in shown))
    return table


def still_running(job_id: str, home: Path | None = None) -> bool:
    """Whether a job left running (--no-cancel-on-timeout) still runs. A local job's record says, brought up to
    date with its processes; a SkyPilot job is taken to run (only its API server could say otherwise)."""
    if not job_id.startswith("local-"):
        return True
    from npa_workflow.cli.logs import logs_home
    from npa_workflow.local_jobs.executor import LocalExecutor

    info = LocalExecutor(home or logs_home()).status(job_id)
    return info is not None and not info.is_terminal


def left_running(report: dict[str, Any], home: Path | None = None) -> list[dict[str, Any]]:
    """The waves whose job --no-cancel-on-timeout left running and which still run."""
    return [w for w in report.get("waves", []) if w.get("left_running") and w.get("job_id")
            and still_running(w["job_id"], home)]


def summary_rows(report: dict[str, Any], running: Iterable[str] = ()) -> list[list[Any]]:
    """One row per wave; `running`: job ids left running (--no-cancel-on-timeout) that still run."""
    rows = []
    kept = set(running)
    for w in report["waves"]:
        status = "REPLAYED" if w.get("replayed") else LEFT_RUNNING if w.get("job_id") in kept else w["status"]
        rnd = w.get("iteration")
        rows.append([w["state"], "" if rnd is None else str(rnd), w.get("group") or "", str(w["attempt"]),
                     Text(status, style=STYLE.get(status, "")), w.get("job_id") or "",
                     duration(w.get("started_at"), w.get("ended_at"))])
    return rows


def print_summary(report: dict[str, Any], console: Console) -> None:
    columns = ["state", "iter", "group", "attempt", "status", "job", "duration"]
    kept = left_running(report)
    console.print(_table(f"{report['workflow']} — run {report['run_id']}", columns,
                         summary_rows(report, [w["job_id"] for w in kept]), console.width))
    for w in kept:
        from npa_workflow.engine.cleanup import left_running_text

        rnd = f" iteration {w['iteration']}" if w.get("iteration") is not None else ""
        console.print(f"{w['state']}{rnd}: {left_running_text([w['job_id']])}", markup=False, highlight=False)
    for d in report.get("decisions", []):
        # null: the artifact was there but unreadable (the run's error says why)
        value = "none read" if d.get("decision") is None else decision_words(str(d["decision"]))
        console.print(f"decision of {d['state']}: {value} ({d['source']}, {d['uri']})", highlight=False)
    for m in report.get("watermarks", []):
        console.print(f"trigger of {m['state']}: {m['objects']} object(s) under {m['uri']}", highlight=False)
    for notice in report.get("notices", []):
        console.print(Text(f"notice: {notice}", style="yellow"), highlight=False)
    status = report["status"]
    took = run_duration(report)
    # Without an execution (a local run read from its ledger while it goes) there is no history to count.
    counted = (f"— {report.get('state_transitions', 0)} state transitions, {report.get('history_events', 0)} "
               "history events") if report.get("execution_arn", "-") and report.get("history_read", True) else ""
    if report.get("history_error"):  # not "0 events": the read was refused (throttled, denied)
        counted = f"— history not read: {report['history_error']} (`npa-workflow status RUN` again for its counts)"
    console.print(Text(f"{status}" + (f" in {took}" if took else ""), style=f"bold {STYLE.get(status, '')}"),
                  counted, highlight=False)
    if report.get("error") and status != "RUNNING":  # a running run has no error yet, whatever came before
        console.print(Text(f"error: {error_sentence(report['error'])}", style="red"), highlight=False)


# ------------------------------------------------------------------------------------------------ live
def plan_states(loaded: Any) -> list[str]:
    """The states of the plan that run a job, in plan order (each once), under either decision."""
    from npa_workflow.plan.planner import build_plan

    seen: dict[str, None] = {}
    for assumption in ("promote_checkpoint", "loop_back"):
        try:
            steps = build_plan(loaded, assume_decision=assumption).steps
        except Exception:  # noqa: BLE001 - a plan-time error shows in the run itself
            continue
        for s in steps:
            if s.command:
                seen.setdefault(s.state)
    return list(seen)


def live_table(header: str, states: list[str], waves: list[dict[str, Any]], status: str, elapsed: float,
               width: int, throttled: str = "") -> Group:
    """Every state of the plan, pending ones too, with its latest wave; `k/n done` in the header; `throttled`:
    the refresh's read AWS refused for rate (the table is then the last one read)."""
    latest: dict[str, dict[str, Any]] = {}
    for w in waves:  # in time order: the last wave of a state is its latest
        latest[w["state"]] = w
    names = states + [s for s in latest if s not in states]
    rows = []
    for name in names:
        w = latest.get(name)
        shown = "PENDING" if w is None else ("REPLAYED" if w.get("replayed") else w["status"])
        rnd = "" if w is None or w.get("iteration") is None else str(w["iteration"])
        rows.append([name, rnd, "" if w is None else str(w["attempt"]), Text(shown, style=STYLE.get(shown, "")),
                     "" if w is None else (w.get("job_id") or ""),
                     "" if w is None else duration(w.get("started_at"), w.get("ended_at"))])
    done = sum(1 for n in names if n in latest and (latest[n]["status"] == "SUCCEEDED" or latest[n].get("replayed")))
    title = Text(f"{header} — {status} — {done}/{len(names)} done — {elapsed:.0f}s", style="bold")
    table = _table("", ["state", "iter", "attempt", "status", "job", "duration"], rows, width)
    if throttled:
        return Group(title, Text(f"{throttled}: showing the last read; reading again", style="yellow"), table)
    return Group(title, table)


def wave_dicts(waves: Iterable[Any], loops_of: dict[str, list[str]] | None = None) -> list[dict[str, Any]]:
    """Ledger wave attempts as the report's wave dicts (with their loop round), in time order."""
    from npa_workflow.cli.logs import wave_round

    out = []
    for w in sorted(waves, key=lambda w: (w.submitted_at or w.started_at or "", w.wave_key, w.attempt)):
        out.append({"state": w.state, "iteration": wave_round(w, loops_of or {}), "attempt": w.attempt,
                    "status": shown_status(w.status.value, w.job_id),
                    "job_id": w.job_id, "started_at": w.started_at, "ended_at": w.ended_at,
                    "replayed": w.replayed, "group": w.group})
    return out


def trigger_hints(report: dict[str, Any], said: set[tuple[str, str]]) -> list[str]:
    """A line for each trigger that started waiting for objects (its state shows PENDING meanwhile), once each:
    where the objects must land and how many have."""
    lines = []
    for m in report.get("watermarks", []):
        if m.get("waiting") and (m["state"], m["uri"]) not in said:
            said.add((m["state"], m["uri"]))
            target = m["uri"] if m["uri"].endswith("/") else m["uri"] + "NAME"
            lines.append(f"{m['state']} waits for objects under {m['uri']}: {m['objects']} of "
                         f"{m.get('min_objects', '?')} landed (land one: aws s3 cp FILE {target})")
    return lines


def watch_report(fetch: Callable[[], dict[str, Any]], states: list[str], console: Console,
                 poll_seconds: float = 1.0) -> dict[str, Any]:
    """Follow a run on a stack until it ends: the live table on a terminal, one line per change otherwise."""
    started = time.monotonic()
    said: set[tuple[str, str]] = set()

    def latest() -> dict[str, Any]:  # as shown: a wave that waits for GPUs says so
        return with_gpu_waits(fetch())

    report = latest()
    header = f"run {report['run_id']}"
    if console.is_terminal:
        from rich.live import Live

        with Live(console=console, refresh_per_second=4, transient=True) as live:
            while True:
                for line in trigger_hints(report, said):
                    live.console.print(line, markup=False, highlight=False)  # above the table
                live.update(live_table(header, states, report["waves"], report["status"],
                                       time.monotonic() - started, console.width, report.get("throttled", "")))
                if report["status"] != "RUNNING":
                    return report
                time.sleep(poll_seconds)
                report = latest()
    seen: dict[tuple[str, Any, int], str] = {}
    while True:
        for line in trigger_hints(report, said):
            sys.stdout.write(f"[{time.monotonic() - started:6.1f}s] {line}\n")
        if report.get("throttled"):
            sys.stdout.write(f"[{time.monotonic() - started:6.1f}s] {report['throttled']}: reading again\n")
            sys.stdout.flush()
        for w in report["waves"]:
            key = (w["state"], w.get("iteration"), w["attempt"])
            if seen.get(key) != w["status"]:
                seen[key] = w["status"]
                rnd = f" iteration {w['iteration']}" if w.get("iteration") is not None else ""
                job = f" job {w['job_id']}" if w.get("job_id") else ""
                sys.stdout.write(f"[{time.monotonic() - started:6.1f}s] {w['state']}{rnd} attempt {w['attempt']}: "
                                 f"{w['status']}{job}\n")
                sys.stdout.flush()
        if report["status"] != "RUNNING":
            return report
        time.sleep(poll_seconds)
        report = latest()
