"""What the local runtime costs per wave, beyond the steps' own time.

Runs a chain of N no-op waves (`true`: each step's own time is a process start) through the whole local
stack — moto's Step Functions interpreter, the in-process launch Lambda, the local executor, the watch pass
on its tick — and reports, from the run report's timestamps:

  setup         process start of the runtime → execution started (moto server, deploy, first machine parse)
  per wave      (execution wall time − sum of the steps' own run times) / N
  gap           a wave's end → the next wave's start (median and worst): detection by the watch pass,
                token completion, the next launch

    .venv/bin/python bench/local_overhead.py            # N = 20, tick 0.25 s
    .venv/bin/python bench/local_overhead.py -n 50 --tick 0.1
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from npa_workflow.local.runtime import LocalRunOptions, LocalRuntime


def chain_spec(n: int) -> str:
    lines = ["apiVersion: npa.workflow/v0.0.1", "kind: Workflow", "metadata: {name: overhead}",
             "config: {bucket: npa-workflow-bench}", "initial: w001", "states:"]
    for i in range(1, n + 1):
        lines.append(f"  w{i:03d}:")
        lines.append("    run: {argv: [\"true\"]}")
        lines.append(f"    next: w{i + 1:03d}" if i < n else "    terminal: true")
    return "\n".join(lines) + "\n"


def ts(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=20, help="waves in the chain (default 20)")
    parser.add_argument("--tick", type=float, default=0.25, help="watch-pass tick in seconds (default 0.25)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="npa-bench-") as tmp:
        spec = Path(tmp) / "overhead.yaml"
        spec.write_text(chain_spec(args.n))

        class Progress:
            execution_started = 0.0

            def started(self, *a: object) -> None:
                Progress.execution_started = time.time()

            def update(self, *a: object) -> None:
                pass

            def finished(self) -> None:
                pass

        t0 = time.time()
        report = LocalRuntime(LocalRunOptions(spec=spec, home=Path(tmp) / "home", tick_seconds=args.tick),
                              Progress()).run()
        ended = time.time()
    if report["status"] != "SUCCEEDED":
        print(f"run {report['status']}: {report['error']}", file=sys.stderr)
        return 1
    waves = report["waves"]
    own = sum(ts(w["ended_at"]) - ts(w["started_at"]) for w in waves)
    first_submit = Progress.execution_started
    wall = ts(waves[-1]["ended_at"]) - first_submit
    gaps = [ts(b["started_at"]) - ts(a["ended_at"]) for a, b in zip(waves, waves[1:], strict=False)]
    print(f"waves: {len(waves)} no-op steps in a chain, watch tick {args.tick:.2f} s")
    print(f"setup (runtime start -> execution started): {first_submit - t0:6.2f} s")
    print(f"execution wall time (start -> last wave ended): {wall:6.2f} s")
    print(f"steps' own time (sum of started -> ended):      {own:6.2f} s")
    print(f"overhead per wave: {(wall - own) / len(waves):6.3f} s")
    print(f"gap wave end -> next wave start: median {statistics.median(gaps):.3f} s, worst {max(gaps):.3f} s")
    print(f"teardown (last wave ended -> report): {ended - ts(waves[-1]['ended_at']):6.2f} s")
    print(f"state transitions {report['state_transitions']}, history events {report['history_events']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
