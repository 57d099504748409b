"""How long the CDK app takes to synthesize, how much memory it needs, and how big the deployed code is.

Rows (each a fresh process and a fresh output directory; wall time and the peak resident memory of the whole
process tree — Python, the jsii Node runtime, the CLI — sampled every 20 ms):

  python app.py            plain `python infra/app.py`, bundling skipped, CDK validation off (the unit tests' mode)
  python app.py +validate  the same with aws-cdk-lib's built-in CloudFormation validation on (the default)
  cdk synth                the pinned CLI (`node_modules/.bin/cdk synth`), layer bundled locally by pip, validation on
  cdk synth (warm)         the same into the same output directory again (the bundled layer is reused)

Then the deployed size of one function: its code asset plus the engine layer, unzipped, against Lambda's 250 MB
limit (function code and all layers, unzipped), and the zipped sizes for reference.

    .venv/bin/python bench/synth.py                  # the table (needs PyPI for the layer, or a wheelhouse:)
    PIP_NO_INDEX=1 PIP_FIND_LINKS=build/wheelhouse/<dir> .venv/bin/python bench/synth.py
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
CDK = REPO_ROOT / "node_modules" / ".bin" / "cdk"
LAMBDA_UNZIPPED_LIMIT = 250 * 1024 * 1024
PAGE = os.sysconf("SC_PAGE_SIZE")


def _tree_rss(pid: int) -> int:
    """Resident bytes of `pid` and all its descendants (Linux /proc)."""
    total, stack = 0, [pid]
    while stack:
        current = stack.pop()
        try:
            with open(f"/proc/{current}/statm") as f:
                total += int(f.read().split()[1]) * PAGE
            for task in os.listdir(f"/proc/{current}/task"):
                with open(f"/proc/{current}/task/{task}/children") as f:
                    stack.extend(int(c) for c in f.read().split())
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
    return total


@dataclass
class Measurement:
    label: str
    seconds: float
    peak_bytes: int
    ok: bool
    note: str = ""


def measure(label: str, command: list[str], env: dict[str, str]) -> Measurement:
    start = time.perf_counter()
    proc = subprocess.Popen(command, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _tree_rss(proc.pid))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate()
    seconds = time.perf_counter() - start
    done.set()
    sampler.join()
    note = "" if proc.returncode == 0 else (err.strip().splitlines() or ["failed"])[-1][:100]
    return Measurement(label, seconds, peak, proc.returncode == 0, note)


def base_env() -> dict[str, str]:
    env = dict(os.environ)
    node_major = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()
    env.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", node_major.lstrip("v").split(".")[0])
    env.update(CDK_DISABLE_VERSION_CHECK="1", npm_config_update_notifier="false")
    return env


def asset_sizes(outdir: Path) -> tuple[int, int, int, int]:
    """(layer unzipped, function unzipped, layer zipped, function zipped) in bytes, from a CLI cloud assembly."""
    template = json.loads((outdir / "NpaWorkflow.template.json").read_text())
    paths: dict[str, str] = {}
    for resource in template["Resources"].values():
        if resource["Type"] in ("AWS::Lambda::LayerVersion", "AWS::Lambda::Function"):
            paths[resource["Type"]] = resource["Metadata"]["aws:asset:path"]

    def unzipped(path: Path) -> int:
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())

    def zipped(path: Path) -> int:
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            for p in sorted(path.rglob("*")):
                if p.is_file():
                    archive.write(p, p.relative_to(path))
        return buffer.tell()

    layer = outdir / paths["AWS::Lambda::LayerVersion"]
    function = outdir / paths["AWS::Lambda::Function"]
    return unzipped(layer), unzipped(function), zipped(layer), zipped(function)


def mb(n: int) -> str:
    return f"{n / 1024 / 1024:.1f}" if n >= 1024 * 1024 else f"{n / 1024 / 1024:.3f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--skip-cli", action="store_true", help="only the plain-Python rows")
    args = parser.parse_args(argv)
    python = sys.executable
    env = base_env()
    context = {"skypilotEndpoint": "https://skypilot.example.com"}
    rows: list[Measurement] = []
    with tempfile.TemporaryDirectory(prefix="npa-bench-synth-") as tmp:
        for label, validate in (("python app.py", False), ("python app.py +validate", True)):
            run_env = {
                **env,
                "CDK_OUTDIR": str(Path(tmp) / label.replace(" ", "_")),
                "CDK_CONTEXT_JSON": json.dumps({**context, "aws:cdk:bundling-stacks": []}),
                "CDK_VALIDATION": "true" if validate else "false",
            }
            rows.append(measure(label, [python, "infra/app.py"], run_env))
        outdir = Path(tmp) / "cli.out"
        sizes = None
        if not args.skip_cli and CDK.exists():
            endpoint = f"skypilotEndpoint={context['skypilotEndpoint']}"
            command = [str(CDK), "synth", "--quiet", "--output", str(outdir), "-c", endpoint]
            rows.append(measure("cdk synth", command, env))
            rows.append(measure("cdk synth (warm)", command, env))
            if rows[-2].ok:
                sizes = asset_sizes(outdir)

    print("| synth | wall s | peak MB (process tree) | ok |")
    print("| --- | ---: | ---: | --- |")
    for row in rows:
        status = "yes" if row.ok else f"no: {row.note}"
        print(f"| {row.label} | {row.seconds:.1f} | {mb(row.peak_bytes)} | {status} |")
    if sizes:
        layer, function, layer_zip, function_zip = sizes
        total = layer + function
        print()
        print("| deployed code (one function) | unzipped MB | zipped MB |")
        print("| --- | ---: | ---: |")
        print(f"| engine layer | {mb(layer)} | {mb(layer_zip)} |")
        print(f"| function code (functions/**/*.py) | {mb(function)} | {mb(function_zip)} |")
        share = 100 * total / LAMBDA_UNZIPPED_LIMIT
        print(f"| total vs Lambda's 250 MB unzipped limit | {mb(total)} ({share:.1f} %) | |")
    return 0 if all(r.ok for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
