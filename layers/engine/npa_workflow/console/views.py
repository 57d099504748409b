"""What the run page shows, computed from one read of a run (`sources.RunData`): pure functions of the report and
the spec, shared by the page's first render and by every live update.

- the graph's statuses (`graph.model.statuses_from_report`, as `graph --run` colours it) and each loop's round;
- the timeline of waves: one row per attempt, in order, by round and group member;
- the failure in one sentence, with its fix;
- each decision: its value, the spec's word it matched, its source URI and what it caused (a branch, another
  round, a loop's exit);
- compute used (minutes × each step's accelerators or vCPUs, `compute_cost.step_units`) beside `plan --cost`'s
  estimate (`cost.estimate_cost`) for both decision assumptions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

STATUS_CLASSES = {"SUCCEEDED": "SUCCEEDED", "FAILED": "FAILED", "TIMED_OUT": "FAILED", "RUNNING": "RUNNING",
                  "PENDING": "RUNNING", "CANCELLED": "CANCELLED", "ABORTED": "CANCELLED",
                  "INTERRUPTED": "CANCELLED"}


def status_class(status: str) -> str:
    """The colour class of a run's or a wave's status (the graph's four colours)."""
    return f"st-{STATUS_CLASSES.get(str(status).upper(), 'none')}"


def _at(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def seconds_between(start: str | None, end: str | None, now: datetime | None = None) -> float | None:
    a = _at(start)
    if a is None:
        return None
    b = _at(end) or now
    return None if b is None else max(0.0, (b - a).total_seconds())


def duration_text(seconds: float | None) -> str:
    if seconds is None:
        return ""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


# ------------------------------------------------------------------------------------------------ spec-derived
@dataclass
class SpecView:
    """What the page needs of a spec, computed once per spec: its graph, loops, plan steps, cost estimate."""

    loaded: Any
    graph: Any
    loops_of: dict[str, list[str]]
    units: dict[str, dict[str, float]]  # state → accelerators (or vCPUs) of one run of it
    estimate: Any = None  # cost.CostEstimate, or None when it cannot be made
    estimate_error: str = ""
    assume_minutes: float = 0.0
    cache: dict[str, Any] = field(default_factory=dict)


def spec_view(loaded: Any, assume_minutes: float = 0.0) -> SpecView | None:
    if loaded is None:
        return None
    from npa_workflow.compile.asl import compile_spec
    from npa_workflow.compute_cost import step_units
    from npa_workflow.graph.model import build_graph
    from npa_workflow.plan.planner import build_plan
    from npa_workflow.run_report import enclosing_loops

    graph = build_graph(loaded, compile_spec(loaded))
    units: dict[str, dict[str, float]] = {}
    try:
        for step in build_plan(loaded).steps:
            if step.command:
                units.setdefault(step.state, step_units(step))
    except Exception:  # noqa: BLE001 - the estimate and units are extras; the page still shows the run
        units = {}
    view = SpecView(loaded, graph, enclosing_loops(loaded), units, assume_minutes=assume_minutes)
    try:
        from npa_workflow.cost import estimate_cost

        view.estimate = estimate_cost(loaded, assume_minutes=assume_minutes)
    except Exception as exc:  # noqa: BLE001 - e.g. a spec whose plan needs a value only the run had
        view.estimate_error = f"no estimate: {exc}"
    return view


# ------------------------------------------------------------------------------------------------ per read
def statuses(view: SpecView | None, report: dict[str, Any]) -> dict[str, str]:
    if view is None:
        return {}
    from npa_workflow.graph.model import statuses_from_report

    return statuses_from_report(view.graph, report)


def rounds(view: SpecView | None, report: dict[str, Any]) -> dict[str, str]:
    """Loop → `round N / MAX`: the highest round any of its waves reached (a leaf loop's iteration, else the
    counter of the innermost looped sequence around the wave)."""
    if view is None:
        return {}
    reached: dict[str, int] = {}
    for wave in report.get("waves") or []:
        state, iteration = wave.get("state"), wave.get("iteration")
        if not isinstance(iteration, int):
            continue
        node = view.graph.nodes.get(state)
        loop = state if node is not None and node.kind == "loop" and not node.members else None
        if loop is None and view.loops_of.get(state):
            loop = view.loops_of[state][-1]
        if loop is not None:
            reached[loop] = max(reached.get(loop, 0), iteration)
    out = {}
    for name, node in view.graph.nodes.items():
        if node.kind == "loop":
            bound = node.loop_max if node.loop_max is not None else "?"
            out[name] = f"round {reached.get(name, 0)} / {bound}"
    return out


def timeline(view: SpecView | None, report: dict[str, Any], now: datetime | None = None) -> list[dict[str, Any]]:
    """One row per wave attempt, in the order they ran: round, state, group member, attempt, job, duration."""
    now = now or datetime.now(UTC)
    rows = []
    for index, wave in enumerate(report.get("waves") or []):
        seconds = seconds_between(wave.get("started_at") or wave.get("submitted_at"), wave.get("ended_at"),
                                  now if wave.get("status") == "RUNNING" else None)
        loop = ""
        if view is not None and view.loops_of.get(wave.get("state")):
            loop = view.loops_of[wave["state"]][-1]
        rows.append({
            "index": index, "state": wave.get("state", ""), "group": wave.get("group") or "",
            "iteration": wave.get("iteration"), "loop": loop, "attempt": wave.get("attempt", 1),
            "job_id": wave.get("job_id") or "", "status": wave.get("status", ""),
            "cls": status_class(wave.get("status", "")), "replayed": bool(wave.get("replayed")),
            "left_running": bool(wave.get("left_running")), "started_at": wave.get("started_at") or "",
            "duration": duration_text(seconds),
        })
    return rows


def failure(report: dict[str, Any], can_act: bool) -> dict[str, str] | None:
    """The run's failure in one sentence, and its fix; None for a run that did not fail."""
    status = str(report.get("status", ""))
    error = report.get("error") or {}
    if status in ("SUCCEEDED", "RUNNING") and not error:
        return None
    if status in ("SUCCEEDED", "RUNNING"):
        return None
    run_id = report.get("run_id", "RUN")
    where = f"State {error.get('state')!r} failed" if error.get("state") else f"The run ended {status}"
    message = str(error.get("message") or "").strip().splitlines()
    sentence = f"{where}: {message[0]}" if message else f"{where}."
    if status == "INTERRUPTED":
        fix = f"`npa-workflow run SPEC --run-id {run_id} --resume` continues it"
    elif status in ("ABORTED", "TIMED_OUT"):
        fix = ("Resume (below) continues it: succeeded waves are replayed, not re-run" if can_act else
               f"`npa-workflow resume {run_id}` (a stack) or `run SPEC --run-id {run_id} --resume` continues it")
    else:
        fix = (f"fix the cause in the step's log, then Resume (below) or `npa-workflow resume {run_id}`: "
               "succeeded waves are replayed" if can_act else
               f"fix the cause in the step's log, then `npa-workflow run SPEC --run-id {run_id} --resume`")
    return {"sentence": sentence, "fix": fix, "state": str(error.get("state") or ""),
            "detail": "\n".join(message[1:])}


def _matches(word: str | None, decision: str) -> bool:
    from npa_workflow import decisions

    if not word:
        return False
    try:
        return decisions.predicate(word, decision)
    except ValueError:
        return decisions.normalize(word) == decision


def decision_rows(view: SpecView | None, report: dict[str, Any]) -> list[dict[str, str]]:
    """Each decision read: value, the spec's word it matched, its URI, and what it caused."""
    rows = []
    states = view.loaded.spec.states if view is not None else {}
    for d in report.get("decisions") or []:
        state, value = d.get("state", ""), str(d.get("decision") or "")
        word, effect = "", ""
        st = states.get(state)
        if st is not None:
            chosen = next((t for t in st.transitions if t.goto and _matches(t.when, value)), None)
            loop_name = state if st.loop is not None else ""
            if not loop_name and view is not None and view.loops_of.get(state) and not st.transitions:
                loop_name = view.loops_of[state][-1]
            loop = states[loop_name].loop if loop_name else None
            if chosen is not None:
                word, effect = chosen.when or "", f"branch to {chosen.goto}"
            elif st.transitions and st.next:
                effect = f"no transition matched: otherwise to {st.next}"
            elif st.transitions:
                effect = "no transition matched"
            elif loop is not None and loop.until:
                if _matches(loop.until, value):
                    word, effect = loop.until, f"exit of loop {loop_name}"
                else:
                    effect = f"another round of {loop_name} (until {loop.until} not met)"
        source = str(d.get("source") or "artifact")
        rows.append({"state": state, "value": value or "(none)", "word": word, "uri": str(d.get("uri") or ""),
                     "effect": effect or "recorded", "source": source,
                     "fallback": source != "artifact"})
    return rows


def compute_used(view: SpecView | None, report: dict[str, Any], now: datetime | None = None) -> dict[str, Any]:
    """Minutes and accelerator-/vCPU-hours the run's jobs took so far (a running job: until now; replayed waves
    ran in an earlier execution and count there)."""
    now = now or datetime.now(UTC)
    minutes = 0.0
    hours: dict[str, float] = {}
    jobs = 0
    for wave in report.get("waves") or []:
        if wave.get("replayed") or not wave.get("job_id"):
            continue
        seconds = seconds_between(wave.get("started_at"), wave.get("ended_at"),
                                  now if wave.get("status") == "RUNNING" else None)
        if seconds is None:
            continue
        jobs += 1
        minutes += seconds / 60
        for kind, n in (view.units.get(wave.get("state", ""), {"vCPU": 1.0}) if view else {"vCPU": 1.0}).items():
            hours[kind] = hours.get(kind, 0.0) + n * seconds / 3600
    usd = 0.0
    if view is not None and view.estimate is not None:
        prices = view.estimate.compute_prices
        usd = sum(h * (prices.price(kind) or 0.0) for kind, h in hours.items())
    return {"jobs": jobs, "minutes": minutes, "hours": hours, "usd": usd}


def cost_view(view: SpecView | None, report: dict[str, Any], now: datetime | None = None) -> dict[str, Any]:
    used = compute_used(view, report, now)
    estimate = []
    if view is not None and view.estimate is not None:
        for a in view.estimate.assumptions:
            estimate.append({"assumption": a.assumption or "(none)", "jobs": a.jobs, "waves": a.waves,
                             "minutes": a.compute.run_minutes, "hours": a.compute.hours, "usd": a.compute.usd,
                             "total_usd": a.total_usd})
    return {"used": used, "estimate": estimate, "assume_minutes": view.assume_minutes if view else 0.0,
            "error": view.estimate_error if view else "no spec: no estimate"}
