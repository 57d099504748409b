"""How fast the CLI answers: `--help`, `validate` of a one-state spec, and a loop over specs in one process.

Each figure is the median wall time of whole processes (interleaved rounds, so a machine that slows down
slows both sides alike), printed beside a baseline when one is given: another source tree of this
project, e.g. the revision before a change::

    mkdir -p /tmp/before && git archive <rev> layers/engine specs | tar -x -C /tmp/before
    .venv/bin/python bench/cli_startup.py --baseline /tmp/before

The loop figure validates and plans every example spec (with the tool catalog) `--loops` times in one
process: it shows what the catalog and the spec models cost per spec once the process is warm (the catalog
is parsed once per process). Targets: `--help` and `validate` ≤ 0.3 s on an idle machine; read the ratio
on a busy one. Each start-up figure is given twice: wall time, and the CPU time of the process (user +
system), which a busy machine inflates much less.

The processes may write Python's bytecode cache, as a user's do: an environment with
PYTHONDONTWRITEBYTECODE set would make every run compile each module of the tree from source (~80 ms
that no installed copy pays), so the variable is dropped for them.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ONE_STATE = """\
apiVersion: npa.workflow/v0.0.1
kind: Workflow
metadata: {name: one}
states:
  only: {run: {shell: echo hi}, terminal: true}
"""
LOOP = """\
import sys, time
from pathlib import Path
from npa_workflow.plan.planner import build_plan
from npa_workflow.spec.load import load_spec
specs, loops = sys.argv[1], int(sys.argv[2])
files = sorted(p for p in Path(specs).glob("*.yaml") if p.name != "tools.yaml")
start = time.perf_counter()
for _ in range(loops):
    for f in files:
        build_plan(load_spec(f, catalog=Path(specs) / "tools.yaml"))
print(f"{(time.perf_counter() - start) / (loops * len(files)) * 1000:.2f}")
"""


def cli(args: list[str]) -> list[str]:
    code = f"import sys; sys.argv = ['npa-workflow', *{args!r}]; from npa_workflow.cli.app import main; main()"
    return [sys.executable, "-c", code]


def tree_env(tree: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "PYTHONPATH": f"{tree / 'layers' / 'engine'}{os.pathsep}{tree}"}


def timed(command: list[str], tree: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of one process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, env=tree_env(tree), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def per_spec_ms(tree: Path, specs: Path, loops: int) -> float:
    env = tree_env(tree)
    done = subprocess.run([sys.executable, "-c", LOOP, str(specs), str(loops)], env=env, capture_output=True,
                          text=True, check=False)
    return float(done.stdout.strip() or "nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, help="another source tree of this project (the 'before')")
    parser.add_argument("--rounds", type=int, default=9, help="interleaved rounds per figure (default 9)")
    parser.add_argument("--loops", type=int, default=20, help="passes over the example specs in one process")
    args = parser.parse_args()
    trees = {"now": ROOT}
    if args.baseline is not None:
        trees = {"before": args.baseline.resolve(), "now": ROOT}
    with tempfile.TemporaryDirectory(prefix="npa-cli-bench-") as tmp:
        spec = Path(tmp) / "one.yaml"
        spec.write_text(ONE_STATE)
        figures = {"python -c pass (this machine's floor)": [sys.executable, "-c", "pass"],
                   "--help": cli(["--help"]), "validate one-state spec": cli(["validate", str(spec)])}
        rows: list[tuple[str, dict[str, float], str]] = []
        for label, command in figures.items():
            for tree in trees.values():
                timed(command, tree)  # warm the file cache
            walls: dict[str, list[float]] = {name: [] for name in trees}
            cpus: dict[str, list[float]] = {name: [] for name in trees}
            for _ in range(args.rounds):
                for name, tree in trees.items():
                    wall, cpu = timed(command, tree)
                    walls[name].append(wall)
                    cpus[name].append(cpu)
            rows.append((label, {n: statistics.median(s) for n, s in walls.items()}, "s"))
            rows.append(("  its CPU time", {n: statistics.median(s) for n, s in cpus.items()}, "s"))
        loop = {n: statistics.median(per_spec_ms(t, t / "specs", args.loops) for _ in range(3))
                for n, t in trees.items()}
        rows.append((f"validate + plan per spec, in-process ({args.loops} passes)", loop, "ms"))
    names = list(trees)
    print(f"{'figure':<52}" + "".join(f"{n:>12}" for n in names) + ("       ratio" if len(names) == 2 else ""))
    for label, values, unit in rows:
        cells = "".join(f"{values[n]:>10.3f} {unit:<1}" if unit == "s" else f"{values[n]:>9.2f} {unit}"
                        for n in names)
        ratio = f"{values['before'] / values['now']:>10.2f}x" if len(names) == 2 and values["now"] else ""
        print(f"{label:<52}{cells}{ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
