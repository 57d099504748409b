"""The graph as a Mermaid flowchart (GitHub, GitLab and most Markdown viewers render it).

Every label is quoted and escaped with Mermaid entity codes, ids come from `presentation.node_ids`
(`s_<name>`, never a keyword such as `end`), composites are subgraphs, and an edge that leaves a composite
starts at the subgraph, after all of its members.
"""

from __future__ import annotations

from npa_workflow.graph.model import Graph
from npa_workflow.graph.presentation import (
    START_ID,
    cluster_id,
    cluster_title,
    edge_label,
    fill,
    leaves_composite,
    node_ids,
    node_lines,
)

_ENTITIES = {"&": "#amp;", "#": "#35;", '"': "#quot;", "<": "#lt;", ">": "#gt;", "|": "#124;",
             "[": "#91;", "]": "#93;", "{": "#123;", "}": "#125;", "`": "#96;"}
_SHAPES = {"leaf": ('["', '"]'), "terminal": ('(["', '"])'), "router": ('{"', '"}'),
           "group": ('[["', '"]]'), "sequence": ('[/"', '"/]'), "loop": ('{{"', '"}}')}
_CLASS = {"SUCCEEDED": "succeeded", "FAILED": "failed", "RUNNING": "running", "CANCELLED": "cancelled"}


def escape(text: str) -> str:
    """Text safe inside a quoted Mermaid label: entity codes for the characters Mermaid parses; `#` first."""
    out = []
    for ch in text.replace("\r", ""):
        if ch == "\n":
            out.append(" ")
        elif ch in _ENTITIES:
            out.append(_ENTITIES[ch])
        elif ord(ch) < 32:
            out.append(" ")
        else:
            out.append(ch)
    return "".join(out)


def _label(lines: list[str]) -> str:
    return "<br>".join(escape(line) for line in lines)


def render_mermaid(graph: Graph) -> str:
    ids = node_ids(graph)
    coloured = graph.coloured
    out = ["flowchart TB"]
    out.append(f'  {START_ID}(("start"))')

    def emit_node(name: str, indent: str) -> None:
        node = graph.nodes[name]
        opening, closing = _SHAPES[node.kind]
        lines = node_lines(node, graph.statuses.get(name), coloured=coloured)
        out.append(f"{indent}{ids[name]}{opening}{_label(lines)}{closing}")

    def emit_container(name: str, indent: str, seen: frozenset[str]) -> None:
        node = graph.nodes[name]
        if not node.is_composite:
            emit_node(name, indent)
            return
        out.append(f'{indent}subgraph {cluster_id(ids[name])}["{escape(cluster_title(node))}"]')
        out.append(f"{indent}  direction TB")
        emit_node(name, indent + "  ")
        for child in graph.children(name):
            if child not in seen:
                emit_container(child, indent + "  ", seen | {child})
        out.append(f"{indent}end")

    for name in graph.top_level():
        emit_container(name, "  ", frozenset({name}))

    out.append(f"  {START_ID} --> {ids[graph.initial]}")
    for edge in graph.edges:
        src = cluster_id(ids[edge.src]) if leaves_composite(graph, edge) else ids[edge.src]
        dst = ids[edge.dst]
        label = edge_label(edge)
        dotted = edge.ignored or edge.kind in ("loop", "member")
        arrow = "-.->" if dotted else ("==>" if edge.kind == "transition" else "-->")
        out.append(f'  {src} {arrow}|"{escape(label)}"| {dst}' if label else f"  {src} {arrow} {dst}")

    if coloured:
        for status, cls in _CLASS.items():
            fill_colour, stroke = fill(status)
            out.append(f"  classDef {cls} fill:{fill_colour},stroke:{stroke},color:#000")
        fill_colour, stroke = fill(None)
        out.append(f"  classDef notreached fill:{fill_colour},stroke:{stroke},color:#000")
        members: dict[str, list[str]] = {}
        for name in graph.nodes:
            shown = graph.statuses.get(name)
            members.setdefault(_CLASS[shown] if shown else "notreached", []).append(ids[name])
        for cls, names in members.items():
            out.append(f"  class {','.join(names)} {cls}")
    return "\n".join(out) + "\n"

