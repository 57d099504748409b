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
    .venv/bin/python bench/local_overhead.py --baseline ../old-tree   # the same figures of another tree beside
    .venv/bin/python bench/local_overhead.py --baseline ../old-tree --repeat 5   # medians, runs alternating

Where the time goes and what was cut (this 2-core machine, shared; baseline = main at 7007cee, same session;
"CPU/wave" = the runtime process's CPU of a 25-wave chain less a 5-wave one, over 20 — steadier than wall time
on a loaded machine):

- moto's DynamoDB response serializer searched a dozen alias names per member of every `AttributeValue`: a
  20-item `Query` cost ~100 ms CPU. `embedded_aws.moto_speedups` writes wire-form attribute values directly (same
  JSON), parses each JSONPath once, and hands the validated ASL program to the first execution. CPU/wave
  389 -> 183 ms, wall/wave 778 -> 325 ms (load average ~9: two other helpers and a CI run).
- Every call of the process's own clients to moto went through a socket, an HTTP request written and parsed on
  both sides and a new server thread (~1.7 ms CPU a call, a dozen calls a wave): `embedded_aws.in_process_calls` hands
  them to the server's own WSGI app in place. The live display read every attempt of the run through moto twice
  a second: `local.run_waves` reads the durable record, only after a write. moto's interpreter made a boto3
  client per Lambda Task (~4 ms): kept per endpoint (`embedded_aws.moto_speedups`). Same run, load ~2-4:
  overhead per wave 281 -> 154 ms (N=20), CPU/wave 297 -> 119 ms.
- CPython's collector walked the ~400,000 objects of moto, botocore and the handlers at every full collection
  (4-5 during a start-up, ~100-200 ms each, more during the waves, and once more at exit): `embedded_aws.heap` pauses
  it while the stack starts and freezes the start-up heap; `run` freezes it again before the interpreter's exit
  collection. Each botocore session parsed the SDK's JSON models again (endpoints.json four times):
  `embedded_aws.sdk_models` shares them across loaders. Same run, load ~1-2: overhead per wave 214 -> 98 ms, setup
  2.88 -> 1.46 s; `npa-workflow run` of a one-state echo spec 4.05 -> 1.99 s wall (median of 5, A/B 0.49);
  `serve` ready (serve.json written) 3.74 -> 2.54 s (median of 3).
- An `UpdateExpression` parsed once per text; the waiting loop sleeps on inotify's notice of the jobs folder.
  Final, 3 paired runs at load ~2.5: overhead per wave 0.195-0.356 -> 0.086-0.093 s, median gap 0.171-0.280 ->
  0.080-0.083 s. What is left, and the floor of a wave's critical path: docs/local.md, "Third pass".
- Fourth pass (baseline d34613d, `--repeat 5`, medians): the run told of its execution's end instead of asking
  after every pass; moto speed-ups 6-11 (host lookup, condition tokens, partition queries, action names, update
  validation); exits read from inotify's names; jobs found through a name index; the next job's wrapper started
  ahead in its cgroup. Overhead per wave 0.066-0.080 -> 0.054-0.062 s (single runs down to 0.047 s); wall time
  per wave 0.095-0.126 -> 0.062-0.078 s. docs/local.md, "Fourth pass".
- Fifth pass (baseline c1d9ada, six `--repeat 5` sets): in-process calls skip Flask and the SigV4 signature moto
  never checks; an ended job's cgroup removed off the watch's path; moto speed-ups 12-15 (projections of names,
  update trees unpickled, walks decided per class, a condition parsed once per request); the watch woken by the
  ledger's record of an ended job; job documents emitted by libyaml; the wrapper started without `site`. Overhead
  per wave, six sets' medians 0.053-0.074 -> 0.040-0.057 s (ratio 0.75-0.87; all 30 runs: median 0.050 s); wall
  time per wave 0.061-0.085 -> 0.056-0.072 s. docs/local.md, "Fifth pass".
