"""Import cost of each Lambda handler module (with the SkyPilot executor) and of the SkyPilot
REST client alone, as a cold start pays it.

Runs ``python -X importtime -c "import <module>"`` in a fresh subprocess 5 times per module and
prints the median cumulative import time in ms (the module's own top-level entry; every
library it pulls in — pydantic, Powertools, boto3 — counts), twice:

* ``source``: with this shell's environment as is (with ``PYTHONDONTWRITEBYTECODE=1`` every
  module is compiled from source on each run);
* ``bytecode``: with ``.pyc`` files (a private ``PYTHONPYCACHEPREFIX`` warmed once), as in a
  Lambda layer that ships compiled files.

Target: ≤ 300 ms. Exit status 1 when the bytecode median is over the target.

    .venv/bin/python bench/handler_import.py
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile

MODULES = (
    "npa_workflow.adapters.skypilot_api",
    "npa_workflow.adapters.skypilot_executor",
    *(f"functions.{name}.handler" for name in ("launch", "decide", "trigger", "watch", "cleanup", "reap")),
)
RUNS = 5
TARGET_MS = 300.0


def import_ms(module: str, env: dict[str, str]) -> float:
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {module}"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    total_us = 0
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, name = line[len("import time:") :].split("|")
        if name.strip() == module:
            total_us = int(cumulative)
    if total_us == 0:
        raise RuntimeError(f"no importtime line for {module}:\n{proc.stderr[-2000:]}")
    return total_us / 1000.0


def measure(module: str, env: dict[str, str]) -> float:
    return statistics.median(import_ms(module, env) for _ in range(RUNS))


def main() -> int:
    source_env = dict(os.environ)
    over = []
    print(f"{'module':45} {'source ms':>10} {'bytecode ms':>12}")
    with tempfile.TemporaryDirectory(prefix="npa-pycache-") as cache:
        bytecode_env = dict(os.environ, PYTHONPYCACHEPREFIX=cache)
        bytecode_env.pop("PYTHONDONTWRITEBYTECODE", None)
        for module in MODULES:
            import_ms(module, bytecode_env)  # warm the cache
            source, bytecode = measure(module, source_env), measure(module, bytecode_env)
            flag = "" if bytecode <= TARGET_MS else "  OVER TARGET"
            over += [module] if flag else []
            print(f"{module:45} {source:10.1f} {bytecode:12.1f}{flag}")
    print(f"target ≤ {TARGET_MS:.0f} ms with bytecode (medians of {RUNS} runs): {'OK' if not over else 'OVER'}")
    return 0 if not over else 1


if __name__ == "__main__":
    sys.exit(main())
