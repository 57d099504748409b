"""The static planner: walk the spec from `initial`, unrolling loops with an assumed decision.

Semantics follow the language (docs/language.md, "States"): sequences walk children with transitions
disabled (a child's `next` is still followed), looped sequences reset the decision each
iteration and stop early when `until` holds, leaf loops number their steps, parallel groups
append members in declared order and then follow the group's `next` (the barrier).
"""

from __future__ import annotations

from dataclasses import replace

from npa_workflow import decisions
from npa_workflow.errors import SpecError
from npa_workflow.plan.model import Plan, PlanStep
from npa_workflow.plan.steps import resolve_step
from npa_workflow.spec.config import RunContext, resolve_config
from npa_workflow.spec.ints import IntFieldError, resolve_bounded, yaml_bool
from npa_workflow.spec.model import State
from npa_workflow.spec.paths import join
from npa_workflow.spec.tokens import TokenError
from npa_workflow.spec.validate import LoadedSpec

# Work items of the walk's explicit stack.
_VISIT, _ITERATION, _ITERATION_END = "visit", "iteration", "iteration-end"


def default_plan_run_id(workflow: str) -> str:
    return f"{workflow}-plan"


def step_limit(state_count: int) -> int:
    return max(256, 64 * state_count)


def run_context(loaded: LoadedSpec, run_id: str) -> RunContext:
    spec = loaded.spec
    ctx, problems = resolve_config(spec.config, spec.name, run_id, spec.run)
    if problems:
        raise SpecError(problems).with_file(loaded.file)
    return ctx


