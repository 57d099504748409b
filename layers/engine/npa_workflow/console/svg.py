"""The spec's graph (`graph.model`, the model `npa-workflow graph` draws) as SVG for the run page.

Pure: a `Graph` in, SVG text out; no graphviz. A small layout of our own, enough for the shapes a spec has:

- the top-level states are placed in rows by rank (longest path from the initial state along the edges that go
  forward; an edge back to a state on the current path, a loop's back edge, is drawn but not ranked);
- a composite is a box holding its own members: a sequence or a loop stacks them top to bottom, a group lays them
  side by side (wrapping after `GROUP_ROW` members, so a 40-member group stays readable);
- edges run from the bottom of their source's box to the top of their target's; an edge that points up (a back
  edge) bends out to the right; a loop's back edge is the arc on its box's right side, labelled with its
  predicate and budget.

Every state is a `<g class="node st-STATUS kind-KIND" data-state=NAME>`: the page's script recolours a state by
changing that class when the run changes (`console.js`), and a loop's round counter is `data-round-of=NAME`.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

from npa_workflow.graph.model import Edge, Graph, Node
from npa_workflow.graph.presentation import node_lines

CHAR_W = 7.0  # px per character of the 12px sans-serif labels (a generous average, so text stays inside)
LINE_H = 16.0
PAD = 10.0
GAP_X = 28.0
GAP_Y = 46.0
TITLE_H = 2 * LINE_H + 8  # a composite's title: its name (and status) and its kind line
LOOP_TITLE_H = 3 * LINE_H + 8  # a loop's adds its round counter
GROUP_ROW = 8


@dataclass
class Box:
    x: float
    y: float
    w: float
    h: float

    @property
    def cx(self) -> float:
        return self.x + self.w / 2


def status_class(status: str | None) -> str:
    return f"st-{status}" if status else "st-none"


def _label_lines(node: Node) -> list[str]:
    """The lines `graph`'s renderers label a state with (its status is drawn apart, so the page can change it)."""
    return node_lines(node, None, coloured=False)


