"""The graph of a spec: its states and edges, with the numbers the compiled machine runs with.

Pure: built from a validated spec and its compiled machine (no I/O). Renderers (`mermaid`,
`dot`) draw it; `statuses_from_report` colours it from a run report.

- nodes: every spec state, with a kind (`leaf`, `router`, `sequence`, `loop`, `group`,
  `terminal`), its ASL name, a group's bound (the Map's `MaxConcurrency`), a loop's budget and
  `until` predicate, a trigger, its ordered members (sequence or group) and its container;
- edges: `next`, `transition` (with its `when` / `if`), `loop` (the back edge of a loop, labelled
  `until <predicate>, max <budget>`), `sequence` (the order of a sequence's members: owner → first,
  then member → member) and `member` (a group → each member). An edge the engine never follows
  (a group's transitions, a group member's own `next`, a terminal's edges) has `ignored` set.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from npa_workflow.compile.asl import CompiledMachine
from npa_workflow.spec.ints import IntFieldError, resolve_bounded
from npa_workflow.spec.model import State
from npa_workflow.spec.validate import LoadedSpec

KINDS = ("leaf", "router", "sequence", "loop", "group", "terminal")
STATUSES = ("SUCCEEDED", "FAILED", "RUNNING", "CANCELLED")
_REPORT_STATUS = {"SUCCEEDED": "SUCCEEDED", "FAILED": "FAILED", "TIMED_OUT": "FAILED", "RUNNING": "RUNNING",
                  "PENDING": "RUNNING", "CANCELLED": "CANCELLED", "ABORTED": "CANCELLED"}
_PRIORITY = ("RUNNING", "FAILED", "CANCELLED", "SUCCEEDED")  # a state's status when its waves disagree


@dataclass(frozen=True)
class Node:
    name: str
    kind: str
    asl_name: str
    description: str = ""
    members: tuple[str, ...] = ()  # a sequence's children in order, or a group's members
    container: str = ""  # the sequence or group that holds this state (the first one that lists it)
    max_concurrency: int | None = None  # groups: the Map's MaxConcurrency as compiled
    distributed: bool = False  # groups: a Distributed Map (above the inline limit)
    loop_max: int | None = None
    loop_until: str = ""
    trigger: str = ""  # the trigger's summary, "" without one
    writes_decision: bool = False
    has_command: bool = False
    branches: bool = False  # picks its next state from its decision (followed transitions)

    @property
    def is_composite(self) -> bool:
        return bool(self.members)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name, "kind": self.kind, "asl_name": self.asl_name, "description": self.description,
            "members": list(self.members), "container": self.container or None,
            "max_concurrency": self.max_concurrency, "distributed": self.distributed,
            "loop": None if self.loop_max is None else {"max": self.loop_max, "until": self.loop_until or None},
            "trigger": self.trigger or None, "writes_decision": self.writes_decision,
            "has_command": self.has_command, "branches": self.branches,
        }


@dataclass(frozen=True)
class Edge:
    src: str
    dst: str
    kind: str  # next | transition | loop | sequence | member
    label: str = ""
    when: str | None = None
    ignored: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"src": self.src, "dst": self.dst, "kind": self.kind, "label": self.label, "when": self.when,
                "ignored": self.ignored}


@dataclass(frozen=True)
class Graph:
    workflow: str
    initial: str
    nodes: dict[str, Node]  # in spec order
    edges: list[Edge]
    statuses: dict[str, str] = field(default_factory=dict)  # state → SUCCEEDED | FAILED | RUNNING | CANCELLED
    coloured: bool = False  # statuses come from a run: states absent from them were not reached
    run_status: str = ""  # the run's own status, when coloured from a report that has one

    def children(self, container: str) -> list[str]:
        """States drawn inside `container` (its members that it owns), in member order."""
        node = self.nodes[container]
        return [m for m in node.members if m in self.nodes and self.nodes[m].container == container]

    def top_level(self) -> list[str]:
        return [n for n, node in self.nodes.items() if not node.container]

    def exit_anchor(self, name: str) -> str:
        """The state an edge leaving `name` is drawn from: a sequence's last member (recursively)."""
        seen = {name}
        node = self.nodes[name]
        while node.kind in ("sequence", "loop") and node.members and node.members[-1] in self.nodes:
            last = node.members[-1]
            if last in seen:
                break
            seen.add(last)
            node = self.nodes[last]
        return node.name

    def with_statuses(self, statuses: Mapping[str, str], run_status: str = "") -> Graph:
        return Graph(self.workflow, self.initial, self.nodes, self.edges,
                     {k: v for k, v in statuses.items() if k in self.nodes}, coloured=True, run_status=run_status)

    def to_json(self) -> dict[str, Any]:
        return {
            "workflow": self.workflow,
            "initial": self.initial,
            "nodes": [n.to_json() for n in self.nodes.values()],
            "edges": [e.to_json() for e in self.edges],
            "statuses": dict(self.statuses) if self.coloured else None,
        }


