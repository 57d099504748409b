"""`npa-workflow serve` after 1, 10 and 100 runs: its idle CPU and the CPU one run costs it.

A long-lived `serve` must not get slower with what it has stored. The bench starts `serve` on a fresh home with
one cheap deployed spec (two no-op steps, `true`), then submits runs through the inbox as `submit` does (a run
request uploaded under `inbox/`, with plain boto3: the bench's own cost is not the figure) and, after each run,
writes `--objects-per-run` objects into the engine bucket, as a pipeline's shards would. At each checkpoint N
(after N runs stored):

- `per-run cpu s`: the serve process's CPU (user + system, every thread; not the jobs', which are its children)
  from the upload of run N to the line serve prints for its end — runs before it go in batches, unmeasured;
- `idle %core`: the serve process's CPU over `--idle-seconds` of nothing to do, as a share of one core;
- `rss MiB`: the serve process's resident memory then (VmRSS), which says whether what a run leaves in memory
  (moto's execution histories, caches) grows with the runs.

`--root DIR` runs the serve of another checkout (its `layers/engine` and its root first on PYTHONPATH, this
venv's packages): the baseline, e.g. a `git worktree add /tmp/base main`. Figures of both side by side:

    .venv/bin/python bench/serve_idle.py --root /tmp/base --root .    [--checkpoints 1,10,100]

Targets (issue 21): idle ≤ 2 % of a core; per-run CPU flat within 10 % from 1 to 100 runs.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TICKS = os.sysconf("SC_CLK_TCK")
SPEC = """\
apiVersion: npa.workflow/v0.0.1
kind: Workflow
metadata: {name: bench-serve}
config: {bucket: "{{run.bucket}}"}
resources: {default: {cpus: 1, memory: 1Gi}}
initial: a
states:
  a: {toolRef: bench.noop, next: b}
  b: {toolRef: bench.noop, terminal: true}
"""
CATALOG = """\
apiVersion: npa.workflow.tools/v1
tools:
  bench.noop:
    description: Nothing, at once.
    argv: ["true"]
    image: python:3.11-slim
