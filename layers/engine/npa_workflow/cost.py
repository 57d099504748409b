"""What one run of a spec costs in AWS orchestration, before it starts. Pure: no I/O, no AWS calls.

For each decision assumption (`promote_checkpoint`, `loop_back`) the estimate walks the compiled state
machine the way an execution would when every decision artifact holds that value, and counts:

- state transitions: every state entered (`*StateEntered` events, which Step Functions Standard bills): a
  wave is its Task (a `waitForTaskToken` wait costs no more however long the job runs); helper states
  (`<x>.decide`, `<x>.until`, `<x>.next`, `<x>.trigger`, `<x>.branch`, `<x>.loop`, `<x>.end`, Pass/Succeed)
  count when entered; a Map counts itself and, per member, its processor's states;
- Lambda invocations: launch per wave Task entered (each member of a group launches its own job), decide
  per decision point, trigger per trigger Task, cleanup 0 (it only runs when a wave fails), the inbox once
  (the run starts from a spec put under `inbox/`), and the watch schedule's ticks over the run's duration
  (it is a stack-wide schedule, so concurrent runs share it);
- compute (`compute_cost`): each step's accelerator- or vCPU-hours for an assumed step duration
  (`assume_minutes`, per-state `step_minutes`) and their price from a price table; the same durations give
  the run's duration, and so the watch ticks;
- prices: $0.025 per 1,000 state transitions; Lambda (arm64) $0.20 per 1M requests plus
  $0.0000133334 per GB-second at a stated memory size and average duration.

The success path only: no retries, no failures, no free tier. The plan of the same assumption gives the
waves and jobs, and the walk's launches must match its jobs (`consistent`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from npa_workflow import decisions
from npa_workflow.compile.asl import CompiledMachine, CompileOptions, compile_spec
from npa_workflow.compile.history import estimate_history_events
from npa_workflow.compute_cost import ComputeCost, ComputePrices, StepMinutes, compute_cost, watch_ticks
from npa_workflow.plan.planner import build_plan, run_context
from npa_workflow.plan.waves import build_waves
from npa_workflow.protocol import functions as function_table
from npa_workflow.spec.validate import LoadedSpec

ASSUMPTIONS = ("promote_checkpoint", "loop_back")
# The functions a run invokes on its success path (the function table's: reap only runs for failed runs).
FUNCTIONS = (*(f.name for f in function_table.MACHINE_INVOKED), function_table.INBOX_FN.name, function_table.WATCH.name)
MAX_STATES_ENTERED = 1_000_000


class CostError(ValueError):
    """The compiled machine holds something the estimate cannot walk."""


@dataclass(frozen=True)
class Pricing:
    transition_usd_per_1000: float = 0.025  # Step Functions Standard
    lambda_request_usd_per_million: float = 0.20
    lambda_gb_second_usd: float = 0.0000133334  # arm64
    lambda_memory_mb: int = function_table.LAUNCH.memory_mb  # the function table's (protocol.functions)
    lambda_duration_ms: int = 1000  # assumed average billed duration of one invocation

    @property
    def gb_seconds_per_invocation(self) -> float:
        return self.lambda_memory_mb / 1024 * self.lambda_duration_ms / 1000

    def describe(self) -> str:
        return (f"${self.transition_usd_per_1000:g} per 1,000 state transitions (Standard); Lambda arm64 "
                f"${self.lambda_request_usd_per_million:.2f} per 1M requests + ${self.lambda_gb_second_usd:.10f} per "
                f"GB-second, assuming {self.lambda_memory_mb} MB and {self.lambda_duration_ms:,} ms per invocation")

    def to_json(self) -> dict[str, Any]:
        return {
            "transition_usd_per_1000": self.transition_usd_per_1000,
            "lambda_request_usd_per_million": self.lambda_request_usd_per_million,
            "lambda_gb_second_usd": self.lambda_gb_second_usd,
            "lambda_memory_mb": self.lambda_memory_mb,
            "lambda_duration_ms": self.lambda_duration_ms,
        }


@dataclass(frozen=True)
class AssumptionCost:
    assumption: str  # promote_checkpoint | loop_back
    decision: str  # the normalized value every decision point reads
    waves: int  # of the plan under this assumption
    jobs: int  # plan steps that run a command
    state_transitions: int
    transitions_by_kind: dict[str, int]  # wave | helper | map
    lambda_invocations: dict[str, int]  # FUNCTIONS → count
    lambda_gb_seconds: float
    step_functions_usd: float
    lambda_usd: float
    consistent: bool  # the walk launched exactly the plan's jobs
    compute: ComputeCost = field(default_factory=lambda: ComputeCost({}, 0.0, [], 0.0))

    @property
    def orchestration_usd(self) -> float:
        return self.step_functions_usd + self.lambda_usd

    @property
    def total_usd(self) -> float:
        return self.orchestration_usd + self.compute.usd

    @property
    def total_invocations(self) -> int:
        return sum(self.lambda_invocations.values())

    def to_json(self) -> dict[str, Any]:
        return {
            "assumption": self.assumption,
            "decision": self.decision,
            "waves": self.waves,
            "jobs": self.jobs,
            "state_transitions": self.state_transitions,
            "transitions_by_kind": dict(self.transitions_by_kind),
            "lambda_invocations": dict(self.lambda_invocations),
            "lambda_invocations_total": self.total_invocations,
            "lambda_gb_seconds": round(self.lambda_gb_seconds, 6),
            "step_functions_usd": round(self.step_functions_usd, 8),
            "lambda_usd": round(self.lambda_usd, 8),
            "compute": self.compute.to_json(),
            "compute_usd": round(self.compute.usd, 4),
            "total_usd": round(self.total_usd, 8),
            "consistent_with_plan": self.consistent,
        }


@dataclass(frozen=True)
class CostEstimate:
    workflow: str
    assume_minutes: float
    watch_interval_minutes: int
    pricing: Pricing
    assumptions: list[AssumptionCost]
    notes: list[str] = field(default_factory=list)
    step_minutes: dict[str, float] = field(default_factory=dict)
    compute_prices: ComputePrices = field(default_factory=ComputePrices)
    history_events: int = 0  # worst-case history events of one execution (limit 25,000)

    def by_assumption(self, name: str) -> AssumptionCost:
        return next(a for a in self.assumptions if a.assumption == name)

    def to_json(self) -> dict[str, Any]:
        return {
            "workflow": self.workflow,
            "assume_minutes": self.assume_minutes,
            "step_minutes": dict(self.step_minutes),
            "watch_interval_minutes": self.watch_interval_minutes,
            "pricing": self.pricing.to_json(),
            "compute_prices": self.compute_prices.to_json(),
            "assumptions": [a.to_json() for a in self.assumptions],
            "notes": list(self.notes),
            "history_events": self.history_events,
        }


@dataclass
class _Walk:
    """One execution's path through the machine under a constant decision value."""

    machine: CompiledMachine
    loaded: LoadedSpec
    functions: Mapping[str, str]  # function ARN placeholder → launch | decide | trigger | cleanup
    decision: str
    entered: int = 0
    by_kind: dict[str, int] = field(default_factory=lambda: {"wave": 0, "helper": 0, "map": 0})
    invocations: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FUNCTIONS, 0))

    def run(self) -> None:
        data: dict[str, Any] = {"loops": dict.fromkeys(self.machine.loop_keys.values(), 0), "decision": ""}
        self._states(self.machine.definition, data)

    def _enter(self, kind: str) -> None:
        self.entered += 1
        self.by_kind[kind] += 1
        if self.entered > MAX_STATES_ENTERED:
            raise CostError(f"the walk entered more than {MAX_STATES_ENTERED:,} states: a loop without a bound?")

    def _states(self, machine: Mapping[str, Any], data: dict[str, Any]) -> None:
        states = machine["States"]
        name: str | None = machine["StartAt"]
        while name is not None:
            state = states.get(name)
            if state is None:
                raise CostError(f"the machine names state {name!r}, which it does not define")
            name = self._step(name, state, data)

    def _step(self, name: str, state: Mapping[str, Any], data: dict[str, Any]) -> str | None:
        kind = state.get("Type")
        if kind == "Task":
            function = self.functions.get(str(state.get("Parameters", {}).get("FunctionName", "")), "")
            self._enter("wave" if function == "launch" else "helper")
            if function:
                self.invocations[function] += 1
            if function == "decide":
                data["decision"] = self.decision
        elif kind == "Map":
            self._enter("map")
            for _ in range(self._map_items(name, state)):
                self._states(state["ItemProcessor"], {**data})
        elif kind == "Pass":
            self._enter("helper")
            self._pass(state, data)
        elif kind == "Choice":
            self._enter("helper")
            return self._choose(name, state, data)
        elif kind in ("Succeed", "Fail"):
            self._enter("helper")
            return None
        elif kind == "Wait":
            self._enter("helper")
        else:
            raise CostError(f"state {name!r} has type {kind!r}, which the estimate does not walk")
        return None if state.get("End") else state.get("Next")

    def _map_items(self, name: str, state: Mapping[str, Any]) -> int:
        groups = {key: group for group, key in self.machine.group_keys.items()}
        path = str(state.get("ItemsPath", ""))
        reader_key = str(state.get("ItemReader", {}).get("Parameters", {}).get("Key.$", ""))
        for key, group in groups.items():
            if path == f"$.groups.{key}" or f"/groups/{key}.json" in reader_key:
                return len(self.loaded.spec.states[group].parallel)
        raise CostError(f"Map state {name!r} reads no known group's members")

    def _pass(self, state: Mapping[str, Any], data: dict[str, Any]) -> None:
        params = state.get("Parameters")
        if not isinstance(params, Mapping):
            return
        loops = params.get("loops")
        if isinstance(loops, Mapping):
            new: dict[str, Any] = {}
            for key, value in loops.items():
                if key.endswith(".$"):
                    counter = key[:-2]
                    text = str(value)
                    if text.startswith("States.MathAdd("):
                        new[counter] = int(data["loops"].get(counter, 0)) + 1
                    else:
                        new[counter] = data["loops"].get(text.removeprefix("$.loops."), 0)
                else:
                    new[key] = value
            data["loops"] = new
        decision = params.get("decision")
        if isinstance(decision, Mapping) and "value" in decision:
            data["decision"] = decision["value"]

    def _choose(self, name: str, state: Mapping[str, Any], data: dict[str, Any]) -> str:
        for rule in state.get("Choices", []):
            variable = str(rule.get("Variable", ""))
            if variable == "$.decision.value":
                value: Any = data["decision"]
            elif variable.startswith("$.loops."):
                value = data["loops"].get(variable[len("$.loops."):], 0)
            else:
                raise CostError(f"Choice {name!r} reads {variable!r}, which the estimate does not model")
            if "StringEquals" in rule and value == rule["StringEquals"]:
                return rule["Next"]
            if "NumericGreaterThanEquals" in rule and value >= rule["NumericGreaterThanEquals"]:
                return rule["Next"]
        if "Default" not in state:
            raise CostError(f"Choice {name!r} matched no rule and has no Default")
        return state["Default"]


