"""The graph in Graphviz DOT: composites are clusters, an edge leaving a composite starts at its cluster's
border (`compound=true`, `ltail`), loop back edges are dashed and labelled with their predicate and budget."""

from __future__ import annotations

from npa_workflow.graph.model import Edge, Graph
from npa_workflow.graph.presentation import (
    START_ID,
    cluster_id,
    cluster_title,
    edge_label,
    fill,
    leaves_composite,
    node_ids,
    node_lines,
    owned_anchor,
)

FONT = "Helvetica"
_SHAPES = {
    "leaf": 'shape=box, style="rounded,filled"',
    "terminal": 'shape=box, style="rounded,filled,bold", peripheries=2',
    "router": 'shape=diamond, style="filled"',
    "group": 'shape=box3d, style="filled"',
    "sequence": 'shape=folder, style="filled"',
    "loop": 'shape=hexagon, style="filled"',
}
_EDGE_STYLE = {
    "next": "",
    "transition": 'color="#37474f", penwidth=1.4',
    "loop": 'style=dashed, color="#6a1b9a", fontcolor="#6a1b9a", penwidth=1.4, constraint=false',
    "sequence": 'color="#555555"',
    "member": 'style=dotted, color="#555555", arrowhead=vee',
}


def quote(text: str) -> str:
    """A DOT double-quoted string. Backslashes are doubled so `\\N`, `\\G`… in names stay literal;
    newlines become `\\n` (centred line breaks)."""
    body = text.replace("\\", "\\\\").replace('"', '\\"').replace("\r", "")
    body = "".join(ch if ord(ch) >= 32 or ch == "\n" else " " for ch in body)
    return '"' + body.replace("\n", "\\n") + '"'


def _inside(graph: Graph, name: str, container: str) -> bool:
    seen: set[str] = set()
    cur = graph.nodes[name].container
    while cur and cur not in seen:
        if cur == container:
            return True
        seen.add(cur)
        cur = graph.nodes[cur].container
    return False


def _edge(graph: Graph, ids: dict[str, str], edge: Edge) -> str:
    attrs = []
    tail = ids[edge.src]
    if leaves_composite(graph, edge) and not _inside(graph, edge.dst, edge.src) and edge.dst != edge.src:
        anchor = owned_anchor(graph, edge.src)
        if anchor is not None:
            tail = ids[anchor]
            attrs.append(f"ltail={cluster_id(ids[edge.src])}")
    label = edge_label(edge)
    if label:
        attrs.append(f"label={quote(label)}")
    style = _EDGE_STYLE[edge.kind]
    if edge.ignored:
        style = 'style=dashed, color="#9e9e9e", fontcolor="#9e9e9e"'
    if style:
        attrs.append(style)
    return f"  {tail} -> {ids[edge.dst]}" + (f" [{', '.join(attrs)}]" if attrs else "") + ";"


def render_dot(graph: Graph) -> str:
    ids = node_ids(graph)
    title = graph.workflow
    if graph.coloured:
        title += f" (run {graph.run_status})" if graph.run_status else " (run status)"
    out = [
        f"digraph {quote(graph.workflow)} {{",
        f"  graph [rankdir=TB, compound=true, newrank=true, fontname={quote(FONT)}, label={quote(title)},"
        " labelloc=t, fontsize=16, nodesep=0.4, ranksep=0.45];",
        f'  node [fontname={quote(FONT)}, fontsize=11, fillcolor="#ffffff", color="#555555"];',
        f"  edge [fontname={quote(FONT)}, fontsize=10];",
        f'  {START_ID} [shape=circle, label="start", style=filled, fillcolor="#eeeeee", fontsize=9,'
        " width=0.5, fixedsize=true];",
    ]

    def emit_node(name: str, indent: str) -> None:
        node = graph.nodes[name]
        status = graph.statuses.get(name)
        attrs = [_SHAPES[node.kind], f"label={quote(chr(10).join(node_lines(node, status, coloured=graph.coloured)))}"]
        if graph.coloured:
            fill_colour, stroke = fill(status)
            attrs.append(f'fillcolor="{fill_colour}", color="{stroke}"')
            if status is not None:
                attrs.append("penwidth=1.6")
        out.append(f"{indent}{ids[name]} [{', '.join(attrs)}];")

    def emit(name: str, indent: str, seen: frozenset[str]) -> None:
        node = graph.nodes[name]
        if not node.is_composite:
            emit_node(name, indent)
            return
        out.append(f"{indent}subgraph {cluster_id(ids[name])} {{")
        style = "rounded,dashed" if node.kind == "group" else "rounded"
        colour = "#6a1b9a" if node.kind == "loop" else "#777777"
        out.append(f'{indent}  label={quote(cluster_title(node))}; style="{style}"; color="{colour}";'
                   f" fontsize=11; labeljust=l; margin=20;")
        emit_node(name, indent + "  ")
        for child in graph.children(name):
            if child not in seen:
                emit(child, indent + "  ", seen | {child})
        out.append(f"{indent}}}")

    for name in graph.top_level():
        emit(name, "  ", frozenset({name}))
    out.append(f"  {START_ID} -> {ids[graph.initial]};")
    out.extend(_edge(graph, ids, e) for e in graph.edges)
    out.append("}")
    return "\n".join(out) + "\n"
