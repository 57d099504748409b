"""The deadlines of the tests' waits: what the work needs on an idle machine, times how slow this one is now.

Every wait in the tests is on an event or a condition (a file written, a status reached, a process gone); what
is fixed is only how long it may take before the test says the event never came. That figure is written in a
test as what the work needs on the CI machine when idle (2 cores, nothing else running), and passed through
`deadline()`, which scales it by `factor()`:

- the machine's speed: the CPU time of a fixed piece of Python work, measured once per process, over what it
  took on the reference machine (`REFERENCE_CPU_SECONDS`); never below 1 (a faster machine keeps the figures);
- the load: the 1-minute load average per CPU this process may run on, read at each call (a suite beside
  another suite, or beside other engineers' builds, gets its share of the cores and no more); never below 1.

The product is the factor. `NPA_TEST_DEADLINE_FACTOR` overrides it (a number > 0; e.g. 1 to see how a test
behaves with the idle figures, or 20 on a machine known to be starved). The per-test timeout of pytest-timeout
(`timeout` in pyproject.toml and `pytest.mark.timeout`) is scaled by the same factor (tests/conftest.py), so a
slow machine gets a test's own message, not the plugin's stack dump.

A deadline only bounds a wait that ends at the event: scaling it never makes a passing test slower. A wait that
must NOT end early (a test that checks something did not happen) is not a deadline; such tests hold the moment
with an event instead (a file the job waits for, a handler held at its entry).
"""

from __future__ import annotations

import functools
import os
import time

ENV = "NPA_TEST_DEADLINE_FACTOR"
# CPU seconds of `_work()` on the reference machine (the 2-core CI kind, Python 3.11; 0.007-0.011 s measured).
REFERENCE_CPU_SECONDS = 0.008


def _work() -> float:
    started = time.process_time()
    total = 0
    for i in range(200_000):
        total += i * i
    return time.process_time() - started


@functools.cache
def machine_speed() -> float:
    """How many times slower than the reference machine this one runs Python (CPU time, not wall: load is
    counted separately), at least 1."""
    return max(1.0, min(_work() for _ in range(5)) / REFERENCE_CPU_SECONDS)


def _cpus() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def load_share() -> float:
    """The 1-minute load average per usable CPU, at least 1: how many runnable tasks share each core."""
    try:
        return max(1.0, os.getloadavg()[0] / _cpus())
    except OSError:
        return 1.0


def factor() -> float:
    """How many times longer than on the idle reference machine the work takes here, now."""
    override = os.environ.get(ENV, "").strip()
    if override:
        try:
            value = float(override)
        except ValueError:
            value = 0.0
        if not value > 0:
            raise ValueError(f"{ENV}={override!r}: give a number greater than 0 (e.g. 2), or unset it")
        return value
    return machine_speed() * load_share()


def deadline(seconds: float) -> float:
    """`seconds` (what the work needs on the idle reference machine) scaled to this machine, now."""
    return seconds * factor()
