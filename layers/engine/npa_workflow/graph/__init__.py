"""The graph of a spec (states, groups, loops, branches) and its renderings: Mermaid, DOT, PNG."""

from npa_workflow.graph.dot import render_dot
from npa_workflow.graph.mermaid import render_mermaid
from npa_workflow.graph.model import Edge, Graph, Node, build_graph, statuses_from_report
from npa_workflow.graph.png import GraphvizError, render_png

__all__ = [
    "Edge",
    "Graph",
    "GraphvizError",
    "Node",
    "build_graph",
    "render_dot",
    "render_mermaid",
    "render_png",
    "statuses_from_report",
]