class _Layout:
    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.size: dict[str, tuple[float, float]] = {}
        self.boxes: dict[str, Box] = {}

    # -------------------------------------------------------------------------------- sizes
    def _leaf_size(self, node: Node) -> tuple[float, float]:
        lines = _label_lines(node) + ["not reached"]  # the status line
        if node.kind == "loop":
            lines.append("round 00 / 00")
        width = max(len(line) for line in lines) * CHAR_W + 2 * PAD
        return max(width, 90.0), len(lines) * LINE_H + PAD

    def _grid(self, name: str) -> list[list[str]]:
        node = self.graph.nodes[name]
        kids = self.graph.children(name)
        if node.kind == "group":
            return [kids[i:i + GROUP_ROW] for i in range(0, len(kids), GROUP_ROW)]
        return [[k] for k in kids]  # sequence / loop: one per row

    def measure(self, name: str, seen: frozenset[str] = frozenset()) -> tuple[float, float]:
        if name in self.size:
            return self.size[name]
        node = self.graph.nodes[name]
        if not self.graph.children(name) or name in seen:
            self.size[name] = self._leaf_size(node)
            return self.size[name]
        rows = self._grid(name)
        widths, heights = [], []
        for row in rows:
            sizes = [self.measure(k, seen | {name}) for k in row]
            widths.append(sum(w for w, _ in sizes) + GAP_X * (len(sizes) - 1))
            heights.append(max(h for _, h in sizes))
        title = max(len(_label_lines(node)[0]) + len(" not reached "), *(len(x) for x in _label_lines(node)[1:2]))
        width = max(max(widths), title * CHAR_W) + 2 * PAD + (40 if node.kind == "loop" else 0)
        height = _title_h(node) + sum(heights) + (GAP_Y * 0.6) * (len(rows) - 1) + 2 * PAD
        self.size[name] = (width, height)
        return self.size[name]

    # -------------------------------------------------------------------------------- positions
    def place(self, name: str, x: float, y: float, seen: frozenset[str] = frozenset()) -> None:
        w, h = self.measure(name)
        self.boxes[name] = Box(x, y, w, h)
        if not self.graph.children(name) or name in seen:
            return
        inner_w = w - 2 * PAD - (40 if self.graph.nodes[name].kind == "loop" else 0)
        cy = y + _title_h(self.graph.nodes[name]) + PAD
        for row in self._grid(name):
            sizes = [self.measure(k) for k in row]
            row_w = sum(s[0] for s in sizes) + GAP_X * (len(sizes) - 1)
            cx = x + PAD + (inner_w - row_w) / 2
            for kid, (kw, _) in zip(row, sizes, strict=True):
                self.place(kid, cx, cy, seen | {name})
                cx += kw + GAP_X
            cy += max(s[1] for s in sizes) + GAP_Y * 0.6

    def ranks(self) -> list[list[str]]:
        """Top-level states in rows: longest forward path from the initial state (back edges not ranked)."""
        top = self.graph.top_level()
        top_of: dict[str, str] = {}
        for name in self.graph.nodes:
            cur = name
            while self.graph.nodes[cur].container:
                cur = self.graph.nodes[cur].container
            top_of[name] = cur
        succ: dict[str, list[str]] = {n: [] for n in top}
        for e in self.graph.edges:
            a, b = top_of[e.src], top_of[e.dst]
            if e.kind in ("loop", "member", "sequence") or a == b or e.ignored:
                continue
            if b not in succ[a]:
                succ[a].append(b)
        back: set[tuple[str, str]] = set()
        state: dict[str, int] = {}

        def dfs(n: str) -> None:  # iterative enough for specs: depth is the number of top-level states
            state[n] = 1
            for m in succ[n]:
                if state.get(m) == 1:
                    back.add((n, m))
                elif m not in state:
                    dfs(m)
            state[n] = 2

        starts = [self.graph.initial] if self.graph.initial in succ else []
        for n in [*starts, *top]:
            if n not in state:
                dfs(n)
        rank: dict[str, int] = {n: 0 for n in top}
        order = [n for n in top]
        for _ in range(len(top)):  # relax: a DAG settles in at most len(top) passes
            changed = False
            for a in order:
                for b in succ[a]:
                    if (a, b) not in back and rank[b] < rank[a] + 1:
                        rank[b] = rank[a] + 1
                        changed = True
            if not changed:
                break
        rows: dict[int, list[str]] = {}
        for n in top:
            rows.setdefault(rank[n], []).append(n)
        return [rows[r] for r in sorted(rows)]

    def run(self) -> tuple[float, float]:
        rows = self.ranks()
        sizes = [[self.measure(n) for n in row] for row in rows]
        total_w = max((sum(w for w, _ in s) + GAP_X * (len(s) - 1) for s in sizes), default=100.0)
        y = PAD + 24  # room for the start marker
        for row, row_sizes in zip(rows, sizes, strict=True):
            row_w = sum(w for w, _ in row_sizes) + GAP_X * (len(row_sizes) - 1)
            x = PAD + 60 + (total_w - row_w) / 2
            for n, (w, _) in zip(row, row_sizes, strict=True):
                self.place(n, x, y)
                x += w + GAP_X
            y += max(h for _, h in row_sizes) + GAP_Y
        right = max((b.x + b.w for b in self.boxes.values()), default=total_w)
        return right + 280, y  # room on the right for back edges and a loop's label


def _title_h(node: Node) -> float:
    return LOOP_TITLE_H if node.kind == "loop" else TITLE_H


def _text(x: float, y: float, text: str, cls: str = "", extra: str = "") -> str:
    attrs = f' class="{cls}"' if cls else ""
    return f'<text x="{x:.1f}" y="{y:.1f}"{attrs}{extra}>{escape(text)}</text>'


def _edge_path(edge: Edge, a: Box, b: Box) -> tuple[str, float, float]:
    """(SVG path, label x, label y) of an edge from box a to box b."""
    if edge.kind == "loop":  # the back edge of a loop: an arc on the loop box's right side
        loop = b
        x = loop.x + loop.w - 12
        top, bottom = loop.y + LINE_H, loop.y + loop.h - 12
        return (f"M{a.x + a.w:.1f},{a.y + a.h / 2:.1f} C{x + 30:.1f},{bottom:.1f} {x + 30:.1f},{top:.1f} "
                f"{loop.x + loop.w - 2:.1f},{top:.1f}", x + 14, (top + bottom) / 2)
    x1, y1 = a.cx, a.y + a.h
    x2, y2 = b.cx, b.y
    if y2 > y1:  # forward: down; the label near the target, where sibling edges have spread apart
        mid = (y1 + y2) / 2
        return (f"M{x1:.1f},{y1:.1f} C{x1:.1f},{mid:.1f} {x2:.1f},{mid:.1f} {x2:.1f},{y2:.1f}",
                x1 + (x2 - x1) * 0.8, y1 + (y2 - y1) * 0.78)
    # back edge (upward): out of the source's right side, into the target's right side
    sx, sy = a.x + a.w, a.y + a.h / 2
    tx, ty = b.x + b.w, b.y + b.h / 2
    bend = max(sx, tx) + 50
    return f"M{sx:.1f},{sy:.1f} C{bend:.1f},{sy:.1f} {bend:.1f},{ty:.1f} {tx:.1f},{ty:.1f}", bend - 10, (sy + ty) / 2


