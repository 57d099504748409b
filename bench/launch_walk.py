"""What one launch costs on its way from the Task payload to the SkyPilot request (issue 19, item 5).

The launch Lambda's real handler (`functions/launch/handler.py`) runs in-process on moto (`mock_aws`) against the
SkyPilot protocol double (`tests/integration/skypilot/double.py`, in its own threads), for a tool step with a
secret, Kubernetes resources and staged code: every launch is a new run, so each one resolves, renders and submits.
Printed per checkout:

- the walk: the rooms (packages of `npa_workflow`, and `functions`) the main thread's calls enter; the climbs
  back, calls up into a room still on the call stack (A → B → A: a layer calling back into the one that called
  it); and the re-entries, calls into a room the walk had left (a layer's helper taken up again after the walk
  moved on, instead of the next layer being handed a value). Counted on one launch, by `sys.setprofile`;
- YAML parses (`yaml.load`, `yaml.load_all`, `yaml.safe_load`, `yaml.safe_load_all`, `yaml.compose*`) and
  dumps (`yaml.dump`, `yaml.dump_all`, `yaml.safe_dump*`) of one launch, the spec's own load aside (a warm
  Lambda reads the frozen run once: the counted launch is its second visit);
- CPU of one launch (the main thread's `time.thread_time`, so the double's threads are not in it), the median
  and best of `--launches` launches: the whole handler (moto's ledger writes included), and its document part
  (from the launch's call into the renderer to the HTTP request's body).

    .venv/bin/python bench/launch_walk.py                       # this checkout
    .venv/bin/python bench/launch_walk.py --code /path/to/base  # a baseline checkout first, then this one
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DOUBLE = ROOT / "tests" / "integration" / "skypilot" / "double.py"
SPEC = """\
apiVersion: npa.workflow/v0.0.1
kind: Workflow
metadata: {name: walk}
config: {bucket: data, prefix: "walk/{{run.id}}"}
resources:
  gpu: {cloud: kubernetes, cpus: 2, memory: 8Gi, accelerators: "H100:1", kubernetes: {provision_timeout: 600}}
initial: train
states:
  train:
    toolRef: walk.train
    resources: gpu
    outputs: [{uri: "s3://{{config.bucket}}/{{config.prefix}}/model.json", schema: model}]
    terminal: true
"""
CATALOG = """\
apiVersion: npa.workflow.tools/v1
tools:
  walk.train:
    argv: [python, steps/train.py, --out, "s3://{{config.bucket}}/{{config.prefix}}/model.json", --lr, "0.01"]
    image: python:3.11-slim
    setup: pip install --quiet boto3
    env: {PYTHONUNBUFFERED: "1"}
    secretEnv: [HF_TOKEN]
