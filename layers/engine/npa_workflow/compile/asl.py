"""Spec → Amazon States Language (JSONPath). Pure: no I/O, no AWS calls.

Shape of the machine (one visible state per spec state; helpers named after their owner):
- leaf: a `lambda:invoke.waitForTaskToken` Task to the launch function, with
  TimeoutSeconds/HeartbeatSeconds, separate Retry budgets for `Wave.Failed` and
  `Wave.InfrastructureFailed`, and a Catch to `<owner>.cleanup` → `run.failed`;
- trigger: a `<state>.trigger` waitForTaskToken Task before the state's work;
- parallel group: a Map over the member names (items from the execution input, or an S3
  item list for a Distributed Map), so the definition does not grow with the group;
- looped sequence: `<seq>` Pass (counter = 1) → body → `<seq>.decide` → `<seq>.until`
  Choice → `<seq>.next` Pass (counter + 1, decision reset) → back to the body;
- transitions: `<state>.decide` Task, then a Choice on the normalized decision.

State data (fixed keys): {"run": {"run_id", "bucket"}, "loops": {"l1": n, ...},
"decision": {"value": str}, "groups": {"g1": [members]}}. Loop names become `l<n>` keys so
any spec name is a safe JSONPath; the mapping is `CompiledMachine.loop_keys`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from npa_workflow import decisions
from npa_workflow.compile.deadlines import (
    DEFAULT_HEARTBEAT_SECONDS,
    DEFAULT_MAX_WAIT_SECONDS,
    UNBOUNDED_SECONDS,
    input_deadline,
)
from npa_workflow.compile.history import HISTORY_LIMIT, deep_walks, history_problem  # noqa: F401 - HISTORY_LIMIT re-exported
from npa_workflow.compile.names import NameAllocator

# The options, and the compiler's default FunctionName of each Task (the slot's placeholder), re-exported.
from npa_workflow.compile.options import (  # noqa: F401
    CLEANUP,
    DECIDE,
    DISTRIBUTED_MAX_CONCURRENCY,
    INLINE_MAP_LIMIT,
    LAUNCH,
    TRIGGER,
    CompileOptions,
)
from npa_workflow.compile.size import MAX_DEFINITION_BYTES, deployed_definition_bytes, serialize_definition
from npa_workflow.errors import SpecError
from npa_workflow.plan.waves import concurrency_limit
from npa_workflow.protocol import errors
from npa_workflow.protocol.execution import MapItem
from npa_workflow.protocol.keys import group_keys, loop_keys
from npa_workflow.protocol.payloads import CleanupTask, DecideTask, WaveTask, check_payload
from npa_workflow.spec.config import RunContext, resolve_config
from npa_workflow.spec.ints import resolve_bounded, yaml_bool
from npa_workflow.spec.model import State
from npa_workflow.spec.validate import LoadedSpec

MAX_RETRIES = 20  # a state's `retries` (ASL MaxAttempts allows 99999; more than this is a loop, not a retry)
# Where a wave Task reads the run's deadline (`execution_input`): top level, and inside a Map's items.
DEADLINE_PATH = "$.run.deadline"
MEMBER_DEADLINE_PATH = "$.deadline"

# AWS's recommended retrier for `lambda:invoke` Tasks: these are the Lambda service's transient
# errors (throttling, service faults, the SDK losing the connection) — the function never ran, or
# ran and its answer was lost. They are retried with backoff on their own budget, before and apart
# from the wave budgets, so a throttled 40-member fan-out does not spend `Wave.*` retries or fail
# the run. Order matters: Step Functions uses the first retrier whose ErrorEquals matches.
# Re-invoking launch is safe: it is idempotent by the ledger's launch lock (a second call adopts
# the recorded attempt and takes the new token; it never submits a second job).
# The budget is sized for throttling: a 10,000-member Distributed Map's launches queue for the account's
# unreserved concurrency (protocol/functions.py), so a throttled launch waits up to 2+4+8+16+32 s and then 60 s
# per attempt, about 26 minutes in all (13 expected under full jitter), and the group is delayed, not failed
# (docs/deploy.md, "Concurrency", has the arithmetic; its Map keeps ToleratedFailureCount 0 for real failures).
LAMBDA_RETRY: dict[str, Any] = {
    "ErrorEquals": list(errors.LAMBDA_SERVICE_ERRORS),
    "IntervalSeconds": 2,
    "MaxAttempts": 30,
    "BackoffRate": 2.0,
    "MaxDelaySeconds": 60,
    "JitterStrategy": "FULL",
}

# A predicate holds when the normalized decision equals this value (decisions.predicate).
_PREDICATE_VALUE = {"promote_checkpoint": decisions.PROMOTE, "loop_back": decisions.LOOP_BACK}



@dataclass(frozen=True)
class CompiledMachine:
    definition: dict[str, Any]
    loop_keys: dict[str, str]  # spec loop state → key under $.loops
    group_keys: dict[str, str]  # spec group state → key under $.groups
    distributed_groups: list[str] = field(default_factory=list)
    asl_names: dict[str, str] = field(default_factory=dict)  # spec state → its (first) ASL name
    max_wait_seconds: int = DEFAULT_MAX_WAIT_SECONDS  # the default `$.run.deadline` (CompileOptions')
    heartbeat_seconds: int = DEFAULT_HEARTBEAT_SECONDS


def _task(resource_fn: str, payload: dict[str, Any], *, wait: bool, model: type[Any]) -> dict[str, Any]:
    """Every Lambda Task starts with the Lambda service-error retrier (see LAMBDA_RETRY). The payload must be the
    `model` the invoked function validates (protocol.payloads): a drifted field fails the compile."""
    return {
        "Type": "Task",
        "Resource": "arn:aws:states:::lambda:invoke" + (".waitForTaskToken" if wait else ""),
        "Parameters": {"FunctionName": resource_fn, "Payload": check_payload(model, payload)},
        "Retry": [dict(LAMBDA_RETRY, ErrorEquals=list(errors.LAMBDA_SERVICE_ERRORS))],
    }


def _deadline_of(state: dict[str, Any]) -> dict[str, int]:
    """TimeoutSeconds/HeartbeatSeconds of a Task, or of the wave Task inside a Map's processor."""
    tasks = [state]
    if state.get("Type") == "Map":
        tasks = [s for s in state["ItemProcessor"]["States"].values() if s.get("Type") == "Task"]
    found: dict[str, Any] = {}
    for task in tasks:
        for field_name, key in (("TimeoutSeconds", "timeoutSeconds"), ("HeartbeatSeconds", "heartbeatSeconds")):
            if field_name in task:
                found[key] = max(found.get(key, 0), int(task[field_name]))
        if "TimeoutSecondsPath" in task and "timeoutSeconds" not in found:
            found["timeoutSeconds.$"] = DEADLINE_PATH  # the caught state's input still holds `$.run`
    return found


