"""The worst-case number of history events of one execution of a compiled spec.

A Standard execution fails at 25,000 history events and cannot be redriven then (AWS quota). Nothing
waits by polling here (a wave is one waitForTaskToken Task; heartbeats add no event), so a run's history
grows only with the states it passes through: the estimate follows the compiled machine's shape
(`compile/asl.py`), state by state, taking every loop to its `loop.max`, every retry budget spent and the
costliest branch of every choice. Events per construct, as Step Functions writes them (counted on moto's
history of the same machines, `tests/unit/test_history_estimate.py`):

- the execution: ExecutionStarted + ExecutionSucceeded/Failed (2);
- a waitForTaskToken Lambda Task (a wave, a trigger): Entered, Scheduled, Started, Submitted, Succeeded,
  Exited (6); each retry: Failed, Scheduled, Started, Submitted (4);
- a plain Lambda Task (decide, cleanup): 5; a Pass, a Choice, a Succeed state: 2; a Fail state: 1;
- an inline Map: 4, plus per member MapIterationStarted/Succeeded (2) and the member's own states: they
  count in the parent's history;
- a Distributed Map (a group above 40 members): 6 in the parent; its members run in child executions
  with histories of their own.

The Lambda service-error retrier (`LAMBDA_RETRY`) is left out: it retries transient faults, not work.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field

from npa_workflow.errors import Problem
from npa_workflow.spec.config import RunContext
from npa_workflow.spec.ints import resolve_bounded, yaml_bool
from npa_workflow.spec.model import Spec, State

HISTORY_LIMIT = 25_000
EXECUTION = 2
WAIT_TASK = 6
RETRY = 4
LAMBDA_TASK = 5
PASS = CHOICE = SUCCEED = 2
FAILURE_TAIL = LAMBDA_TASK + 1  # <state>.cleanup, then the run.failed Fail state
INLINE_MAP = 4
ITERATION = 2
DISTRIBUTED_MAP = 6


@dataclass(frozen=True)
class HistoryEstimate:
    events: int  # worst case: every loop to its max, every retry spent, the costliest branch, then a failure
    limit: int = HISTORY_LIMIT
    loops: dict[str, int] = field(default_factory=dict)  # loop state → events of all its rounds (worst case)

    @property
    def over_limit(self) -> bool:
        return self.events > self.limit

    def heaviest_loop(self) -> str | None:
        return max(self.loops, key=lambda n: self.loops[n]) if self.loops else None


class _Walk:
    def __init__(self, spec: Spec, run_ctx: RunContext, *, retries: int, recoveries: int, inline_limit: int,
                 cap: int) -> None:
        self.spec = spec
        self.cfg = run_ctx.config
        self.retries = retries
        self.recoveries = recoveries
        self.inline_limit = inline_limit
        self.cap = cap
        self.loops: dict[str, int] = {}
        self._active: set[str] = set()

    def wave(self, st: State) -> int:
        retries = self.retries if st.retries is None else resolve_bounded(st.retries, self.cfg, "retries", 0, 0)
        return WAIT_TASK + RETRY * (retries + self.recoveries)

    def loop_max(self, st: State) -> int:
        assert st.loop is not None
        return resolve_bounded(st.loop.max, self.cfg, "loop.max", 1, 1)

    def group(self, st: State) -> int:
        declared = resolve_bounded(st.max_concurrency, self.cfg, "maxConcurrency", len(st.parallel), 1)
        limit = min(declared, self.cap) if self.cap > 0 else declared
        if limit > self.inline_limit or len(st.parallel) > self.inline_limit:
            return DISTRIBUTED_MAP
        trigger = WAIT_TASK if any(self.spec.states[m].trigger is not None for m in st.parallel) else 0
        return INLINE_MAP + len(st.parallel) * (ITERATION + trigger + self.wave(st))

    def edges(self, st: State) -> list[str | None]:
        """Where a state's own edges can lead (None: the end of the run)."""
        targets: list[str | None] = []
        for t in st.transitions:
            if t.if_ is not None and not yaml_bool(self.cfg.get(t.if_.strip()[len("config."):])):
                continue
            targets.append(t.goto)
            if t.when is None:
                return targets
        targets.append(st.next or None)
        return targets

    def after(self, targets: list[str | None]) -> int:
        """The costliest way on; reaching the end through a Choice costs its `.end` Succeed state."""
        return max((self.visit(t, follow=True) if t else SUCCEED) for t in targets)

    def visit(self, name: str, *, follow: bool) -> int:
        if name in self._active:  # an edge back to a state being visited: loops are bounded by loop.max
            return 0
        self._active.add(name)
        try:
            return self._visit(name, self.spec.states[name], follow)
        finally:
            self._active.discard(name)

    def _visit(self, name: str, st: State, follow: bool) -> int:
        trigger = WAIT_TASK if st.trigger is not None else 0
        onward = 0 if st.terminal or not st.next else self.visit(st.next, follow=True)
        if st.parallel:
            return trigger + self.group(st) + onward
        if st.sequence:
            body = sum(self.visit(child, follow=False) for child in st.sequence)
            if st.loop is None:
                return PASS + body + onward
            rounds = self.loop_max(st)
            decide = LAMBDA_TASK if st.loop.until else 0
            cost = PASS + rounds * (body + decide + CHOICE) + (rounds - 1) * PASS
            self.loops[name] = cost
            return cost + (onward or SUCCEED)
        work = trigger + (self.wave(st) if st.has_command else PASS)
        if st.loop is not None:
            rounds = self.loop_max(st)
            decide = LAMBDA_TASK if (st.loop.until or st.writes_decision) else 0
            cost = PASS + rounds * (work + decide + CHOICE) + (rounds - 1) * PASS
            self.loops[name] = cost
            branch = CHOICE if any(t.when for t in st.transitions) else 0
            return cost + branch + self.after(self.edges(st))
        if st.terminal:
            return work
        if st.transitions:
            decide = LAMBDA_TASK
            if not follow:
                return work + decide
            branch = CHOICE if any(t.when for t in st.transitions) else 0
            return work + decide + branch + self.after(self.edges(st))
        return work + (onward if follow else 0)


