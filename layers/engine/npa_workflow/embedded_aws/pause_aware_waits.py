"""The embedded Step Functions does not count time the runtime was not running: a paused twin fails no Task.

moto's interpreter waits for a task token, a heartbeat and a state's `TimeoutSeconds` with `threading.Event.wait(
timeout)`, on the monotonic clock, which keeps counting while the process is stopped (SIGSTOP, a suspended laptop,
a debugger). The job does not stop with the runtime: a job that exited 0 within its deadline while the runtime was
frozen for a minute was failed on resume — its heartbeat wait timed out before the watch pass, frozen too, could
report it — and the error blamed the watch schedule. On AWS the watch and the timers do not freeze together; here
they do, so the twin's timers freeze with the process: a wait is cut into slices, and a slice that took much longer
than asked (the process was not running) gives its excess back to the deadline. A machine merely slow to wake a
thread gets the same grace, which only makes a timeout later, never earlier.

Seam: the `Event` of the two moto modules whose waits carry a deadline, replaced while active:
`eval.callback.callback` (task token, heartbeat, activity start: its `Event` name) and
`component.state.exec.execute_state` (`TimeoutSeconds`: its `threading` name, a copy of the module whose `Event`
is pause-aware).
"""

from __future__ import annotations

import contextlib
import threading
import time
import types
from collections.abc import Iterator

__all__ = ["PauseAwareEvent", "pause_aware_waits"]

SLICE_SECONDS = 0.5
# A slice this much longer than asked counts as a pause (scheduling delays on a busy machine stay below it).
PAUSE_SLACK_SECONDS = 1.0
_MODULES = (
    "moto.stepfunctions.parser.asl.eval.callback.callback",
    "moto.stepfunctions.parser.asl.component.state.exec.execute_state",
)


class PauseAwareEvent(threading.Event):
    """`threading.Event` whose `wait(timeout)` does not count the time the process was paused."""

    def wait(self, timeout: float | None = None) -> bool:
        if timeout is None:
            return super().wait()
        deadline = time.monotonic() + max(timeout, 0.0)
        while True:
            now = time.monotonic()
            remaining = deadline - now
            if remaining <= 0:
                return self.is_set()
            asked = min(remaining, SLICE_SECONDS)
            if super().wait(asked):
                return True
            took = time.monotonic() - now
            if took > asked + PAUSE_SLACK_SECONDS:
                deadline += took - asked  # the process was not running: that time is not the wait's


def _threading_with_pause_aware_events() -> types.ModuleType:
    """`threading` as a module that imports it sees it, but with `Event` pause-aware."""
    proxy = types.ModuleType("threading", threading.__doc__)
    proxy.__dict__.update(threading.__dict__)
    proxy.Event = PauseAwareEvent  # type: ignore[attr-defined]
    proxy.npa_pause_aware = True  # type: ignore[attr-defined]  # (what `patched_versions.replaced_attributes` lists)
    return proxy


@contextlib.contextmanager
def pause_aware_waits() -> Iterator[None]:
    import importlib

    swapped: list[tuple[types.ModuleType, str, object]] = []
    for name in _MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:  # another moto layout: its waits stay as they are
            continue
        if getattr(module, "Event", None) is threading.Event:  # `from threading import Event`
            swapped.append((module, "Event", module.Event))
            module.Event = PauseAwareEvent  # type: ignore[attr-defined]
        elif getattr(module, "threading", None) is threading:  # `import threading` … `threading.Event()`
            swapped.append((module, "threading", threading))
            module.threading = _threading_with_pause_aware_events()  # type: ignore[attr-defined]
    try:
        yield
    finally:
        for module, attribute, original in swapped:
            setattr(module, attribute, original)