class _Compiler:
    def __init__(self, loaded: LoadedSpec, options: CompileOptions, run_ctx: RunContext) -> None:
        self.loaded = loaded
        self.spec = loaded.spec
        self.opt = options
        self.cfg = run_ctx.config
        self.names = NameAllocator(list(self.spec.states))
        self.states: dict[str, dict[str, Any]] = {}
        self.memo: dict[tuple[str, str | None], str] = {}
        self.copies: dict[str, int] = {}
        self.loop_keys = loop_keys(self.spec)
        self.group_keys = group_keys(self.spec)
        self.distributed: list[str] = []
        self.ends: dict[str, str] = {}
        self.failed = self.names.helper("run", "failed")

    # -- common pieces -------------------------------------------------------------------
    def limit_error(self, path: str, message: str, hint: str) -> SpecError:
        """A spec valid in the language that AWS would refuse to run: one line naming where, what and the fix."""
        return SpecError.single(path, message, hint, file=getattr(self.loaded, "file", "") or "")

    def base_payload(self, spec_state: str) -> dict[str, Any]:
        return {
            "run_id.$": "$.run.run_id",
            "state": spec_state,
            "loops.$": "$.loops",
            "execution.$": "$$.Execution.Id",
        }

    def state_timeout(self, st: State) -> int | None:
        """A state's own `timeoutSeconds` (None: the run's deadline applies)."""
        if st.timeout_seconds is None:
            return None
        return resolve_bounded(st.timeout_seconds, self.cfg, "timeoutSeconds", 1, 1, UNBOUNDED_SECONDS)

    def state_retries(self, st: State) -> int:
        if st.retries is None:
            return self.opt.retries
        return resolve_bounded(st.retries, self.cfg, "retries", 0, 0, MAX_RETRIES)

    def _deadline(self, task: dict[str, Any], fixed: int | None, path: str) -> None:
        """TimeoutSeconds (a state's own) or TimeoutSecondsPath (the run's), and HeartbeatSeconds below it."""
        limit = fixed
        if fixed is not None:
            task["TimeoutSeconds"] = fixed
        elif self.opt.deadline_from_input:
            task["TimeoutSecondsPath"] = path  # execution_input keeps it above HeartbeatSeconds
        elif self.opt.max_wait_seconds > 0:
            limit = task["TimeoutSeconds"] = self.opt.max_wait_seconds
        heartbeat = self.opt.heartbeat_seconds
        if heartbeat > 0 and limit is not None and heartbeat >= limit:
            # Step Functions rejects a heartbeat not shorter than the timeout. A state's own deadline this
            # short notices a dead watch by itself: no heartbeat (the watch may tick slower than it).
            heartbeat = 0 if fixed is not None else limit - 1
        if heartbeat > 0:
            task["HeartbeatSeconds"] = heartbeat

    def wave_task(self, spec_state: str, payload: dict[str, Any], *, path: str = DEADLINE_PATH) -> dict[str, Any]:
        st = self.spec.states[spec_state]
        task = _task(self.opt.launch_arn, {**payload, "token.$": "$$.Task.Token"}, wait=True, model=WaveTask)
        task["ResultPath"] = None
        self._deadline(task, self.state_timeout(st), path)
        retry = task["Retry"]
        retries = self.state_retries(st)
        if retries > 0:
            retry.append({"ErrorEquals": [errors.WAVE_FAILED], "MaxAttempts": retries,
                          "IntervalSeconds": self.opt.retry_interval_seconds, "BackoffRate": self.opt.retry_backoff})
        if self.opt.max_infrastructure_recoveries > 0:
            # Wave.Lost: the scheduler no longer knows the job (its server lost its state): an infrastructure
            # failure like any other, retried on the same budget — the relaunch is a new attempt, a new job name.
            retry.append({"ErrorEquals": [errors.WAVE_INFRASTRUCTURE_FAILED, errors.WAVE_LOST],
                          "MaxAttempts": self.opt.max_infrastructure_recoveries,
                          "IntervalSeconds": self.opt.retry_interval_seconds, "BackoffRate": self.opt.retry_backoff})
        return task

    def with_catch(self, state: dict[str, Any], owner_asl: str, owner_spec: str) -> dict[str, Any]:
        cleanup = self.names.helper(owner_asl, "cleanup")
        payload = {**self.base_payload(owner_spec), "error.$": "$.error"}
        deadline = _deadline_of(state)
        if deadline:  # cleanup names the deadline a timed-out state ran past (Wave.TimedOut's message)
            payload["deadline"] = deadline
        task = _task(self.opt.cleanup_arn, payload, wait=False, model=CleanupTask)
        task["ResultSelector"] = {"Error.$": "$.Payload.error", "Cause.$": "$.Payload.cause"}
        task["ResultPath"] = "$.failure"
        task["Next"] = self.failed
        task["Comment"] = f"cancel every active job of '{owner_spec}' by exact id, then fail with the root cause"
        self.states[cleanup] = task
        state["Catch"] = [{"ErrorEquals": [errors.STATES_ALL], "ResultPath": "$.error", "Next": cleanup}]
        return state

    def end_state(self, owner_asl: str) -> str:
        if owner_asl not in self.ends:
            name = self.names.helper(owner_asl, "end")
            self.states[name] = {"Type": "Succeed", "Comment": "the run ends here without a terminal state"}
            self.ends[owner_asl] = name
        return self.ends[owner_asl]

    def goto(self, state: dict[str, Any], target: str | None) -> dict[str, Any]:
        if target is None:
            state["End"] = True
        else:
            state["Next"] = target
        return state

    def next_or_end(self, target: str | None, owner_asl: str) -> str:
        """A Choice needs a named target: the end of the run becomes `<owner>.end`."""
        return target if target is not None else self.end_state(owner_asl)

    def loop_max(self, name: str, st: State) -> int:
        assert st.loop is not None
        return resolve_bounded(st.loop.max, self.cfg, "loop.max", 1, 1)

    def decide(self, owner_asl: str, spec_state: str, target: str, purpose: str) -> str:
        name = self.names.helper(owner_asl, "decide")
        payload = {**self.base_payload(spec_state), "purpose": purpose, "current.$": "$.decision.value"}
        task = _task(self.opt.decide_arn, payload, wait=False, model=DecideTask)
        task["ResultSelector"] = {"value.$": "$.Payload.decision"}
        task["ResultPath"] = "$.decision"
        task["Next"] = target
        task["Comment"] = f"read and record the decision for '{spec_state}' ({purpose})"
        # A missing or malformed decision fails the run through cleanup, like a failed wave.
        self.states[name] = self.with_catch(task, name, spec_state)
        return name

    def transitions_choice(self, name_asl: str, st: State, default: str | None, cont: str | None) -> str:
        rules = []
        for t in st.transitions:
            if t.if_ is not None and not yaml_bool(self.cfg.get(t.if_.strip()[len("config."):])):
                continue  # `if` reads config, fixed when the machine is compiled
            target = self.emit(t.goto, cont, follow=True)
            if t.when is None:
                default = target
                break
            rules.append({"Variable": "$.decision.value", "StringEquals": _PREDICATE_VALUE[t.when], "Next": target})
        fallback = self.next_or_end(default, name_asl)
        if not rules:  # only unconditional or disabled edges: no Choice needed
            return fallback
        return self._add_helper(name_asl, "branch", {"Type": "Choice", "Choices": rules, "Default": fallback})

    def _add_helper(self, owner_asl: str, role: str, state: dict[str, Any]) -> str:
        name = self.names.helper(owner_asl, role)
        self.states[name] = state
        return name

    # -- the walk --------------------------------------------------------------------------
    def emit(self, spec_name: str, cont: str | None, *, follow: bool) -> str:
        """Compile `spec_name` visited with continuation `cont`; returns its entry state."""
        key = (spec_name, cont, follow)
        if key in self.memo:
            return self.memo[key]
        copy = self.copies.get(spec_name, 0) + 1
        self.copies[spec_name] = copy
        asl = self.names.state(spec_name, copy)
        st = self.spec.states[spec_name]
        entry = self._compile_state(spec_name, asl, st, cont, follow)
        self.memo[key] = entry
        return entry

    def _after_leaf(self, name: str, asl: str, st: State, cont: str | None, follow: bool) -> str | None:
        """Where a leaf goes after its work (None = end of the run)."""
        if st.terminal:
            return cont
        if follow and st.transitions:
            default = self.emit(st.next, cont, follow=True) if st.next else cont
            choice = self.transitions_choice(asl, st, default, cont)
            return self.decide(asl, name, choice, "transitions")
        if not follow and st.transitions:
            # Inside a sequence transitions are not followed, but the decision is read and recorded.
            return self.decide(asl, name, self.next_or_end(cont, asl), "transitions")
        if st.next:
            return self.emit(st.next, cont, follow=True)
        return cont

    def _compile_state(self, name: str, asl: str, st: State, cont: str | None, follow: bool) -> str:
        comment = f"spec state '{name}'" if asl != name else None
        if st.parallel:
            after = self.emit(st.next, cont, follow=True) if (st.next and not st.terminal) else cont
            state = self.map_state(name, asl, st)
            self.goto(state, after)
            self.with_catch(state, asl, name)
            if comment:
                state["Comment"] = comment
            self.states[asl] = state
            return self._with_trigger(name, asl, st, asl)
        if st.sequence:
            after = self.emit(st.next, cont, follow=True) if (st.next and not st.terminal) else cont
            if st.loop is None:
                first = self._sequence_body(name, st, after, asl)
                self.states[asl] = {"Type": "Pass", "Next": first, "Comment": comment or f"sequence '{name}'"}
                return asl
            return self._looped_sequence(name, asl, st, after)
        if st.loop is not None:
            return self._leaf_loop(name, asl, st, cont)
        after = self._after_leaf(name, asl, st, cont, follow)
        if st.has_command:
            state = self.wave_task(name, self.base_payload(name))
            self.goto(state, after)
            self.with_catch(state, asl, name)
        else:  # a router or an empty terminal: no work, only edges
            state = {"Type": "Succeed"} if after is None else {"Type": "Pass", "Next": after}
        if comment:
            state["Comment"] = comment
        self.states[asl] = state
        return self._with_trigger(name, asl, st, asl)

    def _with_trigger(self, name: str, asl: str, st: State, work: str) -> str:
        if st.trigger is None:
            return work
        trigger_asl = self.names.helper(asl, "trigger")
        task = _task(self.opt.trigger_arn, {**self.base_payload(name), "token.$": "$$.Task.Token"}, wait=True,
                     model=WaveTask)
        task["ResultPath"] = None
        task["Next"] = work
        self._trigger_deadline(task, [st], DEADLINE_PATH)
        task["Comment"] = f"wait for objects under the trigger prefix of '{name}'"
        self.states[trigger_asl] = self.with_catch(task, asl, name)
        return trigger_asl

    def trigger_bound(self, st: State) -> int:
        """How long a trigger may wait: `maxPolls` polls, each at least one watch interval apart (the watch
        pass polls a prefix once per tick, so `pollSeconds` below the interval cannot be honoured). 0 = unbounded."""
        assert st.trigger is not None
        polls = resolve_bounded(st.trigger.max_polls, self.cfg, "maxPolls", 0, 0)
        every = resolve_bounded(st.trigger.poll_seconds, self.cfg, "pollSeconds", 30, 1)
        return polls * max(every, self.opt.watch_interval_seconds)

    def _trigger_deadline(self, task: dict[str, Any], states: list[State], path: str) -> None:
        bounds = [self.trigger_bound(st) for st in states if st.trigger is not None]
        if bounds and all(b > 0 for b in bounds):
            bound = max(bounds)
            if not self.opt.deadline_from_input and self.opt.max_wait_seconds > 0:
                bound = min(bound, self.opt.max_wait_seconds)
            task["TimeoutSeconds"] = bound
        elif self.opt.deadline_from_input:
            task["TimeoutSecondsPath"] = path  # an unbounded poll waits as long as the run's deadline
        elif self.opt.max_wait_seconds > 0:
            task["TimeoutSeconds"] = self.opt.max_wait_seconds

    def _sequence_body(self, name: str, st: State, after: str | None, owner_asl: str) -> str:
        target = after
        for child in reversed(st.sequence):
            target = self.emit(child, target, follow=False)
        return self.next_or_end(target, owner_asl)

    def _loop_pass(self, key: str, *, reset: bool) -> dict[str, Any]:
        loops: dict[str, Any] = {}
        for other in self.loop_keys.values():
            if other == key:
                loops[f"{other}.$"] = f"States.MathAdd($.loops.{other}, 1)" if not reset else None
            else:
                loops[f"{other}.$"] = f"$.loops.{other}"
        if reset:
            loops.pop(f"{key}.$")
            loops[key] = 1
        return {
            "Type": "Pass",
            "Parameters": {"run.$": "$.run", "groups.$": "$.groups", "loops": loops, "decision": {"value": ""}},
        }

    def _looped_sequence(self, name: str, asl: str, st: State, after: str | None) -> str:
        assert st.loop is not None
        key = self.loop_keys[name]
        exit_to = self.next_or_end(after, asl)
        until = self._add_helper(asl, "until", {})
        writer = next((c for c in reversed(st.sequence) if self.spec.states[c].writes_decision), None)
        check = until
        if st.loop.until:
            check = self.decide(asl, writer or name, until, "loop")
        body = self._sequence_body(name, st, check, asl)
        rules = self._loop_exit_rules(name, st, key, exit_to)
        again = self._add_helper(asl, "next", {**self._loop_pass(key, reset=False), "Next": body,
                                               "Comment": f"next iteration of '{name}' (back edge)"})
        self.states[until] = {"Type": "Choice", "Choices": rules, "Default": again,
                              "Comment": f"leave '{name}' when {st.loop.until or 'the budget is spent'}"}
        start = {**self._loop_pass(key, reset=True), "Next": body,
                 "Comment": f"loop '{name}': iteration 1 of at most {self.loop_max(name, st)}"}
        self.states[asl] = start
        return asl

    def _loop_exit_rules(self, name: str, st: State, key: str, exit_to: str) -> list[dict[str, Any]]:
        """Leave the loop when the `until` predicate holds on the decision, or the budget is spent."""
        assert st.loop is not None
        rules: list[dict[str, Any]] = []
        if st.loop.until:
            rules.append({"Variable": "$.decision.value", "StringEquals": _PREDICATE_VALUE[st.loop.until],
                          "Next": exit_to})
        rules.append({"Variable": f"$.loops.{key}", "NumericGreaterThanEquals": self.loop_max(name, st),
                      "Next": exit_to})
        return rules

    def _leaf_loop(self, name: str, asl: str, st: State, cont: str | None) -> str:
        assert st.loop is not None
        key = self.loop_keys[name]
        # After the loop the contract follows transitions, then next — even for terminal states.
        if st.transitions:
            default = self.emit(st.next, cont, follow=True) if st.next else cont
            after = self.transitions_choice(asl, st, default, cont)
        else:
            after = self.emit(st.next, cont, follow=True) if st.next else cont
        exit_to = self.next_or_end(after, asl)
        until = self.names.helper(asl, "until")
        check = self.decide(asl, name, until, "loop") if (st.loop.until or st.writes_decision) else until
        work = self.wave_task(name, self.base_payload(name))
        work["Next"] = check
        self.with_catch(work, asl, name)
        self.states[asl] = work
        entry = self._with_trigger(name, asl, st, asl)
        rules = self._loop_exit_rules(name, st, key, exit_to)
        again = self._add_helper(asl, "next", {**self._loop_pass(key, reset=False), "Next": entry,
                                               "Comment": f"next iteration of '{name}' (back edge)"})
        self.states[until] = {"Type": "Choice", "Choices": rules, "Default": again}
        return self._add_helper(asl, "loop", {**self._loop_pass(key, reset=True), "Next": entry,
                                              "Comment": f"leaf loop '{name}': iteration 1"})

    def map_state(self, name: str, asl: str, st: State) -> dict[str, Any]:
        declared = resolve_bounded(st.max_concurrency, self.cfg, "maxConcurrency", len(st.parallel), 1)
        limit = concurrency_limit(declared, len(st.parallel), self.opt.max_concurrency_cap)
        member_asl = self.names.helper(asl, "member")
        member_payload = {"run_id.$": "$.run_id", "state.$": "$.member", "group": name, "loops.$": "$.loops",
                          "execution.$": "$$.Execution.Id"}
        member = self.wave_task(name, member_payload, path=MEMBER_DEADLINE_PATH)
        member["End"] = True
        # Each member's result is {}: the Map's result (every member's output, before ResultPath drops it)
        # stays far below the 256 KiB state limit at 10,000 members. Member outputs are in the ledger.
        member["OutputPath"] = None
        member["Comment"] = f"one member of '{name}' as its own job"
        processor_states: dict[str, Any] = {member_asl: member}
        start = member_asl
        if any(self.spec.states[m].trigger is not None for m in st.parallel):
            trig = self.names.helper(asl, "member.trigger")
            task = _task(self.opt.trigger_arn, {**member_payload, "token.$": "$$.Task.Token"}, wait=True,
                         model=WaveTask)
            task["ResultPath"] = None
            task["Next"] = member_asl
            self._trigger_deadline(task, [self.spec.states[m] for m in st.parallel], MEMBER_DEADLINE_PATH)
            processor_states[trig] = task
            start = trig
        distributed = limit > self.opt.inline_map_limit or len(st.parallel) > self.opt.inline_map_limit
        state: dict[str, Any] = {
            "Type": "Map",
            "MaxConcurrency": limit,
            "ItemSelector": check_payload(MapItem, {"member.$": "$$.Map.Item.Value", "run_id.$": "$.run.run_id",
                                                    "loops.$": "$.loops", "deadline.$": DEADLINE_PATH}),
            "ItemProcessor": {"StartAt": start, "States": processor_states},
            "ResultPath": None,
        }
        if distributed:
            self.distributed.append(name)
            if limit > DISTRIBUTED_MAX_CONCURRENCY:
                raise self.limit_error(f"states.{name}.maxConcurrency", f"resolves to {limit}, above the "
                                        f"{DISTRIBUTED_MAX_CONCURRENCY:,} child executions a Distributed Map runs "
                                        "at once", f"set maxConcurrency to {DISTRIBUTED_MAX_CONCURRENCY} or less")
            state["ItemProcessor"]["ProcessorConfig"] = {"Mode": "DISTRIBUTED", "ExecutionType": "STANDARD"}
            # Child executions are named `<machine>/<label>:<id>`: a short deterministic label (AWS: ≤ 40
            # characters, the state-name alphabet) keeps them predictable for IAM (infra grants on it).
            state["Label"] = self.group_keys[name]
            members_key = f"States.Format('runs/{{}}/groups/{self.group_keys[name]}.json', $.run.run_id)"
            state["ItemReader"] = {
                "Resource": "arn:aws:states:::s3:getObject",
                "ReaderConfig": {"InputType": "JSON"},
                "Parameters": {"Bucket.$": "$.run.bucket", "Key.$": members_key},
            }
            state["ToleratedFailureCount"] = 0
        else:
            state["ItemProcessor"]["ProcessorConfig"] = {"Mode": "INLINE"}
            state["ItemsPath"] = f"$.groups.{self.group_keys[name]}"
        return state

    def compile(self) -> dict[str, Any]:
        start = self.emit(self.spec.initial, None, follow=True)
        self.states[self.failed] = {
            "Type": "Fail", "ErrorPath": "$.failure.Error", "CausePath": "$.failure.Cause",
            "Comment": "the run failed; the cause names the first failing state",
        }
        return {
            "Comment": f"npa.workflow {self.spec.name} (compiled by npa-workflow)",
            "StartAt": start,
            "States": self.states,
        }