"""
PARSES = ("load", "load_all", "safe_load", "safe_load_all", "compose", "compose_all")
DUMPS = ("dump", "dump_all", "safe_dump", "safe_dump_all")


def _load_double() -> Any:
    spec = importlib.util.spec_from_file_location("skypilot_double", DOUBLE)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _room(filename: str, code_root: str) -> str | None:
    """The room of a source file of the checkout (a package of npa_workflow, a top-level module, `functions`)."""
    if not filename.startswith(code_root):
        return None
    rel = Path(filename).relative_to(code_root).parts
    if rel[:1] == ("functions",):
        return "functions"
    if rel[:3] == ("layers", "engine", "npa_workflow") and len(rel) > 3 and rel[3] != "embedded_aws":
        return rel[3].removesuffix(".py")  # (embedded_aws: the bench's stand-in of the Lambda context)
    return None


class Walk:
    """The rooms the main thread's calls enter, in order; the calls back into a room still on the call stack below
    the caller (A → B → A: a later layer calling up into the one that called it), and the calls into a room the walk
    had left (re-entries: a layer's helper used again after the walk moved on)."""

    def __init__(self, code_root: str) -> None:
        self.code_root = code_root
        self.rooms: list[str] = []  # the walk: each entry a change of room
        self.climbs: list[str] = []  # "A -> B (function)" of each call up into a room on the stack
        self.reentries: list[str] = []  # "A -> B (function)" of each call into a room left earlier
        self._stack: list[str | None] = []
        self._cache: dict[str, str | None] = {}

    def __call__(self, frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            filename = frame.f_code.co_filename
            room = self._cache.get(filename, "?")
            if room == "?":
                room = self._cache[filename] = _room(filename, self.code_root)
            rooms_on_stack = [r for r in self._stack if r]
            here = rooms_on_stack[-1] if rooms_on_stack else None
            if room and room != here:
                move = f"{here} -> {room} ({frame.f_code.co_qualname})"
                if room in rooms_on_stack:
                    self.climbs.append(move)
                elif room in self.rooms:
                    self.reentries.append(move)
                self.rooms.append(room)
            self._stack.append(room)
        elif event == "return" and self._stack:
            self._stack.pop()


def child(launches: int) -> None:
    for key, value in {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x", "AWS_DEFAULT_REGION": "us-east-1",
                       "NPA_WORKFLOW_LEDGER_TABLE": "ledger", "NPA_WORKFLOW_BUCKET": "engine",
                       "NPA_WORKFLOW_EXECUTOR": "skypilot", "HF_TOKEN": "hf-bench-secret-value",
                       "POWERTOOLS_METRICS_DISABLED": "true", "POWERTOOLS_TRACE_DISABLED": "true",
                       "POWERTOOLS_LOG_LEVEL": "ERROR", "POWERTOOLS_METRICS_NAMESPACE": "bench"}.items():
        os.environ[key] = value
    os.environ.pop("AWS_ENDPOINT_URL", None)
    import logging

    logging.disable(logging.WARNING)
    import boto3
    import yaml
    from moto import mock_aws

    from functions.launch.handler import handler
    try:  # the wiring's home since it left engine/; a baseline checkout may have it in either
        from npa_workflow import wiring
    except ImportError:
        from npa_workflow.engine import wiring  # type: ignore[no-redef]
    from npa_workflow.embedded_aws.moto_lambda import LambdaContext
    from npa_workflow.engine.runs import RunOptions
    from npa_workflow.ledger import RunRecord

    counts = {"parse": 0, "dump": 0}
    depth: list[int] = []
    for kind, names in (("parse", PARSES), ("dump", DUMPS)):
        for name in names:
            real = getattr(yaml, name)

            def counted(*args: Any, _real: Any = real, _kind: str = kind, **kwargs: Any) -> Any:
                # Only the outermost call: `safe_load_all` calls `load_all`, `dump` calls `dump_all`.
                outer = threading.current_thread() is threading.main_thread() and not depth
                if outer:
                    counts[_kind] += 1
                depth.append(1)
                try:
                    return _real(*args, **kwargs)
                finally:
                    depth.pop()

            setattr(yaml, name, counted)

    document_cpu: list[float] = []

    def timed(module: Any, name: str, start: bool) -> None:
        real = getattr(module, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if start:
                timed.began = time.thread_time()  # type: ignore[attr-defined]
                return real(*args, **kwargs)
            document_cpu.append(time.thread_time() - timed.began)  # type: ignore[attr-defined]
            return real(*args, **kwargs)

        setattr(module, name, wrapper)

    double_mod = _load_double()
    with mock_aws(), double_mod.SkyPilotDouble() as double:
        double.request_polls = 0
        os.environ["SKYPILOT_API_SERVER_ENDPOINT"] = double.endpoint
        s3 = boto3.client("s3")
        for bucket in ("engine", "data"):
            s3.create_bucket(Bucket=bucket)
        wiring.clear_cache()
        engine = wiring.engine_from_environment()
        engine.ledger.create_table()
        # The document part: from the launch's first call into the renderer to the request's body on the wire.
        import npa_workflow.engine.launch as launch_module
        from npa_workflow.adapters import skypilot_api

        render_entry = next(n for n in ("launch_job", "launch_task") if hasattr(launch_module, n))
        timed(launch_module, render_entry, start=True)
        timed(skypilot_api.SkyPilotApi, "_submit", start=False)
        context = LambdaContext(function_name="launch", function_version="$LATEST",
                                invoked_function_arn="arn:aws:lambda:us-east-1:123456789012:function:launch",
                                memory_limit_in_mb=1024, timeout_seconds=900, log_group_name="/aws/lambda/launch")

        def one(run_id: str, walk: Walk | None = None) -> float:
            engine.runs.freeze(run_id, SPEC, CATALOG, {}, RunOptions(code_uri="s3://engine/code/abc123/"))
            engine.ledger.put_run(RunRecord(run_id=run_id, workflow="walk"))
            engine.runs.load(run_id)  # a warm Lambda has read the frozen run: its spec's load is not the job's
            event = {"run_id": run_id, "state": "train", "loops": {}, "token": f"token-{run_id}"}
            context._deadline = time.monotonic() + 900
            began = time.thread_time()
            if walk is not None:
                sys.setprofile(walk)
            try:
                result = handler(event, context)
            finally:
                sys.setprofile(None)
            spent = time.thread_time() - began
            assert "error" not in result and "unknown" not in result, result
            return spent

        one("warm-up")  # imports, the engine's clients
        walk = Walk(_code_root())
        before = dict(counts)
        one("walked", walk)
        per_launch = {k: counts[k] - before[k] for k in counts}
        document_cpu.clear()
        cpu = [one(f"run-{i}") for i in range(launches)]
        sent = double.calls_to("/jobs/launch")
    print(json.dumps({
        "rooms": walk.rooms, "climbs": walk.climbs, "reentries": walk.reentries, "yaml_parses": per_launch["parse"],
        "yaml_dumps": per_launch["dump"], "cpu_ms_median": statistics.median(cpu) * 1e3, "cpu_ms_best": min(cpu) * 1e3,
        "document_ms_median": statistics.median(document_cpu) * 1e3 if document_cpu else None,
        "document_ms_best": min(document_cpu) * 1e3 if document_cpu else None, "launches": len(sent),
    }), flush=True)


def _code_root() -> str:
    import npa_workflow

    return str(Path(npa_workflow.__file__).resolve().parents[3]) + os.sep


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--code", default=None, help="a checkout whose launch path is the baseline")
    parser.add_argument("--launches", type=int, default=200)
    parser.add_argument("--child", action="store_true", help="(internal: measure the importable checkout)")
    args = parser.parse_args()
    if args.child:
        child(args.launches)
        return 0
    versions = ([("baseline", Path(args.code).resolve())] if args.code else []) + [("this checkout", ROOT)]
    rows = []
    for label, code in versions:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(code / "layers" / "engine"), str(code)])}
        done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", "--launches",
                               str(args.launches)], env=env, cwd=code, capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            print(f"{label} ({code}): the bench failed:\n{done.stderr[-3000:]}", file=sys.stderr)
            return 1
        rows.append((label, json.loads(done.stdout.strip().splitlines()[-1])))
    for label, row in rows:
        print(f"{label}: {len(set(row['rooms']))} rooms entered {len(row['rooms'])} times, "
              f"{len(row['climbs'])} climbs back up the stack, {len(row['reentries'])} re-entries, "
              f"{row['yaml_parses']} YAML parses, {row['yaml_dumps']} YAML dumps per launch; "
              f"{row['launches']} launches sent")
        print(f"  walk: {' > '.join(row['rooms'])}")
        for climb in row["climbs"]:
            print(f"  climb back: {climb}")
        for move in row["reentries"]:
            print(f"  re-entry: {move}")
        document = (f"document part {row['document_ms_median']:.2f} ms (best {row['document_ms_best']:.2f})"
                    if row["document_ms_median"] is not None else "document part not measured")
        print(f"  CPU per launch: {row['cpu_ms_median']:.2f} ms median (best {row['cpu_ms_best']:.2f}); {document}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
