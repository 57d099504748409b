"""What one wave costs in Step Functions terms, whatever its job's length (no poll loop inside an execution).

Runs a one-wave spec locally three times, its job sleeping 1 s, 30 s and 120 s (`--quick`: 1, 3 and 6 s),
and prints the execution's state transitions (billed: $0.025 per 1,000) and history events (limit 25,000)
from each run report. A `waitForTaskToken` wave must cost the same for every length: heartbeats add no
events and nothing polls inside the execution. Exits 1 if the figures differ.

    .venv/bin/python bench/wave_cost.py --quick
    .venv/bin/python bench/wave_cost.py            # about 2.5 minutes
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from npa_workflow.local.runtime import LocalRunOptions, run_local

PRICE_PER_TRANSITION = 0.025 / 1000
HISTORY_LIMIT = 25_000
SPEC = """\
apiVersion: npa.workflow/v0.0.1
kind: Workflow
metadata: {name: wave-cost}
config: {bucket: npa-workflow-bench, seconds: "1"}
initial: work
states:
  work:
    run: {argv: [sleep, "{{config.seconds}}"]}
    terminal: true
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="jobs of 1, 3 and 6 s instead of 1, 30 and 120 s")
    args = parser.parse_args(argv)
    lengths = (1, 3, 6) if args.quick else (1, 30, 120)
    rows = []
    with tempfile.TemporaryDirectory(prefix="npa-bench-") as tmp:
        spec = Path(tmp) / "wave-cost.yaml"
        spec.write_text(SPEC)
        for seconds in lengths:
            started = time.monotonic()
            report = run_local(LocalRunOptions(spec=spec, home=Path(tmp) / "home", variables={"seconds": str(seconds)},
                                               run_id=f"wave-cost-{seconds}s"))
            if report["status"] != "SUCCEEDED":
                print(f"{seconds} s job: run {report['status']}: {report['error']}", file=sys.stderr)
                return 1
            rows.append((seconds, report["state_transitions"], report["history_events"], time.monotonic() - started))
    print(f"{'job length':>10}  {'transitions':>11}  {'history events':>14}  {'cost per wave':>13}  {'run wall':>8}")
    for seconds, transitions, events, wall in rows:
        print(f"{seconds:>8} s  {transitions:>11}  {events:>14}  ${transitions * PRICE_PER_TRANSITION:>12.6f}  "
              f"{wall:>6.1f} s")
    same = len({(t, e) for _, t, e, _ in rows}) == 1
    per_wave = rows[0][2] - 2  # ExecutionStarted and ExecutionSucceeded belong to the execution
    print(f"equal for every length: {'yes' if same else 'NO'}; {per_wave} events per wave, so about "
          f"{HISTORY_LIMIT // max(per_wave, 1):,} sequential waves fit under the {HISTORY_LIMIT:,}-event history limit")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
