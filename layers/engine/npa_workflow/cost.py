"""What one run of a spec costs in AWS, before it starts, and what the stack costs a month. Pure: no I/O.

For each decision assumption (`promote_checkpoint`, `loop_back`) the estimate walks the compiled state
machine the way an execution would when every decision artifact holds that value, and counts:

- state transitions: every state entered (`*StateEntered` events, which Step Functions Standard bills): a
  wave is its Task (a `waitForTaskToken` wait costs no more however long the job runs); helper states
  (`<x>.decide`, `<x>.until`, `<x>.next`, `<x>.trigger`, `<x>.branch`, `<x>.loop`, `<x>.end`, Pass/Succeed)
  count when entered; a Map counts itself and, per member, its processor's states;
- Lambda invocations: launch per wave Task entered (each member of a group launches its own job), decide
  per decision point, trigger per trigger Task and per object created in the engine bucket, cleanup 0 (it only
  runs when a wave fails), the inbox once (the run starts from a spec put under `inbox/`), the reap once (its
  rule sends it every ended execution: it records the success), and the watch schedule's ticks over the run's
  duration (it is a stack-wide schedule, so concurrent runs share it);
- compute (`compute_cost`): each step's accelerator- or vCPU-hours for an assumed step duration
  (`assume_minutes`, per-state `step_minutes`) and their price from a price table; the same durations give
  the run's duration, and so the watch ticks;
- every other per-run item (`run_items`), each with what it assumes: Lambda duration per function at its
  configured memory (protocol.functions) × an assumed duration (`ASSUMED_DURATION_MS`), the trigger
  function's invocation for every object created in the engine bucket (its rule matches the whole bucket),
  the reap's on the execution's end; DynamoDB write units of the ledger's items, twice for items in an
  ALL-projected index (infra/storage.py: `active`, `runs`), and read units; S3 PUT/LIST and GET/HEAD
  requests; the EventBridge events the bucket sends for every object (created, and later expired); the state
  machines' logs at level ALL with execution data (one CloudWatch Logs event per history event);
  Secrets Manager calls;
- the stack's fixed cost a month (`monthly_cost`): the watch schedule's idle ticks, the alarms (one per spec,
  one per function, two for event delivery: infra/monitoring.py), the SkyPilot token's secret;
- prices: `aws_prices.PRICES`, each with the AWS pricing page it was read from.

The success path only: no retries, no failures, no free tier, no storage. The plan of the same assumption gives
the waves and jobs, and the walk's launches must match its jobs (`consistent`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from npa_workflow import decisions
from npa_workflow.aws_prices import PRICES, Price
from npa_workflow.compile.asl import CompiledMachine, CompileOptions, compile_spec
from npa_workflow.compile.history import estimate_history_events
from npa_workflow.compute_cost import ComputeCost, ComputePrices, StepMinutes, compute_cost, watch_ticks
from npa_workflow.plan.planner import build_plan, run_context
from npa_workflow.plan.waves import build_waves
from npa_workflow.protocol import functions as function_table
from npa_workflow.spec.validate import LoadedSpec

ASSUMPTIONS = ("promote_checkpoint", "loop_back")
# The functions a run invokes on its success path: the machine's Tasks, the inbox, the watch schedule, the reap
# (the rule sends it every ended execution, SUCCEEDED too: it records the success), and the trigger function
# once per object created in the engine bucket.
TRIGGER_EVENTS = "trigger on S3"
FUNCTIONS = (*(f.name for f in function_table.MACHINE_INVOKED), function_table.INBOX_FN.name, function_table.WATCH.name,
             function_table.REAP.name, TRIGGER_EVENTS)
MAX_STATES_ENTERED = 1_000_000

# What the estimate cannot know, assumed (and printed with each item):
# the average billed duration of one invocation of each function, ms (a launch loads the frozen spec and makes
# SkyPilot's submit call; a watch tick under load may take its whole 120 s timeout; an S3 event's trigger reads
# one index page).
ASSUMED_DURATION_MS: dict[str, int] = {"inbox": 3000, "launch": 2000, "decide": 1000, "trigger": 1000,
                                       "cleanup": 5000, "watch": 5000, "reap": 1000, TRIGGER_EVENTS: 200}
IDLE_WATCH_MS = 1000  # a tick with nothing active (the fixed cost's)
WAVE_ITEM_KB = 2  # a wave attempt item: its task token (~700 B), ids, and a timeline that grows per status
WAVE_WRITES = 4  # begin, the job id, RUNNING, the end
LOG_EVENT_KB = 1.0  # a state machine log event at level ALL with execution data: the state's input or output
FROZEN_OBJECTS = 3  # runs/<id>/spec.yaml, tools.yaml, run.json
INBOX_GETS = 3  # the uploaded spec, catalog/tools.yaml, catalog/machines.json
HEARTBEAT_MINUTES = 2.0  # the watch reads a run's CANCEL item when a heartbeat is due (0.4 × HeartbeatSeconds 300)
DELIVERY_ALARMS = 2  # undeliverable events, failed invocations (infra/monitoring.py)
MINUTES_PER_MONTH = 30 * 24 * 60


class CostError(ValueError):
    """The compiled machine holds something the estimate cannot walk."""


@dataclass(frozen=True)
class Pricing:
    """The price table (`aws_prices.PRICES`), each function's memory (the function table's) and assumed duration."""

    prices: dict[str, Price] = field(default_factory=lambda: dict(PRICES))
    duration_ms: dict[str, int] = field(default_factory=lambda: dict(ASSUMED_DURATION_MS))
    memory_mb: dict[str, int] = field(default_factory=lambda: {
        **{f.name: f.memory_mb for f in function_table.FUNCTIONS}, TRIGGER_EVENTS: function_table.TRIGGER.memory_mb})

    def each(self, key: str) -> float:
        return self.prices[key].usd_each

    def gb_seconds(self, function: str, invocations: int) -> float:
        return invocations * self.memory_mb[function] / 1024 * self.duration_ms[function] / 1000

    def describe(self) -> str:
        return "; ".join(p.text() for p in self.prices.values())

    def to_json(self) -> dict[str, Any]:
        return {
            "prices": {k: {"usd": p.usd, "per": p.per, "unit": p.unit, "source": p.source}
                       for k, p in self.prices.items()},
            "lambda_duration_ms": dict(self.duration_ms),
            "lambda_memory_mb": dict(self.memory_mb),
        }


@dataclass(frozen=True)
class LineItem:
    """One priced quantity of a run (or of a month), with what it assumes."""

    service: str  # Step Functions | Lambda | DynamoDB | S3 | EventBridge | CloudWatch | Secrets Manager
    name: str
    quantity: float
    unit: str
    price_key: str
    assumption: str
    usd: float

    def to_json(self) -> dict[str, Any]:
        return {"service": self.service, "item": self.name, "quantity": round(self.quantity, 6), "unit": self.unit,
                "price": self.price_key, "usd": round(self.usd, 8), "assumption": self.assumption}


def _item(pricing: Pricing, service: str, name: str, quantity: float, unit: str, key: str,
          assumption: str) -> LineItem:
    return LineItem(service, name, quantity, unit, key, assumption, quantity * pricing.each(key))


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
    items: list[LineItem] = field(default_factory=list)  # every priced AWS item of the run (`run_items`)
    history_events: int = 0  # of the success path: what the logs at level ALL ingest, one event each

    def usd_of(self, service: str) -> float:
        return sum(i.usd for i in self.items if i.service == service)

    @property
    def orchestration_usd(self) -> float:
        return sum(i.usd for i in self.items)

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
            "history_events": self.history_events,
            "items": [i.to_json() for i in self.items],
            "aws_usd": round(self.orchestration_usd, 8),
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
    # History events of the success path (ExecutionStarted / ExecutionSucceeded, then per state): a Task's
    # Entered, Scheduled, Started, (Submitted for a callback,) Succeeded, Exited; a Map's Entered, Started,
    # Succeeded, Exited and two per member (IterationStarted / Succeeded); any other state's Entered, Exited.
    events: int = 2
    member_files: int = 0  # Distributed Maps entered: each reads its members' file from the engine bucket

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
        self.events += 2
        if kind == "Task":
            self.events += 4 if str(state.get("Resource", "")).endswith(".waitForTaskToken") else 3
            function = self.functions.get(str(state.get("Parameters", {}).get("FunctionName", "")), "")
            self._enter("wave" if function == "launch" else "helper")
            if function:
                self.invocations[function] += 1
            if function == "decide":
                data["decision"] = self.decision
        elif kind == "Map":
            self._enter("map")
            members = self._map_items(name, state)
            self.events += 2 + 2 * members
            self.member_files += "ItemReader" in state
            for _ in range(members):
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
    minutes = minutes or StepMinutes()
    steps = [step for step in plan.steps if step.command]
    outputs = sum(len(step.outputs) for step in steps)
    objects = 1 + FROZEN_OBJECTS + walk.member_files + outputs  # the upload, the frozen run, members, outputs
    invocations = dict(walk.invocations)
    invocations["inbox"] = 1
    invocations["watch"] = watch_invocations
    invocations["reap"] = 1
    invocations[TRIGGER_EVENTS] = objects
    active_ticks = sum(math.ceil(minutes.of(step.state) / watch_interval_minutes) for step in steps)
    items = run_items(pricing, walk.entered, invocations, walk.events, walk.member_files, outputs, objects,
                      active_ticks, watch_interval_minutes)
    gb_seconds = sum(pricing.gb_seconds(name, n) for name, n in invocations.items())
    return AssumptionCost(
        assumption=assumption,
        decision=decisions.normalize(assumption),
        waves=len(waves.waves),
        jobs=jobs,
        state_transitions=walk.entered,
        transitions_by_kind=dict(walk.by_kind),
        lambda_invocations=invocations,
        lambda_gb_seconds=gb_seconds,
        step_functions_usd=sum(i.usd for i in items if i.service == "Step Functions"),
        lambda_usd=sum(i.usd for i in items if i.service == "Lambda"),
        consistent=walk.invocations["launch"] == jobs,
        compute=compute,
        items=items,
        history_events=walk.events,
    )


def run_items(pricing: Pricing, transitions: int, invocations: Mapping[str, int], events: int, member_files: int,
              outputs: int, objects: int, active_ticks: int, watch_interval_minutes: int) -> list[LineItem]:
    """Every priced AWS item of one run on its success path, each with what it assumes."""
    launches, decides, triggers = invocations["launch"], invocations["decide"], invocations["trigger"]
    ticks = invocations["watch"]
    lam = pricing.duration_ms
    items = [
        _item(pricing, "Step Functions", "transitions", transitions, "transitions", "sfn_transition",
              "every state entered (Standard bills each); a Map's members each enter their processor's states"),
        _item(pricing, "Lambda", "requests", sum(invocations.values()), "invocations", "lambda_request",
              f"launch per job, decide per decision, trigger per trigger Task and per engine-bucket object "
              f"({objects}), inbox and reap once, watch per tick of the run ({ticks})"),
    ]
    for name, count in invocations.items():
        if count:
            items.append(_item(pricing, "Lambda", f"{name} GB-s", pricing.gb_seconds(name, count), "GB-seconds",
                               "lambda_gb_second", f"{count:,} × {pricing.memory_mb[name]} MB (protocol.functions) "
                               f"× {lam[name]:,} ms assumed per invocation"))
    note_ticks = min(ticks, 3 * launches)
    writes = (launches * WAVE_WRITES * WAVE_ITEM_KB * 2 + (3 + note_ticks) * 2 + decides + triggers * 2 * 2)
    items.append(_item(
        pricing, "DynamoDB", "ledger writes", writes, "WRU", "dynamodb_write",
        f"per job {WAVE_WRITES} writes of a ~{WAVE_ITEM_KB} KB wave item, each also written to the ALL-projected "
        f"`active` index ({WAVE_WRITES * WAVE_ITEM_KB * 2} WRU); the run item's 3 writes and a change note per "
        f"watch tick with a wave write (≤ {note_ticks}), each also in the `runs` index; 1 per decision; 4 per "
        "trigger"))
    heartbeat_reads = math.ceil(ticks * watch_interval_minutes / HEARTBEAT_MINUTES) if ticks else 0
    reads = (launches * 2 + decides + triggers + active_ticks * WAVE_ITEM_KB / 4 * 0.5 + heartbeat_reads
             + invocations[TRIGGER_EVENTS] * 0.5 + 2)
    items.append(_item(
        pricing, "DynamoDB", "ledger reads", reads, "RRU", "dynamodb_read",
        "2 consistent reads per launch (the CANCEL item, the state's attempts), 1 per decision and trigger; each "
        f"job's ~{WAVE_ITEM_KB} KB item in the watch's eventually consistent index Query every tick it runs "
        f"({active_ticks} job-ticks); the CANCEL item per heartbeat (every {HEARTBEAT_MINUTES:g} min); an index "
        "page per S3 event's trigger; inbox and reap 1 each"))
    puts = objects + triggers
    items.append(_item(
        pricing, "S3", "PUT and LIST requests", puts, "requests", "s3_put",
        f"the upload, the frozen run ({FROZEN_OBJECTS}), {member_files} Distributed Map members file(s), "
        f"{outputs} declared output(s) as one object each; a LIST per trigger Task"))
    frozen_reads = (launches + decides + triggers) * FROZEN_OBJECTS
    gets = INBOX_GETS + frozen_reads + decides + member_files + outputs
    items.append(_item(
        pricing, "S3", "GET and HEAD requests", gets, "requests", "s3_get",
        f"the inbox's {INBOX_GETS}; the frozen run's {FROZEN_OBJECTS} objects per launch, decide and trigger Task "
        "(a fresh Lambda instance each: warm ones of the same run read them once); the decision artifact per "
        "decide; each members file; a HEAD per declared output when its job ends"))
    items.append(_item(
        pricing, "EventBridge", "S3 events", objects * 2, "events", "eventbridge_event",
        f"the bucket sends EventBridge every event of every object: {objects} created, and each expired later "
        "by the lifecycle rules"))
    items.append(_item(
        pricing, "CloudWatch", "machine logs", events * LOG_EVENT_KB / 1024 / 1024, "GB", "logs_ingestion_gb",
        f"level ALL with execution data: one log event per history event ({events:,} on the success path) of "
        f"~{LOG_EVENT_KB:g} KB"))
    items.append(_item(
        pricing, "Secrets Manager", "API calls", launches, "calls", "secret_api_call",
        "GetSecretValue of the SkyPilot token per launch (a fresh Lambda instance each: a warm one keeps it)"))
    return items


@dataclass(frozen=True)
class MonthlyCost:
    """The stack's fixed cost a month, whatever it runs."""

    specs: int
    specs_source: str  # where the count came from: the stack's deployed catalog, or a specs folder
    watch_interval_minutes: int
    items: list[LineItem]

    @property
    def usd(self) -> float:
        return sum(i.usd for i in self.items)

    def to_json(self) -> dict[str, Any]:
        return {"specs": self.specs, "specs_source": self.specs_source,
                "watch_interval_minutes": self.watch_interval_minutes, "items": [i.to_json() for i in self.items],
                "usd": round(self.usd, 6)}


