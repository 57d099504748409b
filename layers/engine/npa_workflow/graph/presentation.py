"""What both renderers share: deterministic ids, node labels, status colours, where edges are drawn from."""

from __future__ import annotations

import hashlib
import re

from npa_workflow.graph.model import Edge, Graph, Node

START_ID = "x_start"
FILL = {"SUCCEEDED": "#b7e1a1", "FAILED": "#f4a3a3", "RUNNING": "#a9c8f5", "CANCELLED": "#cfcfcf"}
STROKE = {"SUCCEEDED": "#2e7d32", "FAILED": "#c62828", "RUNNING": "#1565c0", "CANCELLED": "#616161"}
NOT_REACHED_FILL = "#ffffff"
NOT_REACHED_STROKE = "#555555"
_UNSAFE = re.compile(r"[^A-Za-z0-9_]")


def node_ids(graph: Graph) -> dict[str, str]:
    """State → an id that is safe in Mermaid and DOT, stable across runs.

    `s_` + the name with every character outside [A-Za-z0-9_] replaced by `_`; a name that needed a
    replacement also gets 8 hex digits of its SHA-256, so `a-b` and `a_b` stay apart.
    """
    ids: dict[str, str] = {}
    used: set[str] = {START_ID}
    for name in graph.nodes:
        clean = _UNSAFE.sub("_", name)
        base = f"s_{clean}" if clean == name else f"s_{clean}_{hashlib.sha256(name.encode()).hexdigest()[:8]}"
        candidate, n = base, 2
        while candidate in used:
            candidate = f"{base}_{n}"
            n += 1
        used.add(candidate)
        ids[name] = candidate
    return ids


def cluster_id(node_id: str) -> str:
    return "cluster_" + node_id[2:]


def kind_line(node: Node) -> str:
    if node.kind == "group":
        bound = f"maxConcurrency {node.max_concurrency}" if node.max_concurrency is not None else "unbounded"
        return f"parallel group, {bound}" + (" (distributed)" if node.distributed else "")
    if node.kind == "loop":
        what = "loop" if node.members else "leaf loop"
        until = f"until {node.loop_until}" if node.loop_until else "no until"
        return f"{what}: {until}, max {node.loop_max if node.loop_max is not None else '?'}"
    if node.kind == "sequence":
        return "sequence"
    if node.kind == "router":
        return "router (no job)"
    if node.kind == "terminal":
        return "terminal" if node.has_command else "terminal (no job)"
    return ""


def node_lines(node: Node, status: str | None, *, coloured: bool) -> list[str]:
    lines = [node.name]
    extra = kind_line(node)
    if extra:
        lines.append(extra)
    if node.trigger:
        lines.append(f"trigger: {node.trigger}")
    if node.writes_decision:
        lines.append("writes decision")
    if node.branches:
        lines.append("branches on its decision")
    if node.asl_name != node.name:
        lines.append(f"ASL: {node.asl_name}")
    if coloured:
        lines.append(status or "not reached")
    return lines


def cluster_title(node: Node) -> str:
    if node.kind == "group":
        return f"{node.name}: members"
    return f"{node.name}: {'loop body' if node.kind == 'loop' else 'sequence'}"


def fill(status: str | None) -> tuple[str, str]:
    if status is None:
        return NOT_REACHED_FILL, NOT_REACHED_STROKE
    return FILL[status], STROKE[status]


def owned_anchor(graph: Graph, name: str) -> str | None:
    """The node an edge leaving composite `name` is drawn from (the edge starts at the cluster's border): the
    last member it owns, a group's middle one, recursively through nested composites; None without one."""
    node, seen = graph.nodes[name], {name}
    anchor = None
    while node.members:
        owned = [m for m in node.members if m in graph.nodes and graph.nodes[m].container == node.name]
        pick = owned[len(owned) // 2] if owned and node.kind == "group" else (owned[-1] if owned else None)
        if pick is None or pick in seen:
            break
        anchor = pick
        seen.add(anchor)
        node = graph.nodes[anchor]
    return anchor


def leaves_composite(graph: Graph, edge: Edge) -> bool:
    """True for an edge that leaves a composite after all its work: its `next`, its transitions, the step to
    the next member of its own sequence, or the back edge of the loop it ends (not owner → member edges)."""
    node = graph.nodes[edge.src]
    if not node.is_composite or edge.dst == edge.src:
        return False
    if edge.kind in ("next", "transition", "loop"):
        return True
    return edge.kind == "sequence" and edge.dst not in node.members


def edge_label(edge: Edge) -> str:
    return f"{edge.label} (ignored)" if edge.ignored else edge.label