def compile_spec(loaded: LoadedSpec, options: CompileOptions | None = None) -> CompiledMachine:
    """Compile a validated spec. Config-dependent numbers (loop budgets, concurrency) are fixed here."""
    run_ctx, _ = resolve_config(loaded.spec.config, loaded.spec.name, "compile", loaded.spec.run)
    options = options or CompileOptions()
    compiler = _Compiler(loaded, options, run_ctx)
    with deep_walks(loaded.spec):  # both walks recurse along edges
        _check_history(loaded, options, run_ctx)
        definition = compiler.compile()
    _check_size(loaded, definition)
    return CompiledMachine(
        definition=definition,
        loop_keys=compiler.loop_keys,
        group_keys=compiler.group_keys,
        distributed_groups=compiler.distributed,
        asl_names={n: compiler.names.state(n) for n in loaded.spec.states},
        max_wait_seconds=compiler.opt.max_wait_seconds,
        heartbeat_seconds=compiler.opt.heartbeat_seconds,
    )


def _check_history(loaded: LoadedSpec, options: CompileOptions, run_ctx: RunContext) -> None:
    """Step Functions fails a Standard execution at 25,000 history events, and it cannot be redriven then."""
    problem = history_problem(loaded, options, run_ctx)
    if problem is not None:
        raise SpecError([problem])


