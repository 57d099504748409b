"""Lambda handlers for tests/e2e/test_event_pump.py (run in-process by moto through embedded_aws.moto_lambda)."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

calls: Counter[str] = Counter()
events: list[dict[str, Any]] = []


def record(event: dict[str, Any], context: Any) -> dict[str, Any]:
    calls["record"] += 1
    events.append(event)
    return {"ok": True}


def always_fails(event: dict[str, Any], context: Any) -> dict[str, Any]:
    calls["always_fails"] += 1
    raise RuntimeError("broken on purpose")


def fails_once(event: dict[str, Any], context: Any) -> dict[str, Any]:
    calls["fails_once"] += 1
    if calls["fails_once"] == 1:
        raise RuntimeError("first delivery fails")
    return {"delivery": calls["fails_once"]}


def sleeps(event: dict[str, Any], context: Any) -> dict[str, Any]:
    time.sleep(float(event.get("seconds", 3)))
    return {"slept": True}
