"""Import cost of the SkyPilot REST client, as a Lambda handler pays it on a cold start.

Runs ``python -X importtime -c "import npa_workflow.adapters.skypilot_api"`` in a fresh
subprocess 5 times and prints the median cumulative import time in ms (the sum of the
top-level ``npa_workflow…`` entries), twice:

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

MODULE = "npa_workflow.adapters.skypilot_api"
RUNS = 5
TARGET_MS = 300.0


def import_ms(env: dict[str, str]) -> float:
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {MODULE}"],
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
        if name.startswith(" npa_workflow") and not name.startswith("  "):  # top-level entries only
            total_us += int(cumulative)
    if total_us == 0:
        raise RuntimeError(f"no importtime line for {MODULE}:\n{proc.stderr[-2000:]}")
    return total_us / 1000.0


def measure(env: dict[str, str]) -> tuple[float, list[float]]:
    samples = [import_ms(env) for _ in range(RUNS)]
    return statistics.median(samples), samples


def main() -> int:
    source_env = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="npa-pycache-") as cache:
        bytecode_env = dict(os.environ, PYTHONPYCACHEPREFIX=cache)
        bytecode_env.pop("PYTHONDONTWRITEBYTECODE", None)
        import_ms(bytecode_env)  # warm the cache
        results = {"source": measure(source_env), "bytecode": measure(bytecode_env)}
    for label, (median, samples) in results.items():
        runs = ", ".join(f"{s:.1f}" for s in samples)
        print(f"{MODULE} import ({label}): median {median:.1f} ms over {RUNS} runs [{runs}]")
    median = results["bytecode"][0]
    verdict = "OK" if median <= TARGET_MS else "OVER TARGET"
    print(f"target ≤ {TARGET_MS:.0f} ms (bytecode): {verdict}")
    return 0 if median <= TARGET_MS else 1


if __name__ == "__main__":
    sys.exit(main())
