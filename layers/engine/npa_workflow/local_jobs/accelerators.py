"""How many GPUs a step asks for locally: the count of its resource profile's `accelerators`.

The language's forms (spec/validate.py checks them): `TYPE:COUNT` (`H100:2`), a bare `TYPE` (one), or a
mapping `{TYPE: COUNT, …}`. SkyPilot reads a mapping of several types as candidates (any one of them will
do), so the local count is the smallest candidate's. SkyPilot's count is per node, and so is the local one:
each process of a `num_nodes` step gets it (`local_jobs.job_executor`, `local_jobs.gang`). The type is not matched
against the machine's devices.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["requested_gpus"]


def _count(value: Any) -> int:
    text = str(value).strip()
    return int(text) if text.isascii() and text.isdigit() else 1


def requested_gpus(resources_profile: Mapping[str, Any]) -> int:
    acc = resources_profile.get("accelerators")
    if isinstance(acc, str) and acc.strip():
        kind, sep, count = acc.strip().rpartition(":")
        return _count(count) if sep and kind else 1
    if isinstance(acc, Mapping) and acc:
        return min(_count(c) for c in acc.values())
    return 0
