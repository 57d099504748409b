"""Cycle finding for the reference graphs of a spec (config keys, `needs`, `next`/`goto`,
sequence/parallel containment). Iterative (graphlib), so long chains cannot hit Python's
recursion limit."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from graphlib import CycleError, TopologicalSorter


def find_cycle(edges: Mapping[str, Iterable[str]]) -> list[str] | None:
    """One cycle of `edges` (node -> successors) as `[a, b, ..., a]`, starting at the node that
    comes first in `edges`, or None when the graph is acyclic."""
    try:
        TopologicalSorter({node: list(targets) for node, targets in edges.items()}).prepare()
    except CycleError as exc:
        # graphlib reads our successors as predecessors, so its cycle runs backwards.
        ring = list(reversed(exc.args[1]))[:-1]
        position = {node: i for i, node in enumerate(edges)}
        start = min(range(len(ring)), key=lambda i: position.get(ring[i], len(position)))
        ring = ring[start:] + ring[:start]
        return ring + [ring[0]]
    return None