def _check_size(loaded: LoadedSpec, definition: dict[str, Any]) -> None:
    size = deployed_definition_bytes(serialize_definition(definition))
    if size > MAX_DEFINITION_BYTES:
        raise SpecError.single(
            "states", f"compiles to a {size:,}-byte state machine definition (compact JSON, function ARNs in "
                      f"place), above Step Functions' limit of {MAX_DEFINITION_BYTES:,} bytes "
                      f"({len(loaded.spec.states):,} spec states)",
            "split the spec into specs that run one after the other (a group's size does not count: its members "
            "are data, not states)", file=getattr(loaded, "file", "") or "")


def execution_input(machine: CompiledMachine, loaded: LoadedSpec, *, run_id: str, bucket: str,
                    max_wait_seconds: int | None = None) -> dict[str, Any]:
    """The input every execution of `machine` starts with. Distributed groups read members from S3.

    `max_wait_seconds`: this run's per-wave deadline (run request `maxWaitSeconds`, `submit --max-wait-seconds`);
    None = the machine's compiled default. Wave Tasks read it as `$.run.deadline` (TimeoutSecondsPath)."""
    wait = machine.max_wait_seconds if max_wait_seconds is None else max_wait_seconds
    groups = {
        key: ([] if name in machine.distributed_groups else list(loaded.spec.states[name].parallel))
        for name, key in machine.group_keys.items()
    }
    return {
        "run": {"run_id": run_id, "bucket": bucket, "deadline": input_deadline(wait, machine.heartbeat_seconds)},
        "loops": dict.fromkeys(machine.loop_keys.values(), 0),
        "decision": {"value": ""},
        "groups": groups,
    }
