"""Import cost of each Lambda handler module with the SkyPilot executor, as a cold start pays it.

Each figure is the sum of the cumulative ``python -X importtime`` entries of the modules a fresh
interpreter is asked to import (everything they pull in — pydantic, Powertools, boto3 — counts),
with bytecode (a private ``PYTHONPYCACHEPREFIX`` warmed once) and the functions' environment
(``PYDANTIC_DISABLE_PLUGINS=__all__``, as infra/functions.py sets it). Per module, three columns:

* ``import``: the handler module alone — the Lambda init phase;
* ``+ executor``: the handler and the SkyPilot executor (``adapters.skypilot_executor``, with its REST
  client) — the figure the target applies to;
* ``cold path``: also what the first invocation imports — boto3 (the ledger's codecs and the clients
  are built on the first AWS call) and, for the functions that read a run's spec, the engine module
  with the spec stack. This is the whole import bill of a cold start.

Medians (and minimums, the least disturbed run) of RUNS fresh interpreters each.
Target: ``+ executor`` median ≤ 300 ms. Exit status 1 when a handler is over it.

    .venv/bin/python bench/handler_import.py
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile

EXECUTOR = "npa_workflow.adapters.skypilot_executor"
CLIENT = "npa_workflow.adapters.skypilot_api"
HANDLERS = ("launch", "decide", "trigger", "watch", "cleanup", "reap")
# What a handler's first invocation imports beyond its module (see functions/<name>/handler.py).
FIRST_CALL = {
    "launch": ("boto3", "npa_workflow.engine.launch"),
    "decide": ("boto3", "npa_workflow.engine.decide"),
    "trigger": ("boto3", "npa_workflow.engine.trigger"),
}
FIRST_CALL_DEFAULT = ("boto3",)
RUNS = 15
TARGET_MS = 300.0


def import_ms(modules: tuple[str, ...], env: dict[str, str]) -> float:
    """Milliseconds to import `modules` in that order in a fresh interpreter (a module another one
    already brought in costs nothing more)."""
    code = "; ".join(f"import {m}" for m in modules)
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code], env=env, capture_output=True, text=True, check=True
    )
    found: dict[str, int] = {}
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or line.count("|") != 2:
            continue
        _, cumulative, name = line[len("import time:") :].split("|")
        if name.strip() in modules and not name.startswith("  "):  # a top-level entry: one the -c asked for
            found[name.strip()] = int(cumulative)
    first = modules[0]
    if first not in found:
        raise RuntimeError(f"no importtime line for {first}:\n{proc.stderr[-2000:]}")
    return sum(found.values()) / 1000.0


def measure(cells: list[tuple[str, ...]], env: dict[str, str]) -> dict[tuple[str, ...], tuple[float, float]]:
    """(median, min) per cell. Rounds go over every cell in turn, so a slow spell of a shared machine
    lands on all of them alike instead of on whichever cell was being measured."""
    samples: dict[tuple[str, ...], list[float]] = {cell: [] for cell in cells}
    for cell in cells:
        import_ms(cell, env)  # warm the bytecode cache
    for _ in range(RUNS):
        for cell in cells:
            samples[cell].append(import_ms(cell, env))
    return {cell: (statistics.median(v), min(v)) for cell, v in samples.items()}


def columns(name: str) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    handler = f"functions.{name}.handler"
    return (handler,), (handler, EXECUTOR), (handler, EXECUTOR, *FIRST_CALL.get(name, FIRST_CALL_DEFAULT))


def main() -> int:
    over = []
    with tempfile.TemporaryDirectory(prefix="npa-pycache-") as cache:
        env = dict(os.environ, PYTHONPYCACHEPREFIX=cache, PYDANTIC_DISABLE_PLUGINS="__all__")
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        cells = [(CLIENT,), (EXECUTOR,), *(c for name in HANDLERS for c in columns(name))]
        figures = measure(cells, env)
    print(f"median (min) ms of {RUNS} fresh interpreters, bytecode")
    print(f"{'module':32} {'import':>15} {'+ executor':>15} {'cold path':>15}")
    for module in (CLIENT, EXECUTOR):
        median, low = figures[(module,)]
        print(f"{module.removeprefix('npa_workflow.'):32} {median:8.1f} ({low:4.0f})")
    for name in HANDLERS:
        row = [figures[c] for c in columns(name)]
        flag = "" if row[1][0] <= TARGET_MS else "  OVER TARGET"
        over += [name] if flag else []
        cells_text = " ".join(f"{median:8.1f} ({low:4.0f})" for median, low in row)
        print(f"{'functions.' + name + '.handler':32} {cells_text}{flag}")
    print(f"target: handler + executor ≤ {TARGET_MS:.0f} ms (median): {'OK' if not over else 'OVER'}")
    return 0 if not over else 1


if __name__ == "__main__":
    sys.exit(main())
