"""How long the current invocation may still spend on outside calls: a deadline for this thread of work.

A Lambda is killed at its timeout, mid-call, with nothing recorded: a launch killed while the SkyPilot server
takes its job leaves the attempt LAUNCHING and the run failing on `Sandbox.Timedout`. The handler opens a
budget from `context.get_remaining_time_in_millis()`, less the longest single exchange the client can be in
when the budget runs out; a client that honours it (`adapters/skypilot_api.py`) stops retrying and answers
"unavailable" instead, which the launch records (infrastructure failure, or an unknown outcome reconciled by
name). No budget open: no limit (the CLI, tests).

A leaf beside the engine, not in it: the handlers open it, the engine's passes narrow it, and the adapters that
honour it read it without calling back into the engine that called them.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_deadline: ContextVar[float | None] = ContextVar("npa_workflow_budget_deadline", default=None)


@contextmanager
def within(seconds: float) -> Iterator[None]:
    """Calls inside may take `seconds` in all (a nested budget never extends the outer one)."""
    deadline = time.monotonic() + max(0.0, seconds)
    outer = _deadline.get()
    token = _deadline.set(deadline if outer is None else min(outer, deadline))
    try:
        yield
    finally:
        _deadline.reset(token)


def remaining() -> float | None:
    """Seconds left in the open budget, or None when none is open."""
    deadline = _deadline.get()
    return None if deadline is None else max(0.0, deadline - time.monotonic())
