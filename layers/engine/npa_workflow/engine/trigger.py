"""trigger: wait for objects under a prefix before a state's work, on a task token.

This is the `<state>.trigger` Task: resolve the state's prefix and minimum from the run's spec and
register a watermark. Events first (S3 Object Created), polling second (the watch pass) then re-count
it (`engine.watermarks`). A satisfied watermark is never waited for again in the run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from npa_workflow.engine.context import Engine
from npa_workflow.engine.errors import StepNotResolvable
from npa_workflow.engine.runs import FrozenRun
from npa_workflow.engine.visits import Visit, visit_of
from npa_workflow.engine.watermarks import recount
from npa_workflow.ledger import Watermark
from npa_workflow.protocol.payloads import WaveTask
from npa_workflow.spec.effective import effective_config
from npa_workflow.spec.ints import IntFieldError, resolve_bounded
from npa_workflow.spec.tokens import TokenContext, TokenError, resolve_text


def _watch_target(run: FrozenRun, visit: Visit) -> tuple[str, int]:
    st = run.loaded.spec.states[visit.state]
    if st.trigger is None:
        raise StepNotResolvable(f"state '{visit.state}' has no trigger")
    try:
        eff = effective_config(st, run.run_ctx.config, run.run_ctx.run, visit.loops)
        uri = resolve_text(st.trigger.uri, TokenContext(config=eff, run=run.run_ctx.run, loops=visit.loops))
        minimum = resolve_bounded(st.trigger.min_objects, run.run_ctx.config, "minObjects", 1, 1)
    except (TokenError, IntFieldError) as exc:
        raise StepNotResolvable(f"state '{visit.state}': trigger: {exc}") from None
    return uri, minimum


def trigger(engine: Engine, task: WaveTask | Mapping[str, Any]) -> dict[str, Any]:
    task = WaveTask.of(task)
    run = engine.runs.load(task.run_id, task.execution)
    visit = visit_of(run, task.state, task.loops, task.group)
    token = task.token
    existing = engine.ledger.watermark(visit.run_id, visit.state, visit.loops_key)
    if existing is not None and existing.satisfied:
        engine.callbacks.succeed(token, {"state": visit.state, "objects": existing.objects, "replayed": True})
        return {"state": visit.state, "satisfied": True, "replayed": True}
    uri, minimum = _watch_target(run, visit)
    mark = Watermark(run_id=visit.run_id, state=visit.state, loops_key=visit.loops_key, uri=uri,
                     min_objects=minimum, task_token=token, polls=existing.polls if existing else 0)
    satisfied = recount(engine, mark)
    return {"state": visit.state, "uri": uri, "satisfied": satisfied}