def _functions(options: CompileOptions) -> dict[str, str]:
    return {options.launch_arn: "launch", options.decide_arn: "decide", options.trigger_arn: "trigger",
            options.cleanup_arn: "cleanup"}


def estimate_assumption(
    loaded: LoadedSpec,
    machine: CompiledMachine,
    assumption: str,
    *,
    options: CompileOptions,
    pricing: Pricing,
    watch_invocations: int | None = None,
    run_id: str | None = None,
    minutes: StepMinutes | None = None,
    prices: ComputePrices | None = None,
    watch_interval_minutes: int = 1,
) -> AssumptionCost:
    """`watch_invocations` None: the ticks over the run's duration under `minutes`."""
    plan = build_plan(loaded, run_id=run_id, assume_decision=assumption)
    waves = build_waves(loaded, plan, run_context(loaded, plan.run_id),
                        max_concurrency_cap=options.max_concurrency_cap)
    jobs = sum(1 for step in plan.steps if step.command)
    compute = compute_cost(plan.steps, waves, minutes or StepMinutes(), prices or ComputePrices())
    if watch_invocations is None:
        watch_invocations = watch_ticks(compute.run_minutes, watch_interval_minutes)
    walk = _Walk(machine, loaded, _functions(options), decisions.normalize(assumption))
    walk.run()
    invocations = dict(walk.invocations)
    invocations["inbox"] = 1
    invocations["watch"] = watch_invocations
    count = sum(invocations.values())
    gb_seconds = count * pricing.gb_seconds_per_invocation
    lambda_usd = count * pricing.lambda_request_usd_per_million / 1_000_000 + gb_seconds * pricing.lambda_gb_second_usd
    return AssumptionCost(
        assumption=assumption,
        decision=decisions.normalize(assumption),
        waves=len(waves.waves),
        jobs=jobs,
        state_transitions=walk.entered,
        transitions_by_kind=dict(walk.by_kind),
        lambda_invocations=invocations,
        lambda_gb_seconds=gb_seconds,
        step_functions_usd=walk.entered * pricing.transition_usd_per_1000 / 1000,
        lambda_usd=lambda_usd,
        consistent=walk.invocations["launch"] == jobs,
        compute=compute,
    )


