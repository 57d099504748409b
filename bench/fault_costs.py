"""What the faults issue measured, measured again: each figure beside the one the issue reported.

- log tail of a failed job whose log has no newline (8 MB; 100 MB): issue 11.8 s; > 300 s (hung);
- the 598-byte YAML alias bomb through the inbox's reader: issue 131 s (serve frozen, 3.3 GB);
- `run --executor skypilot` preflight against an endpoint nobody listens on: issue 96.5 s to fail.

Run in a subprocess per figure with a hard cap (`--cap`, default 60 s) so a regression shows as "> cap"
instead of hanging the bench. `--baseline DIR` runs the same figures against another source tree (e.g.
`git archive <rev> layers/engine | tar -x -C DIR`); figures that tree cannot produce print "n/a".

    .venv/bin/python bench/fault_costs.py [--baseline /tmp/before]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ISSUE = {"tail_8mb": "11.8 s", "tail_100mb": "> 300 s", "yaml_bomb": "131 s", "skypilot_unreachable": "96.5 s"}

TAIL = """
import os, sys, tempfile, time
from pathlib import Path
from npa_workflow.local_jobs.executor import LocalExecutor
size = int(sys.argv[1])
ex = LocalExecutor(Path(tempfile.mkdtemp()) / "state")
log = ex.jobs_dir / "local-bench.log"
with open(log, "wb") as fh:
    fh.truncate(size)
    fh.seek(0, os.SEEK_END)
    fh.write(b"x" * 1000)
t = time.perf_counter(); ex.log_tail("local-bench", 20); print(time.perf_counter() - t)
"""
# The baseline's serve parsed with plain yaml.safe_load (minutes, gigabytes): a tree without the bounded
# inbox reader prints n/a rather than being made to expand the bomb on a shared machine.
BOMB = """
import time
from npa_workflow.engine.inbox import read_document
from npa_workflow.errors import SpecError
bomb = "a: &a [" + ",".join(["x"] * 10) + "]\\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 10) + "]\\n" for i in range(8))
t = time.perf_counter()
try:
    read_document(bomb.encode(), "s3://b/inbox/bomb.yaml")
except SpecError:
    pass
print(time.perf_counter() - t)
"""
SKY = """
import socket, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
t = time.perf_counter()
from npa_workflow.adapters.skypilot_preflight import PreflightFailed, preflight
try:
    preflight(f"http://127.0.0.1:{port}", {})
except PreflightFailed:
    pass
print(time.perf_counter() - t)
"""
FIGURES = {"tail_8mb": (TAIL, ["8000000"]), "tail_100mb": (TAIL, ["100000000"]), "yaml_bomb": (BOMB, []),
           "skypilot_unreachable": (SKY, [])}


def measure(tree: Path, code: str, args: list[str], cap: float) -> str:
    env = {**os.environ, "PYTHONPATH": f"{tree / 'layers' / 'engine'}{os.pathsep}{tree}"}
    try:
        out = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True,
                             timeout=cap)
    except subprocess.TimeoutExpired:
        return f"> {cap:.0f} s"
    if out.returncode != 0:
        return "n/a"
    return f"{float(out.stdout.strip().splitlines()[-1]):.3f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", type=Path)
    parser.add_argument("--cap", type=float, default=60.0)
    args = parser.parse_args()
    print(f"{'figure':24} {'issue':>10} {'baseline':>12} {'this tree':>12}")
    for name, (code, extra) in FIGURES.items():
        base = measure(args.baseline, code, extra, args.cap) if args.baseline else "-"
        print(f"{name:24} {ISSUE[name]:>10} {base:>12} {measure(ROOT, code, extra, args.cap):>12}")


if __name__ == "__main__":
    main()