"""


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime (fields 14 and 15 of proc(5))


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024  # kB
    return float("nan")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Serve:
    def __init__(self, code_root: Path, work: Path) -> None:
        self.home = work / "home"
        folder = work / "specs"
        folder.mkdir(parents=True)
        (folder / "tools.yaml").write_text(CATALOG)
        (folder / "bench.yaml").write_text(SPEC)
        env = {**os.environ, "NPA_WORKFLOW_HOME": str(self.home),
               "PYTHONPATH": os.pathsep.join([str(code_root / "layers" / "engine"), str(code_root)])}
        env.pop("AWS_ENDPOINT_URL", None)
        self.out = work / "serve.out"
        self._log = open(self.out, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from npa_workflow.cli.app import main; main()", "serve", "--port",
             str(free_port()), "--catalog", str(folder / "tools.yaml")],
            env=env, stdout=self._log, stderr=subprocess.STDOUT, cwd=work)
        self.s3 = self._client(self._endpoint())
        self._read = 0
        self.ended: set[str] = set()

    def _endpoint(self) -> str:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"serve exited: {self.out.read_text()}")
            serve_json = self.home / "serve.json"
            if serve_json.is_file():
                return str(json.loads(serve_json.read_text())["endpoint"])
            time.sleep(0.2)
        raise SystemExit("serve wrote no serve.json within 120 s")

    @staticmethod
    def _client(endpoint: str):  # noqa: ANN205 - a boto3 client
        import boto3

        return boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="testing",
                            aws_secret_access_key="testing")  # noqa: S106 - moto's

    def submit(self, run_id: str, objects: int) -> None:
        body = f"apiVersion: npa.workflow.run/v1\nspec: bench-serve\nrunId: {run_id}\n"
        self.s3.put_object(Bucket="npa-workflow-local", Key=f"inbox/{run_id}.yaml", Body=body.encode())
        self.shards(run_id, objects)

    def shards(self, run_id: str, objects: int) -> None:
        for i in range(objects):  # a pipeline's shards
            self.s3.put_object(Bucket="npa-workflow-local", Key=f"data/{run_id}/shard-{i:04d}.json", Body=b"{}")

    def wait_ended(self, run_ids: set[str], timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        while not run_ids <= self.ended:
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise SystemExit(f"runs did not end: {sorted(run_ids - self.ended)}\n{self.out.read_text()[-3000:]}")
            with open(self.out) as out:
                out.seek(self._read)
                text = out.read()
            complete = text[:text.rfind("\n") + 1]
            self._read += len(complete.encode())
            for line in complete.splitlines():
                parts = line.split()
                if len(parts) >= 5 and parts[2] == "run" and parts[4].rstrip(":") in ("SUCCEEDED", "FAILED",
                                                                                     "ABORTED", "TIMED_OUT"):
                    if parts[4] != "SUCCEEDED":
                        raise SystemExit(f"run {parts[3]} did not succeed: {line}")
                    self.ended.add(parts[3].rstrip(":"))
            time.sleep(0.05)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


def measure(code_root: Path, checkpoints: list[int], objects: int, idle_seconds: float, batch: int) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="serve-idle-") as tmp:
        serve = Serve(code_root, Path(tmp))
        try:
            done = 0
            for n in checkpoints:
                while done < n - 1:  # the history, unmeasured
                    ids = {f"bench-{i}" for i in range(done + 1, min(n - 1, done + batch) + 1)}
                    for run_id in sorted(ids):
                        serve.submit(run_id, objects)
                    serve.wait_ended(ids)
                    done += len(ids)
                time.sleep(1.0)  # the previous runs' ends settle
                before = cpu_seconds(serve.proc.pid)
                serve.submit(f"bench-{n}", 0)
                serve.wait_ended({f"bench-{n}"})
                run_cpu = cpu_seconds(serve.proc.pid) - before
                serve.shards(f"bench-{n}", objects)  # its shards, as the others'
                done = n
                time.sleep(1.0)
                before, started = cpu_seconds(serve.proc.pid), time.monotonic()
                time.sleep(idle_seconds)
                idle = (cpu_seconds(serve.proc.pid) - before) / (time.monotonic() - started)
                stored = sum(1 for _ in (serve.home / "serve" / "aws" / "s3").iterdir())
                rss = rss_mib(serve.proc.pid)
                rows.append({"runs": n, "objects": stored, "run_cpu": run_cpu, "idle": idle, "rss": rss})
                print(f"  {code_root}: {n} runs, {stored} objects: run {run_cpu:.2f} s cpu, idle {100 * idle:.1f} "
                      f"% core, {rss:.0f} MiB resident", file=sys.stderr, flush=True)
        finally:
            serve.stop()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", action="append", type=Path, help="checkout whose serve runs (repeat: side by "
                                                                   "side; default this one)")
    parser.add_argument("--checkpoints", default="1,10,100")
    parser.add_argument("--objects-per-run", type=int, default=20)
    parser.add_argument("--idle-seconds", type=float, default=5.0)
    parser.add_argument("--batch", type=int, default=10, help="history runs submitted at once")
    args = parser.parse_args()
    roots = [r.resolve() for r in (args.root or [ROOT])]
    checkpoints = sorted({int(c) for c in args.checkpoints.split(",")})
    results = {root: measure(root, checkpoints, args.objects_per_run, args.idle_seconds, args.batch)
               for root in roots}
    print(f"{'checkout':<40} {'runs':>5} {'objects':>8} {'per-run cpu s':>14} {'idle %core':>11} {'rss MiB':>8}")
    for root, rows in results.items():
        for row in rows:
            print(f"{str(root)[-40:]:<40} {row['runs']:>5} {row['objects']:>8} {row['run_cpu']:>14.2f} "
                  f"{100 * row['idle']:>11.1f} {row['rss']:>8.0f}")
        first = rows[0]["run_cpu"]
        print(f"{'':<40} per-run cpu, last against first: {rows[-1]['run_cpu'] / first:.2f}x" if first else "")


if __name__ == "__main__":
    main()