def monthly_cost(specs: int, specs_source: str, *, watch_interval_minutes: int = 1, secrets: int = 1,
                 pricing: Pricing | None = None) -> MonthlyCost:
    """The watch schedule's ticks (idle: `IDLE_WATCH_MS` each, two empty index Queries), the alarms (one per spec,
    one per function, `DELIVERY_ALARMS`), the secret(s); a 30-day month."""
    pricing = pricing or Pricing()
    ticks = math.ceil(MINUTES_PER_MONTH / watch_interval_minutes)
    memory = function_table.WATCH.memory_mb
    alarms = specs + len(function_table.FUNCTIONS) + DELIVERY_ALARMS
    items = [
        _item(pricing, "Lambda", "watch requests", ticks, "invocations", "lambda_request",
              f"the schedule every {watch_interval_minutes} min: {ticks:,} ticks in 30 days"),
        _item(pricing, "Lambda", "watch GB-s", ticks * memory / 1024 * IDLE_WATCH_MS / 1000, "GB-seconds",
              "lambda_gb_second", f"{ticks:,} × {memory} MB × {IDLE_WATCH_MS:,} ms assumed per idle tick (a tick "
              "with work costs more: each run's line counts its ticks)"),
        _item(pricing, "DynamoDB", "watch index reads", ticks * 2 * 0.5, "RRU", "dynamodb_read",
              "two eventually consistent Queries of the `active` index per tick (waves, triggers), 0.5 RRU each"),
        _item(pricing, "CloudWatch", "alarms", alarms, "alarms", "alarm_month",
              f"one per spec ({specs}, {specs_source}), one per function ({len(function_table.FUNCTIONS)}), "
              f"{DELIVERY_ALARMS} for event delivery (infra/monitoring.py)"),
        _item(pricing, "Secrets Manager", "secrets", secrets, "secrets", "secret_month",
              "the SkyPilot API token; a step-secrets secret (stepSecretsArn) adds one"),
    ]
    return MonthlyCost(specs, specs_source, watch_interval_minutes, items)


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
    notes = ["prices: us-east-1 list prices, each with its AWS pricing page (npa_workflow/aws_prices.py, "
             "docs/operating.md)"]
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
    notes.append("success path only: no retries, no cleanup; free tiers not applied; not included: storage (S3, "
                 "DynamoDB and its point-in-time recovery, log retention), data transfer")
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