class _Walker:
    def __init__(self, loaded: LoadedSpec, run_ctx: RunContext, assumption: str) -> None:
        self.loaded = loaded
        self.spec = loaded.spec
        self.run_ctx = run_ctx
        self.assumption = assumption
        self.steps: list[PlanStep] = []
        self.loops: dict[str, int] = {}
        self.outputs: dict[str, list[str]] = {}
        self.last_decision = ""
        self.active_loops: list[str] = []  # the looped sequences being walked, innermost last
        self.limit = step_limit(len(self.spec.states))
        self.stack_limit = self.limit + len(self.spec.states)

    def fail(self, path: str, message: str, hint: str = "") -> SpecError:
        return SpecError.single(path, message, hint, self.loaded.file)

    def emit(self, name: str, *, iteration: int | None, loop_label: str, group: str) -> None:
        try:
            step = resolve_step(
                self.loaded, name, self.run_ctx, loops=self.loops, state_outputs=self.outputs,
                iteration=iteration, loop_label=loop_label, group=group,
            )
        except TokenError as exc:
            raise self.fail(join("states", name), exc.message, exc.hint) from None
        loop = name if iteration is not None else (self.active_loops[-1] if self.active_loops else "")
        step = replace(step, loop=loop, round=self.loops.get(loop) if loop else None, loops=dict(self.loops))
        self.steps.append(step)
        self.outputs[name] = [o["uri"] for o in step.outputs]
        if len(self.steps) > self.limit:
            raise self.fail("states", f"plan exceeded step limit ({self.limit} steps)",
                            "lower loop budgets or split the workflow")

    def loop_max(self, name: str, st: State) -> int:
        assert st.loop is not None
        try:
            return resolve_bounded(st.loop.max, self.run_ctx.config, "loop.max", 1, 1)
        except IntFieldError as exc:
            raise self.fail(join("states", name, "loop", "max"), exc.message, exc.hint) from None

    def take_transition(self, st: State) -> str:
        for t in st.transitions:
            if t.if_ is not None:
                key = t.if_.strip()[len("config."):]
                if not yaml_bool(self.run_ctx.config.get(key)):
                    continue
            if t.when is None or decisions.predicate(t.when, self.last_decision):
                return t.goto
        return ""

    def walk(self, initial: str) -> None:
        """Depth-first walk with an explicit stack, so long `next` chains and deep nesting cannot
        exhaust Python's recursion limit. Items are processed last-in first-out: a child's `next`
        target is pushed on top and so expands before the child's next sibling."""
        stack: list[tuple] = [(_VISIT, initial, True, "")]
        while stack:
            item = stack.pop()
            if item[0] == _VISIT:
                self._visit(item[1], item[2], item[3], stack)
            elif item[0] == _ITERATION:
                self._iteration(item[1], item[2], item[3], stack)
            else:
                self._iteration_end(item[1], item[2], item[3], stack)
            # Every pending visit yields at least one step and each enclosing sequence holds one more
            # item, so a longer stack is a plan beyond the limit. It also stops a body that contains
            # itself and never emits a step (validation forbids that).
            if len(stack) > self.stack_limit:
                raise self.fail(join("states", item[1]), f"plan exceeded step limit ({self.limit} steps)",
                                "the walk nests too deep; a sequence may contain itself")

    def _follow(self, target: str, stack: list[tuple]) -> None:
        # States reached via next/goto get loop_label "" and walk with transitions enabled.
        if target:
            stack.append((_VISIT, target, True, ""))

    def _visit(self, name: str, follow_transitions: bool, loop_label: str, stack: list[tuple]) -> None:
        st = self.spec.states[name]
        if st.parallel:
            # Transitions on a group are ignored; its next is the barrier after every member.
            for member in st.parallel:
                self.emit(member, iteration=None, loop_label=name, group=name)
            if not st.terminal:
                self._follow(st.next, stack)
            return
        if st.sequence:
            budget = self.loop_max(name, st) if st.loop is not None else 1
            stack.append((_ITERATION, name, 1, budget))
            return
        if st.loop is not None:  # leaf loop
            for i in range(1, self.loop_max(name, st) + 1):
                self.loops[name] = i
                self.emit(name, iteration=i, loop_label=loop_label, group="")
                self.last_decision = self.last_decision or self.assumption
                if st.loop.until and decisions.predicate(st.loop.until, self.last_decision):
                    break
            # The contract follows a leaf loop's edges even inside a sequence and even if terminal.
            self._follow(self.take_transition(st) or st.next, stack)
            return
        # Every leaf visit is a step; a router (only edges) is a step without a command.
        self.emit(name, iteration=None, loop_label=loop_label, group="")
        if st.transitions:
            self.last_decision = self.assumption  # runtime: the artifact read right after the state
        if st.terminal:
            return
        if follow_transitions:
            self._follow(self.take_transition(st) or st.next, stack)
        elif not st.transitions:
            # A sequence child: its next is followed (inside the sequence walk), its transitions never.
            self._follow(st.next, stack)

    def _iteration(self, name: str, i: int, budget: int, stack: list[tuple]) -> None:
        st = self.spec.states[name]
        if st.loop is not None:
            self.loops[name] = i
            self.last_decision = ""
            if not self.active_loops or self.active_loops[-1] != name:
                self.active_loops.append(name)
        stack.append((_ITERATION_END, name, i, budget))
        stack.extend((_VISIT, child, False, name) for child in reversed(st.sequence))

    def _iteration_end(self, name: str, i: int, budget: int, stack: list[tuple]) -> None:
        st = self.spec.states[name]
        if st.loop is not None:
            self.last_decision = self.last_decision or self.assumption
            done = bool(st.loop.until) and decisions.predicate(st.loop.until, self.last_decision)
            if not done and i < budget:
                stack.append((_ITERATION, name, i + 1, budget))
                return
            if self.active_loops and self.active_loops[-1] == name:
                self.active_loops.pop()
        # Transitions on a sequence are ignored; its next follows the last iteration.
        if not st.terminal:
            self._follow(st.next, stack)


def build_plan(loaded: LoadedSpec, *, run_id: str | None = None, assume_decision: str | None = None) -> Plan:
    spec = loaded.spec
    rid = run_id or default_plan_run_id(spec.name)
    run_ctx = run_context(loaded, rid)
    assumption = decisions.resolve_assumption(assume_decision, run_ctx.config, spec.has_transitions)
    walker = _Walker(loaded, run_ctx, assumption)
    walker.walk(spec.initial)
    return Plan(
        workflow=spec.name,
        api_version=spec.api_version,
        initial=spec.initial,
        run_id=rid,
        assume_decision=assumption,
        steps=walker.steps,
    )
