"""The embedded stack's start-up without the cyclic garbage collector walking it again and again.

Starting the stack imports moto, botocore and the handlers and deploys the functions and the machine: about
400,000 objects that live as long as the stack. CPython's collector runs a full collection whenever enough new
objects have survived, and each full collection traverses every tracked object: on this machine 4-5 of them
during a `run`'s start-up, ~100-200 ms each, and more while the waves go — a fifth of a one-state run's wall
time. :func:`settled_heap` pauses automatic collection while the stack starts; its `settle()` then moves every
object alive into the permanent generation (`gc.freeze()`: later collections skip those objects, new garbage is
collected as before) and resumes collection. On exit the frozen objects are handed back to the collector
(`gc.unfreeze()`), and collection is left as it was found. Memory only: nothing that runs sees a difference.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Iterator

__all__ = ["settled_heap"]


@contextlib.contextmanager
def settled_heap() -> Iterator[Callable[[], None]]:
    was_enabled = gc.isenabled()
    gc.disable()
    settled = False

    def settle() -> None:
        nonlocal settled
        if not settled:
            settled = True
            gc.freeze()
            if was_enabled:
                gc.enable()

    try:
        yield settle
    finally:
        if settled:
            gc.unfreeze()
        if was_enabled:
            gc.enable()
