"""One visit of a state by the state machine: which loop iteration, which wave, which step.

The state machine sends loop counters under safe keys (`l1`, `l2`); a visit turns them back
into loop names (`protocol.keys.decode_loops`), derives the wave key (`protocol.keys.WaveKey`:
state + counters, the identity that makes launches idempotent and resume replay work) and
resolves the step.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from npa_workflow.engine.errors import StepNotResolvable
from npa_workflow.engine.runs import FrozenRun
from npa_workflow.plan.model import PlanStep
from npa_workflow.plan.steps import decision_uri, resolve_step
from npa_workflow.protocol.keys import WaveKey, decode_loops
from npa_workflow.spec.tokens import TokenError


@dataclass(frozen=True)
class Visit:
    run_id: str
    state: str
    group: str
    loops: dict[str, int]  # loop state name → current iteration (only loops that have started)
    iteration: int | None

    @property
    def key(self) -> WaveKey:
        return WaveKey(self.state, self.loops)

    @property
    def loops_key(self) -> str:
        return self.key.loops_key

    @property
    def wave_key(self) -> str:
        return self.key.format()


def visit_of(run: FrozenRun, state: str, raw_loops: Mapping[str, int] | None, group: str = "") -> Visit:
    spec = run.loaded.spec
    if state not in spec.states:
        raise StepNotResolvable(f"state {state!r} is not in the spec of run {run.run_id}")
    loops = decode_loops(spec, raw_loops)
    st = spec.states[state]
    iteration = loops.get(state) if st.loop is not None and not st.sequence else None
    return Visit(run.run_id, state, group, loops, iteration)


_OUTPUTS_KEPT = 256  # loop-counter combinations whose outputs a frozen run keeps


def _outputs_now(run: FrozenRun, visit: Visit) -> dict[str, list[str]]:
    """Outputs of every other state as they resolve at this point (for `{{state.X.uri}}`). They depend on the frozen
    run and the loop counters only, so they are resolved once per counters (every state of the spec, at each
    launch, was O(states) per wave)."""
    counters = tuple(sorted(visit.loops.items()))
    every = run.outputs_at.get(counters)
    if every is None:
        every = {}
        for name in run.loaded.spec.states:
            try:
                step = resolve_step(run.loaded, name, run.run_ctx, loops=visit.loops, state_outputs={})
            except TokenError:
                continue
            every[name] = [o["uri"] for o in step.outputs]
        if len(run.outputs_at) >= _OUTPUTS_KEPT:
            run.outputs_at.clear()
        run.outputs_at[counters] = every
    return {name: list(uris) for name, uris in every.items() if name != visit.state}


def step_of(run: FrozenRun, visit: Visit) -> PlanStep:
    try:
        return resolve_step(
            run.loaded, visit.state, run.run_ctx, loops=visit.loops, state_outputs=_outputs_now(run, visit),
            iteration=visit.iteration, group=visit.group,
        )
    except TokenError as exc:
        raise StepNotResolvable(f"state {visit.state!r}: {exc.message}") from None


def decision_uri_of(run: FrozenRun, visit: Visit) -> str:
    try:
        return decision_uri(run.loaded, visit.state, run.run_ctx, loops=visit.loops,
                            state_outputs=_outputs_now(run, visit))
    except TokenError as exc:
        raise StepNotResolvable(f"state {visit.state!r}: decision uri: {exc.message}") from None