def estimate_history_events(loaded: object, options: object | None = None) -> HistoryEstimate:
    """Worst-case history events of one execution of `loaded` (a LoadedSpec) compiled with `options`
    (CompileOptions; default: the compiler's). For `plan --cost` and the compile-time check."""
    from npa_workflow.compile.options import CompileOptions
    from npa_workflow.spec.config import resolve_config

    spec: Spec = loaded.spec  # type: ignore[attr-defined]
    opt = options if isinstance(options, CompileOptions) else CompileOptions()
    run_ctx, _ = resolve_config(spec.config, spec.name, "compile", spec.run)
    walk = _Walk(spec, run_ctx, retries=opt.retries, recoveries=opt.max_infrastructure_recoveries,
                 inline_limit=opt.inline_map_limit, cap=opt.max_concurrency_cap)
    events = EXECUTION + walk.visit(spec.initial, follow=True) + FAILURE_TAIL
    return HistoryEstimate(events=events, loops=dict(walk.loops))


def fix_hint(estimate: HistoryEstimate, spec: Spec, run_ctx: RunContext) -> str:
    """How to get under the limit: fewer rounds of the heaviest loop, or a group that runs distributed."""
    name = estimate.heaviest_loop()
    if name is None:
        return "split the workflow into specs that run one after the other (fewer states per execution)"
    st = spec.states[name]
    assert st.loop is not None
    rounds = resolve_bounded(st.loop.max, run_ctx.config, "loop.max", 1, 1)
    per_round = max(1, estimate.loops[name] // rounds)
    room = estimate.limit - (estimate.events - estimate.loops[name])
    fits = max(0, room // per_round)
    groups = [m for m in (st.sequence or []) if spec.states[m].parallel]
    hint = f"lower loop.max of '{name}' to {fits} or less (each round costs ~{per_round} events)"
    if groups:
        hint += (f", or give group '{groups[0]}' more than 40 members (or maxConcurrency above 40) so it runs as a "
                 "Distributed Map, whose members' events stay in child executions")
    return hint + ", or run fewer rounds per execution and chain runs"


@contextlib.contextmanager
def deep_walks(spec: Spec) -> Iterator[None]:
    """Room for the walks that recurse along the spec's edges (this estimate, the compiler): a long chain of
    states is a deep recursion."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(spec.states) + 1000))
    try:
        yield
    finally:
        sys.setrecursionlimit(limit)


def history_problem(loaded: object, options: object, run_ctx: RunContext) -> Problem | None:
    """The one problem (where, the estimate, the fix) of a spec whose worst-case history passes
    `options.history_limit` (0: no check), or None. The compiler raises it; `validate` reports it."""
    limit = int(getattr(options, "history_limit", HISTORY_LIMIT))
    if limit <= 0:
        return None
    spec: Spec = loaded.spec  # type: ignore[attr-defined]
    with deep_walks(spec):
        estimate = estimate_history_events(loaded, options)
    if estimate.events <= limit:
        return None
    loop = estimate.heaviest_loop()
    return Problem(
        f"states.{loop}.loop.max" if loop else "states",
        f"one execution of this spec may write {estimate.events:,} history events (worst case: every loop to its "
        f"max, every retry spent), over Step Functions' limit of {limit:,}: the execution would "
        "fail there and could not be redriven",
        fix_hint(estimate, spec, run_ctx), file=getattr(loaded, "file", "") or "")
