"""moto's Step Functions interpreter says when an execution of this process ends, so the runtime need not ask.

The local runtime hosts the interpreter and must notice its execution's end (to report, reap, exit). Asking with
`DescribeExecution` after every watch pass cost a whole API round trip through moto per wake-up — about a tenth of
the process's CPU per wave of a no-op chain, on the same GIL as the wave's next launch. Every end of an execution
of moto 5.2.5's interpreter (success, failure, timeout, a stop) goes through one method once its status is set:
`BaseExecutionWorkerCommunication.terminated(self)`, called by the execution's worker thread after the program's
last state. :func:`execution_ends` calls `listener(execution_arn)` right after it, for as long as the block lives.

A hint, not the record: the runtime still reads the status with `DescribeExecution` (the API's answer is what it
reports), when told and on a slow safety schedule (an interpreter that raised never calls the seam).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["execution_ends"]

LOG = logging.getLogger(__name__)

Listener = Callable[[str], None]

_lock = threading.Lock()
_listeners: dict[int, Listener] = {}
_keys = itertools.count()
_original: Any = None


def _notify(execution_arn: str) -> None:
    with _lock:
        listeners = list(_listeners.values())
    for listener in listeners:
        try:
            listener(execution_arn)
        except Exception:  # noqa: BLE001 - a listener's trouble must not fail the interpreter's thread
            LOG.exception("execution end listener failed for %s", execution_arn)


def _install() -> None:
    global _original
    from moto.stepfunctions.parser.backend.execution import BaseExecutionWorkerCommunication

    _original = BaseExecutionWorkerCommunication.__dict__["terminated"]
    original = _original

    def terminated(self: Any) -> None:
        original(self)
        _notify(str(getattr(self.execution, "exec_arn", "")))

    BaseExecutionWorkerCommunication.terminated = terminated  # type: ignore[method-assign]


def _uninstall() -> None:
    global _original
    from moto.stepfunctions.parser.backend.execution import BaseExecutionWorkerCommunication

    BaseExecutionWorkerCommunication.terminated = _original  # type: ignore[method-assign]
    _original = None


@contextlib.contextmanager
def execution_ends(listener: Listener) -> Iterator[None]:
    """While active, `listener(execution_arn)` is called (on the interpreter's thread) when any execution of this
    process's moto ends, after its status is set."""
    key = next(_keys)
    with _lock:
        if not _listeners:
            _install()
        _listeners[key] = listener
    try:
        yield
    finally:
        with _lock:
            _listeners.pop(key, None)
            if not _listeners:
                _uninstall()