def node_kind(st: State) -> str:
    if st.parallel:
        return "group"
    if st.loop is not None:
        return "loop"
    if st.sequence:
        return "sequence"
    if st.terminal:
        return "terminal"
    if not st.has_command:
        return "router"
    return "leaf"


def loop_label(until: str, budget: int | None) -> str:
    bound = f"max {budget}" if budget is not None else "max ?"
    return f"until {until}, {bound}" if until else f"repeat, {bound}"


def _all_states(states: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for name, state in states.items():
        out[name] = state
        if state.get("Type") == "Map":
            out.update(_all_states(state.get("ItemProcessor", {}).get("States", {})))
    return out


def _compiled_loop_budgets(machine: CompiledMachine) -> dict[str, int]:
    """Loop key → the budget its `until` Choice compares the counter with."""
    budgets: dict[str, int] = {}
    for state in _all_states(machine.definition.get("States", {})).values():
        for rule in state.get("Choices", []) if state.get("Type") == "Choice" else []:
            variable = str(rule.get("Variable", ""))
            if variable.startswith("$.loops.") and "NumericGreaterThanEquals" in rule:
                budgets.setdefault(variable[len("$.loops."):], int(rule["NumericGreaterThanEquals"]))
    return budgets


def _compiled_map(machine: CompiledMachine, group_key: str) -> dict[str, Any] | None:
    for state in _all_states(machine.definition.get("States", {})).values():
        if state.get("Type") != "Map":
            continue
        key = state.get("ItemReader", {}).get("Parameters", {}).get("Key.$", "")
        if state.get("ItemsPath") == f"$.groups.{group_key}" or f"/groups/{group_key}.json" in key:
            return state
    return None


def _trigger_summary(st: State, config: Mapping[str, Any]) -> str:
    if st.trigger is None:
        return ""
    try:
        objects = resolve_bounded(st.trigger.min_objects, config, "minObjects", 1, 1)
    except IntFieldError:
        objects = 1
    return f"waits for {objects} object{'s' if objects != 1 else ''}"


def _containers(loaded: LoadedSpec) -> dict[str, str]:
    """State → the first sequence or group (in spec order) that lists it; never a cycle."""
    states = loaded.spec.states
    owner: dict[str, str] = {}
    for name, st in states.items():
        for member in (st.parallel or st.sequence):
            if member in states and member != name and member not in owner:
                owner[member] = name
    for name in list(owner):  # break ownership cycles (validation forbids them; be safe anyway)
        seen, cur = {name}, owner.get(name)
        while cur is not None:
            if cur in seen:
                owner.pop(name, None)
                break
            seen.add(cur)
            cur = owner.get(cur)
    return owner


def build_graph(loaded: LoadedSpec, machine: CompiledMachine) -> Graph:
    spec = loaded.spec
    config = spec.config
    owner = _containers(loaded)
    budgets = _compiled_loop_budgets(machine)
    group_members = {m for st in spec.states.values() for m in st.parallel}
    nodes: dict[str, Node] = {}
    edges: list[Edge] = []
    for name, st in spec.states.items():
        kind = node_kind(st)
        max_concurrency = None
        if st.parallel:
            compiled = _compiled_map(machine, machine.group_keys.get(name, ""))
            if compiled is not None:
                max_concurrency = int(compiled.get("MaxConcurrency", 0))
            else:
                try:
                    max_concurrency = resolve_bounded(st.max_concurrency, config, "maxConcurrency",
                                                      len(st.parallel), 1)
                except IntFieldError:
                    max_concurrency = len(st.parallel)
        loop_max = None
        if st.loop is not None:
            loop_max = budgets.get(machine.loop_keys.get(name, ""))
            if loop_max is None:
                try:
                    loop_max = resolve_bounded(st.loop.max, config, "loop.max", 1, 1)
                except IntFieldError:
                    loop_max = None
        nodes[name] = Node(
            name=name, kind=kind, asl_name=machine.asl_names.get(name, name),
            description=st.description.strip(), members=tuple(st.parallel or st.sequence),
            container=owner.get(name, ""), max_concurrency=max_concurrency,
            distributed=name in machine.distributed_groups, loop_max=loop_max,
            loop_until=(st.loop.until or "") if st.loop is not None else "",
            trigger=_trigger_summary(st, config), writes_decision=st.writes_decision, has_command=st.has_command,
            branches=bool(st.transitions) and not (st.parallel or st.sequence or name in group_members)
            and not (st.terminal and st.loop is None),
        )
        # Edges the engine never follows: a terminal's (a leaf loop still follows its edges after the loop),
        # a group's or sequence's transitions, a group member's own next and transitions.
        terminal_ignored = st.terminal and st.loop is None
        member_ignored = name in group_members
        if st.parallel:
            edges.extend(Edge(name, m, "member") for m in st.parallel)
        if st.sequence:
            chain = [name, *st.sequence]
            edges.extend(Edge(a, b, "sequence") for a, b in zip(chain, chain[1:], strict=False))
        if st.loop is not None:
            src = st.sequence[-1] if st.sequence else name
            edges.append(Edge(src, name, "loop", loop_label(st.loop.until or "", loop_max), when=st.loop.until))
        for t in st.transitions:
            if not t.goto:
                continue
            label = f"when {t.when}" if t.when else "always"
            if t.if_:
                label += f" if {t.if_.strip()}"
            ignored = terminal_ignored or member_ignored or bool(st.parallel or st.sequence)
            edges.append(Edge(name, t.goto, "transition", label, when=t.when, ignored=ignored))
        if st.next:
            label = "otherwise" if st.transitions and not (st.parallel or st.sequence) else "next"
            edges.append(Edge(name, st.next, "next", label, ignored=terminal_ignored or member_ignored))
    edges = [e for e in edges if e.src in nodes and e.dst in nodes]
    return Graph(workflow=spec.name, initial=spec.initial, nodes=nodes, edges=edges)


# -- colouring from a run report -----------------------------------------------------------------


def _combine(statuses: list[str]) -> str:
    return next(s for s in _PRIORITY if s in statuses)


def statuses_from_report(graph: Graph, report: Mapping[str, Any]) -> dict[str, str]:
    """State → status from a `npa-workflow run --json` report.

    A state's status is that of its latest attempt per wave (state, group, iteration); when its waves
    disagree RUNNING wins, then FAILED, CANCELLED, SUCCEEDED. A router (no job) that recorded a decision
    succeeded. The report's `error.state` failed. Groups and sequences take their members' statuses: all
    succeeded → SUCCEEDED; some not reached without a failure → RUNNING while the run runs, else CANCELLED.
    States without any of these were not reached (absent from the result).
    """
    latest: dict[tuple[Any, ...], tuple[int, str]] = {}
    for wave in report.get("waves") or []:
        if not isinstance(wave, Mapping) or wave.get("state") not in graph.nodes:
            continue
        key = (wave["state"], wave.get("group"), wave.get("iteration"))
        given = wave.get("attempt")
        attempt = given if isinstance(given, int) else 0
        status = _REPORT_STATUS.get(str(wave.get("status", "")).upper(), "RUNNING")
        if key not in latest or attempt >= latest[key][0]:
            latest[key] = (attempt, status)
    per_state: dict[str, list[str]] = {}
    for (state, _, _), (_, status) in latest.items():
        per_state.setdefault(state, []).append(status)
    result = {state: _combine(values) for state, values in per_state.items()}
    for decision in report.get("decisions") or []:
        state = decision.get("state") if isinstance(decision, Mapping) else None
        if state in graph.nodes and state not in result:
            result[state] = "SUCCEEDED"
    error = report.get("error")
    failed = error.get("state") if isinstance(error, Mapping) else None
    if failed in graph.nodes:
        result[failed] = "FAILED"
    run_status = str(report.get("status") or "RUNNING").upper()
    partial = "RUNNING" if run_status == "RUNNING" else "CANCELLED"

    def composite(name: str, seen: frozenset[str]) -> str | None:
        node = graph.nodes[name]
        if name in result and not node.is_composite:
            return result[name]
        values = []
        for member in node.members:
            if member in graph.nodes and member not in seen:
                values.append(composite(member, seen | {member}))
        if name in result:  # e.g. the error named the group itself
            values.append(result[name])
        reached = [v for v in values if v is not None]
        if not reached:
            return None
        if len(reached) == len(values) or any(v in ("RUNNING", "FAILED") for v in reached):
            return _combine(reached)
        return _combine([*reached, partial])

    for name, node in graph.nodes.items():
        if node.is_composite:
            reached = composite(name, frozenset({name}))
            if reached is not None:
                result[name] = reached
    return result