def render_svg(graph: Graph, statuses: dict[str, str] | None = None, rounds: dict[str, str] | None = None) -> str:
    """The graph as an inline `<svg>`; `statuses`: state → SUCCEEDED|FAILED|RUNNING|CANCELLED (absent: not
    reached); `rounds`: loop → its counter text (`round 2 / 3`)."""
    statuses = statuses or {}
    rounds = rounds or {}
    layout = _Layout(graph)
    width, height = layout.run()
    boxes = layout.boxes
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="graph" viewBox="0 0 {width:.0f} {height:.0f}" '
             f'width="{width:.0f}" height="{height:.0f}" role="img" aria-label="graph of {escape(graph.workflow)}">',
             '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
             'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z"/></marker></defs>']

    def depth(name: str) -> int:
        d, cur = 0, graph.nodes[name]
        while cur.container:
            d, cur = d + 1, graph.nodes[cur.container]
        return d

    # Outer boxes first, so members are drawn over their container.
    for name in sorted(boxes, key=depth):
        node, box = graph.nodes[name], boxes[name]
        status = statuses.get(name)
        composite = bool(graph.children(name))
        classes = f"node {status_class(status)} kind-{node.kind}" + (" composite" if composite else "")
        parts.append(f'<g class="{classes}" data-state="{escape(name)}" id="node-{escape(name)}">')
        parts.append(f"<title>{escape(node.description or node.name)}</title>")
        rx = 4 if node.kind != "router" else 14
        parts.append(f'<rect x="{box.x:.1f}" y="{box.y:.1f}" width="{box.w:.1f}" height="{box.h:.1f}" rx="{rx}"/>')
        lines = _label_lines(node)
        ty = box.y + LINE_H
        if composite:
            lines = lines[:2]
        for i, line in enumerate(lines):
            parts.append(_text(box.x + PAD, ty, line, "name" if i == 0 else "detail"))
            ty += LINE_H
        status_text = status or "not reached"
        if composite:  # the status beside the name, in the title bar
            parts.append(_text(box.x + box.w - PAD, box.y + LINE_H, status_text, "status",
                               f' text-anchor="end" data-status-of="{escape(name)}"'))
            if node.kind == "loop":
                parts.append(_text(box.x + PAD, box.y + 3 * LINE_H, rounds.get(name, ""), "round",
                                   f' data-round-of="{escape(name)}"'))
        else:
            parts.append(_text(box.x + PAD, ty, status_text, "status", f' data-status-of="{escape(name)}"'))
            if node.kind == "loop":
                parts.append(_text(box.x + PAD, ty + LINE_H, rounds.get(name, ""), "round",
                                   f' data-round-of="{escape(name)}"'))
        parts.append("</g>")
    # The start marker, then the edges (members and sequence order are shown by containment and arrows).
    if graph.initial in boxes:
        first = boxes[graph.initial]
        parts.append(f'<circle class="start" cx="{first.cx:.1f}" cy="{PAD + 4:.1f}" r="6"/>')
        parts.append(f'<path class="edge" d="M{first.cx:.1f},{PAD + 10:.1f} L{first.cx:.1f},{first.y:.1f}" '
                     'marker-end="url(#arrow)"/>')
    # Edges between the same two states share one line and one label ("when loop_back / otherwise").
    drawn: dict[tuple[str, str, bool], list[Edge]] = {}
    for edge in graph.edges:
        if edge.kind == "member" or edge.src not in boxes or edge.dst not in boxes:
            continue
        if edge.kind == "sequence" and graph.nodes[edge.dst].container == edge.src:
            continue  # owner → its first member: the member sits inside the owner's box
        drawn.setdefault((edge.src, edge.dst, edge.kind == "loop"), []).append(edge)
    for (src, dst, _), edges in drawn.items():
        edge = edges[0]
        ignored = all(e.ignored for e in edges)
        path, lx, ly = _edge_path(edge, boxes[src], boxes[dst])
        cls = f"edge edge-{edge.kind}" + (" ignored" if ignored else "")
        parts.append(f'<path class="{cls}" d="{path}" marker-end="url(#arrow)"/>')
        labels = [f"{e.label} (ignored)" if e.ignored else e.label for e in edges
                  if e.kind != "sequence" and e.label not in ("", "next")]
        if labels:  # away from the edge's sibling: an edge bending left is labelled on its left
            a, b = boxes[src], boxes[dst]
            leftward = edge.kind != "loop" and b.cx < a.cx - 1 and b.y > a.y
            parts.append(_text(lx - 4 if leftward else lx + 4, ly, " / ".join(labels), "edge-label",
                               ' text-anchor="end"' if leftward else ""))
    parts.append("</svg>")
    return "\n".join(parts)
