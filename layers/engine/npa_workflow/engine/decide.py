"""decide: read, record and normalize the decision a loop or a branch follows.

The contract (docs/decisions.md): the URI is the state's decision output, else its
state-scoped `decision_uri`, else the global one. A missing artifact falls back to the
run's assumption when one was given (recorded as `assume_decision_fallback`) and fails the
run otherwise; `executionMode: runtime` specs never fall back. A malformed artifact fails.

A read that fails also revokes the success of the wave that was to write the decision (its attempt becomes
FAILED with the decision error): its job exited 0, but its work is not usable, and a resume replays a SUCCEEDED
wave without running it — it would read the same artifact and fail the same way, whatever `--var` fixed it.
The revoke is written before the decision error and the raise, so a decide killed in between has already
made the wave relaunchable; a retried decide finds it FAILED and leaves it so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from npa_workflow import decisions
from npa_workflow.engine.context import Engine
from npa_workflow.engine.errors import DecisionMalformed, DecisionMissing
from npa_workflow.engine.visits import Visit, decision_uri_of, visit_of
from npa_workflow.ledger import ErrorCategory, WaveStatus
from npa_workflow.protocol.payloads import DecideTask


def decide(engine: Engine, task: DecideTask | Mapping[str, Any]) -> dict[str, Any]:
    task = DecideTask.of(task)
    run = engine.runs.load(task.run_id, task.execution)
    visit = visit_of(run, task.state, task.loops)
    spec = run.loaded.spec
    st = spec.states[visit.state]
    current = decisions.normalize(task.current)
    assumption = "" if spec.runtime_only else decisions.normalize(run.options.assume_decision)
    # A looped sequence reads only through its writer; a transitions child may have read already.
    reads = task.purpose == "transitions" or st.writes_decision
    if task.purpose == "loop" and current:
        return {"decision": current, "source": "earlier_read"}
    if not reads:
        return {"decision": assumption, "source": "assumption" if assumption else "none"}
    uri = decision_uri_of(run, visit)
    if not uri:
        return {"decision": assumption, "source": "assumption" if assumption else "none"}
    if not uri.startswith("s3://") or "/" not in uri[5:]:
        message = f"state '{visit.state}': decision uri {uri!r}: expected s3:// URI"
        _revoke_success(engine, visit, message, ErrorCategory.CONFIGURATION)
        engine.ledger.record_decision(visit.run_id, visit.state, visit.loops_key, uri=uri, error=message)
        raise DecisionMalformed(message)
    body = engine.store.get(uri)
    if body is None:
        if assumption:
            engine.ledger.record_decision(visit.run_id, visit.state, visit.loops_key, uri=uri, decision=assumption,
                                          source="assume_decision_fallback")
            return {"decision": assumption, "source": "assume_decision_fallback"}
        message = f"state '{visit.state}': decision artifact {uri} does not exist"
        if spec.runtime_only:
            message += " (executionMode: runtime allows no assumed decision)"
        _revoke_success(engine, visit, message, ErrorCategory.WORKLOAD)
        engine.ledger.record_decision(visit.run_id, visit.state, visit.loops_key, uri=uri, error=message)
        raise DecisionMissing(message)
    raw_text = decisions.body_for_ledger(body, uri)  # a large body is recorded by reference, never inline
    try:
        _, value = decisions.decision_from_body(body, uri)
    except decisions.DecisionError as exc:
        message = f"state '{visit.state}': {exc}"
        _revoke_success(engine, visit, message, ErrorCategory.WORKLOAD)
        engine.ledger.record_decision(visit.run_id, visit.state, visit.loops_key, uri=uri, raw=raw_text,
                                      error=message)
        raise DecisionMalformed(message) from None
    engine.ledger.record_decision(visit.run_id, visit.state, visit.loops_key, uri=uri, raw=raw_text, decision=value)
    return {"decision": value, "source": "artifact"}


def _revoke_success(engine: Engine, visit: Visit, message: str, category: ErrorCategory) -> None:
    """The deciding state's wave did not really succeed: its latest attempt ends FAILED, whichever of this and the
    watch's finish lands first. The watch completes the task token before it writes the attempt's end, so the
    execution can reach this decide while the attempt still reads RUNNING: then it is ended FAILED here (the job
    has exited: its token was completed), and the watch's conditional finish, arriving after, changes nothing."""
    latest = engine.ledger.latest_attempt(visit.run_id, visit.wave_key)
    if latest is None:
        return
    if latest.status == WaveStatus.SUCCEEDED:
        engine.ledger.revoke_success(visit.run_id, visit.wave_key, latest.attempt, message, category)
    elif not latest.terminal and not engine.ledger.finish_attempt(
            visit.run_id, visit.wave_key, latest.attempt, WaveStatus.FAILED, message, category):
        # the watch's finish landed between the read and this write: it can only have been a success
        engine.ledger.revoke_success(visit.run_id, visit.wave_key, latest.attempt, message, category)