"""

from __future__ import annotations

import argparse
import json
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


def measure(n: int, tick: float) -> dict[str, float]:
    """One run of the chain in this process; the figures of the module doc, in seconds."""
    import resource

    with tempfile.TemporaryDirectory(prefix="npa-bench-") as tmp:
        spec = Path(tmp) / "overhead.yaml"
        spec.write_text(chain_spec(n))

        class Progress:
            execution_started = 0.0

            def started(self, *a: object) -> None:
                Progress.execution_started = time.time()

            def update(self, *a: object) -> None:
                pass

            def finished(self) -> None:
                pass

        t0 = time.time()
        report = LocalRuntime(LocalRunOptions(spec=spec, home=Path(tmp) / "home", tick_seconds=tick),
                              Progress()).run()
        ended = time.time()
    if report["status"] != "SUCCEEDED":
        raise SystemExit(f"run {report['status']}: {report['error']}")
    usage = resource.getrusage(resource.RUSAGE_SELF)
    waves = report["waves"]
    own = sum(ts(w["ended_at"]) - ts(w["started_at"]) for w in waves)
    wall = ts(waves[-1]["ended_at"]) - Progress.execution_started
    gaps = [ts(b["started_at"]) - ts(a["ended_at"]) for a, b in zip(waves, waves[1:], strict=False)]
    return {"setup": Progress.execution_started - t0, "wall": wall, "own": own,
            "per_wave": (wall - own) / len(waves), "gap_median": statistics.median(gaps), "gap_worst": max(gaps),
            "teardown": ended - ts(waves[-1]["ended_at"]), "cpu": usage.ru_utime + usage.ru_stime}


ROWS = [("setup", "setup (runtime start -> execution started)"),
        ("wall", "execution wall time (start -> last wave ended)"),
        ("own", "steps' own time (sum of started -> ended)"),
        ("per_wave", "overhead per wave"),
        ("gap_median", "gap wave end -> next wave start, median"),
        ("gap_worst", "gap wave end -> next wave start, worst"),
        ("teardown", "teardown (last wave ended -> report)"),
        ("cpu", "CPU of the runtime process (user+sys)")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=20, help="waves in the chain (default 20)")
    parser.add_argument("--tick", type=float, default=0.25, help="watch-pass tick in seconds (default 0.25)")
    parser.add_argument("--baseline", type=Path, help="a source tree to measure the same way, side by side "
                        "(e.g. a `git worktree` of an older commit)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each tree, alternating; the medians are "
                        "printed (a shared machine's load moves single runs by 10-20 %%)")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.json:
        print(json.dumps(measure(args.n, args.tick)))
        return 0
    import os
    import subprocess

    def run(root: Path | None) -> dict[str, float]:
        """One measurement in a fresh process (a run leaves moto's classes patched and its heap grown)."""
        env = dict(os.environ)
        if root is not None:
            env["PYTHONPATH"] = f"{root / 'layers' / 'engine'}{os.pathsep}{root}"
        done = subprocess.run([sys.executable, __file__, "-n", str(args.n), "--tick", str(args.tick), "--json"],
                              env=env, capture_output=True, text=True, check=True)
        return json.loads(done.stdout.strip().splitlines()[-1])

    baseline = args.baseline.resolve() if args.baseline else None
    mine: list[dict[str, float]] = []
    theirs: list[dict[str, float]] = []
    for _ in range(max(1, args.repeat)):
        mine.append(run(None))
        if baseline is not None:
            theirs.append(run(baseline))

    def median(runs: list[dict[str, float]]) -> dict[str, float]:
        return {key: statistics.median(r[key] for r in runs) for key, _ in ROWS}

    figures, base = median(mine), (median(theirs) if theirs else None)
    runs = f", median of {len(mine)} runs each" if len(mine) > 1 else ""
    print(f"waves: {args.n} no-op steps in a chain, watch tick {args.tick:.2f} s{runs}")
    print(f"{'':48} {'this tree':>10}" + (f" {'baseline':>10}" if base else ""))
    for key, label in ROWS:
        print(f"{label:48} {figures[key]:9.3f}s" + (f" {base[key]:9.3f}s" if base else ""))
    if len(mine) > 1:
        def each(runs: list[dict[str, float]]) -> str:
            return " ".join(f"{r['per_wave']:.3f}" for r in runs)

        print(f"overhead per wave, each run: {each(mine)}" + (f" | baseline: {each(theirs)}" if theirs else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
