"""The report of a run (`npa-workflow run --json`, `status --json` of a stack, the console), built from the run's
ledger items and the execution's history: the same for the local twin and a deployed stack.

    {"run_id", "workflow", "status": SUCCEEDED|FAILED|ABORTED|TIMED_OUT,
     "error": {"state", "message"} | null,
     "waves": [{"state", "group", "iteration", "attempt", "job_id", "status", "replayed", "left_running",
                "submitted_at", "started_at", "ended_at"}],
     "decisions": [{"state", "uri", "decision", "source"}],  # one per visit: the latest read
     "notices": [str],  # what would otherwise pass unseen: a decision value no predicate matches, a resume
                        # that re-staged the step code (from which digest to which: engine.restage)
     "watermarks": [{"state", "uri", "objects", "min_objects", "waiting"}],  # waiting: for objects to land
     "execution_arn", "execution_started_at", "state_transitions", "history_events",
     "history_error": why the history could not be read (throttled, denied), only when so: the counts are unknown}

A wave's `iteration` is its leaf-loop iteration, else the counter of the innermost looped sequence it
belongs to (null outside loops). `replayed` is true for an attempt that had already succeeded before this
execution of the run started (a resumed run takes it from the ledger instead of running it again).
`state_transitions` counts the history's `*StateEntered` events; `execution_started_at` is when this execution
started (a resumed run's summary times this execution, not every one since the first).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from npa_workflow.engine.restage import code_change_notices
from npa_workflow.ledger import DecisionRecord, RunRecord, Watermark, WaveAttempt, WaveStatus
from npa_workflow.ledger.items import run_pk
from npa_workflow.protocol.errors import JOB_LEFT_RUNNING
from npa_workflow.protocol.keys import WaveKey
from npa_workflow.spec.validate import LoadedSpec

if TYPE_CHECKING:
    from npa_workflow.ledger.dynamodb import DynamoLedger

_REPORTED_STATUS = {WaveStatus.SUCCEEDED: "SUCCEEDED", WaveStatus.FAILED: "FAILED", WaveStatus.CANCELLED: "CANCELLED"}


def _kind(item: dict[str, Any]) -> str:
    return str(item.get("kind", {}).get("S", ""))


def enclosing_loops(loaded: LoadedSpec) -> dict[str, list[str]]:
    """State → the looped sequences that contain it, outermost first (membership through nested sequences and
    the groups inside them)."""
    states = loaded.spec.states
    result: dict[str, list[str]] = {}

    def visit(name: str, loops: list[str], seen: frozenset[str]) -> None:
        st = states[name]
        for child in [*st.sequence, *st.parallel]:  # a group's members share the group's rounds
            if child in seen or child not in states:
                continue
            inner = loops + ([name] if st.loop is not None else [])
            if inner and len(inner) > len(result.get(child, [])):
                result[child] = inner
            visit(child, inner, seen | {child})

    for name in states:
        visit(name, [], frozenset({name}))
    return result


def loop_counters(wave: WaveAttempt) -> dict[str, int]:
    """`train|outer=1,refine=2` → {"outer": 1, "refine": 2} (the wave key's own parser, protocol.keys)."""
    return dict(WaveKey.parse(wave.wave_key, state=wave.state).loops)


def wave_iteration(wave: WaveAttempt, loops_of: dict[str, list[str]]) -> int | None:
    if wave.iteration is not None:
        return wave.iteration
    counters = loop_counters(wave)
    for loop in reversed(loops_of.get(wave.state, [])):
        if loop in counters:
            return counters[loop]
    return None


def _readable(message: str) -> str:
    """A Lambda error's cause is its JSON error body: keep the message."""
    try:
        body = json.loads(message)
    except (ValueError, TypeError):
        return message
    if isinstance(body, dict) and isinstance(body.get("errorMessage"), str):
        return body["errorMessage"]
    return message


def read_history(sfn: Any, execution_arn: str) -> tuple[list[dict[str, Any]], str]:
    """(every event, "") — or ([], why not): a history the service refused (throttled, denied) is said so, not
    shown as an execution of 0 events."""
    if sfn is None or not execution_arn:
        return [], ""
    try:
        from npa_workflow.adapters.sfn_executions import SfnExecutions

        # Every page: AWS answers 100 events a call by default (1,000 at most), a run may have 25,000.
        return list(SfnExecutions(sfn).history(execution_arn)), ""
    except Exception as exc:  # noqa: BLE001 - the report is still useful without the history
        from npa_workflow.adapters.aws_errors import unread

        return [], unread("GetExecutionHistory", exc)


def _history(sfn: Any, execution_arn: str) -> list[dict[str, Any]]:
    return read_history(sfn, execution_arn)[0]


def _began(w: WaveAttempt) -> str:
    return w.started_at or w.submitted_at or (w.timeline[0].at if w.timeline else "")


def ordered_waves(waves: list[WaveAttempt], loaded: LoadedSpec) -> list[WaveAttempt]:
    """In time order, but a group's members (of one visit of the group) together, in the group's member order
    where the group first began: the table reads as the spec does, not as the members happened to finish."""
    states = loaded.spec.states
    first: dict[tuple[str, str], str] = {}
    for w in waves:
        if w.group:
            visit = (w.group, WaveKey.parse(w.wave_key, state=w.state).loops_key)
            first[visit] = min(first.get(visit, _began(w)), _began(w))

    def key(w: WaveAttempt) -> tuple[str, int, str, int]:
        if not w.group:
            return (_began(w), -1, w.wave_key, w.attempt)
        members = states[w.group].parallel if w.group in states else []
        index = members.index(w.state) if w.state in members else len(members)
        return (first[(w.group, WaveKey.parse(w.wave_key, state=w.state).loops_key)], index, w.wave_key, w.attempt)

    return sorted(waves, key=key)


def latest_decisions(decisions: list[DecisionRecord]) -> list[DecisionRecord]:
    """One decision per visit (state and loop rounds), the latest read: a resumed run reads again the decisions
    its replayed waves wrote, which are the same visits' (the summary said each twice)."""
    latest: dict[tuple[str, str], DecisionRecord] = {}
    for d in sorted(decisions, key=lambda d: (d.read_at, d.state, d.loops_key, d.seq)):
        latest.pop((d.state, d.loops_key), None)
        latest[(d.state, d.loops_key)] = d
    return sorted(latest.values(), key=lambda d: (d.read_at, d.state, d.loops_key, d.seq))


def decision_notices(decisions: list[DecisionRecord]) -> list[str]:
    """One sentence per state whose decision value matches no predicate (`PROMOTE`: decisions are case-sensitive):
    a loop then runs to its max and transitions fall to `next`, which would otherwise pass unseen."""
    from npa_workflow.decisions import LOOP_BACK, PROMOTE

    said: dict[tuple[str, str], str] = {}
    for d in decisions:
        value = d.decision
        if value and value not in (PROMOTE, LOOP_BACK) and (d.state, value) not in said:
            said[(d.state, value)] = (
                f"decision of {d.state}: {value!r} matches no predicate (decisions are case-sensitive: "
                "promote or promote_checkpoint, loop_back or loop_back_to_inner_loop), so no `until`/`when` "
                f"took it ({d.uri})")
    return list(said.values())


def _started_at(events: list[dict[str, Any]]) -> str | None:
    """When the report's execution started (its history's first event), as the waves' times are written."""
    from datetime import datetime

    from npa_workflow.timestamps import from_epoch

    stamp = events[0].get("timestamp") if events else None
    return from_epoch(stamp.timestamp()) if isinstance(stamp, datetime) else None


def failed_state_from_history(events: list[dict[str, Any]]) -> str | None:
    """The spec state of the last Lambda Task the execution scheduled (the cleanup's owner, or the failing
    decide's state): every compiled Task's payload names its spec state."""
    for event in reversed(events):
        details = event.get("taskScheduledEventDetails")
        if not details:
            continue
        try:
            params = json.loads(details.get("parameters") or "{}")
        except ValueError:
            continue
        state = (params.get("Payload") or {}).get("state") if isinstance(params, dict) else None
        if isinstance(state, str) and state:
            return state
    return None


def execution_failure(sfn: Any, execution_arn: str, events: list[dict[str, Any]] | None = None,
                      status: str = "FAILED") -> tuple[str | None, str]:
    """(state, message) of an execution that did not succeed, from its description and history."""
    if events is None:
        events = _history(sfn, execution_arn)
    error = cause = ""
    try:
        from npa_workflow.adapters.sfn_executions import SfnExecutions

        execution = SfnExecutions(sfn).describe(execution_arn)
        error, cause = execution.error or "", execution.cause or ""
    except Exception:  # noqa: BLE001
        pass
    message = _readable(cause) or error or f"execution ended {status}"
    if error and cause and error not in message:
        message = f"{error}: {message}"
    return failed_state_from_history(events), message


def _error(status: str, run: RunRecord | None, sfn: Any, execution_arn: str, events: list[dict[str, Any]],
           interrupted_reason: str) -> dict[str, Any] | None:
    if status in ("SUCCEEDED", "RUNNING"):  # a running run has no error yet, whatever an earlier execution had
        return None
    if interrupted_reason:
        return {"state": None, "message": interrupted_reason}
    if run is not None and run.error is not None:
        return {"state": run.error.state, "message": _readable(run.error.message)}
    if sfn is None or not execution_arn:
        return {"state": None, "message": f"execution ended {status}"}
    state, message = execution_failure(sfn, execution_arn, events, status)
    return {"state": state, "message": message}


def build_report(
    *,
    run_id: str,
    workflow: str,
    loaded: LoadedSpec,
    status: str,
    items: list[dict[str, Any]],
    execution_arn: str,
    sfn: Any = None,
    previous_items: list[dict[str, Any]] | None = None,
    interrupted_reason: str = "",
    read_history_events: bool = True,
) -> dict[str, Any]:
    """`read_history_events=False`: the report without the execution's history (its counts 0, `history_read`
    false) — a watcher's view while the run goes, which shows none of it."""
    waves = [WaveAttempt.from_item(i) for i in items if _kind(i) == "WAVE"]
    decisions = [DecisionRecord.from_item(i) for i in items if _kind(i) == "DECISION"]
    marks = [Watermark.from_item(i) for i in items if _kind(i) == "WATERMARK"]
    runs = [RunRecord.from_item(i) for i in items if _kind(i) == "RUN"]
    succeeded_before = {
        (w.wave_key, w.attempt)
        for w in (WaveAttempt.from_item(i) for i in previous_items or [] if _kind(i) == "WAVE")
        if w.status == WaveStatus.SUCCEEDED
    }
    loops_of = enclosing_loops(loaded)
    waves = ordered_waves(waves, loaded)
    events, history_error = read_history(sfn, execution_arn) if read_history_events else ([], "")
    report = {
        "run_id": run_id,
        "workflow": workflow,
        "status": status,
        "error": _error(status, runs[0] if runs else None, sfn, execution_arn, events, interrupted_reason),
        "waves": [
            {
                "state": w.state,
                "group": w.group or None,
                "iteration": wave_iteration(w, loops_of),
                "attempt": w.attempt,
                "job_id": w.job_id,
                "status": _REPORTED_STATUS.get(w.status, "RUNNING"),
                "replayed": bool(w.replayed or (w.wave_key, w.attempt) in succeeded_before),
                # FAILED (timed out) in the ledger, its job kept running on purpose (--no-cancel-on-timeout).
                "left_running": w.status == WaveStatus.FAILED and (w.error or "").endswith(JOB_LEFT_RUNNING),
                "submitted_at": w.submitted_at,
                "started_at": w.started_at,
                "ended_at": w.ended_at,
            }
            for w in waves
        ],
        "decisions": [
            {"state": d.state, "uri": d.uri, "decision": d.decision, "source": d.source}
            for d in latest_decisions(decisions)
        ],
        "notices": decision_notices(latest_decisions(decisions))
        + code_change_notices(runs[0].code_changes if runs else []),
        "execution_started_at": _started_at(events),
        "watermarks": [{"state": m.state, "uri": m.uri, "objects": m.objects, "min_objects": m.min_objects,
                        "waiting": m.waiting} for m in marks],
        "execution_arn": execution_arn,
        "state_transitions": sum(1 for e in events if str(e.get("type", "")).endswith("StateEntered")),
        "history_events": len(events),
    }
    if history_error:
        report["history_error"] = history_error  # the counts above are then unknown, not 0
    elif not read_history_events:
        report["history_read"] = False
    return report


def ledger_items(ledger: DynamoLedger, run_id: str) -> list[dict[str, Any]]:
    """Every ledger item of one run (raw DynamoDB items, what `build_report` reads)."""
    items: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {
        "TableName": ledger.table_name, "KeyConditionExpression": "pk = :pk",
        "ExpressionAttributeValues": {":pk": {"S": run_pk(run_id)}}, "ConsistentRead": True,
    }
    while True:
        page = ledger.client.query(**kwargs)
        items += page.get("Items", [])
        if not page.get("LastEvaluatedKey"):
            return items
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