def estimate_cost(
    loaded: LoadedSpec,
    *,
    assume_minutes: float = 0.0,
    step_minutes: Mapping[str, float] | None = None,
    watch_interval_minutes: int = 1,
    pricing: Pricing | None = None,
    prices: ComputePrices | None = None,
    options: CompileOptions | None = None,
    run_id: str | None = None,
) -> CostEstimate:
    """The estimate per run under both assumptions. `assume_minutes` is how long each step is assumed to
    run (`step_minutes` overrides it per state): the spec says nothing about durations, so 0 leaves compute
    and the watch schedule out, and the notes say so."""
    overrides = dict(step_minutes or {})
    if assume_minutes < 0 or any(v < 0 for v in overrides.values()):
        raise ValueError("assume_minutes must be >= 0")
    if watch_interval_minutes < 1:
        raise ValueError("watch_interval_minutes must be >= 1")
    unknown = sorted(set(overrides) - set(loaded.spec.states))
    if unknown:
        raise ValueError(f"--assume-minutes names no state of the spec: {', '.join(unknown)}")
    pricing = pricing or Pricing()
    prices = prices or ComputePrices()
    options = options or CompileOptions()
    minutes = StepMinutes(assume_minutes, overrides)
    machine = compile_spec(loaded, options)
    results = [
        estimate_assumption(loaded, machine, a, options=options, pricing=pricing, run_id=run_id, minutes=minutes,
                            prices=prices, watch_interval_minutes=watch_interval_minutes)
        for a in ASSUMPTIONS
    ]
    notes = [f"prices: {pricing.describe()}"]
    if minutes.given:
        per_state = ", ".join(f"{k} {v:g}" for k, v in overrides.items())
        notes.append(f"steps: each assumed to run {assume_minutes:g} min" + (f" ({per_state} min)" if per_state else "")
                     + "; the run's duration follows its waves (a group's members "
                       "max_concurrency at a time)")
        notes.append(f"watch: every {watch_interval_minutes} min over the run's duration (a stack-wide schedule: "
                     "concurrent runs share it)")
        notes.append(f"compute: accelerator-hours (else vCPU-hours) × USD per hour from the {prices.source} "
                     "(indicative on-demand list prices; --prices FILE for yours)")
        for kind in sorted({k for r in results for k in r.compute.unpriced}):
            notes.append(f"compute: no price for {kind}: its hours are counted, priced 0 (add it to --prices)")
    else:
        notes.append("compute and watch: not included — no step duration assumed (pass --assume-minutes N, "
                     "and STATE=N per state)")
    notes.append("success path only: no retries, no cleanup; free tiers not applied; S3 events in the stack "
                 "bucket that also invoke the trigger function are not counted")
    history = estimate_history_events(loaded, options)  # compile/history.py: the compiler rejects above the limit
    notes.append(f"history: at most {history.events:,} events per execution (every loop to its max, every retry "
                 f"spent), of Step Functions' {history.limit:,}")
    for r in results:
        if not r.consistent:
            notes.append(f"{r.assumption}: the machine launches {r.lambda_invocations['launch']} jobs, the plan "
                         f"has {r.jobs}; the transition count follows the machine")
    return CostEstimate(
        history_events=history.events,
        workflow=loaded.spec.name,
        assume_minutes=assume_minutes,
        watch_interval_minutes=watch_interval_minutes,
        pricing=pricing,
        assumptions=results,
        notes=notes,
        step_minutes=overrides,
        compute_prices=prices,
    )
