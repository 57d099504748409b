"""Run one spec's compiled state machine on aws-local-stepfunctions, its Tasks answered by the real handlers.

    python tests/interpreter/alsf_bridge.py CASE.json RESULT.json

CASE.json: {"spec", "catalog"?, "variables"?, "run_id", "home", "options": {LocalRunOptions fields that shape the
machine}, "objects"?: [{"uri", "body"}], "timeout_seconds"?}. RESULT.json: {"status", "error", "cause", "events"
(the interpreter's event log, summarized), "report" (`run_report.build_report` of the run's ledger)}.

What is real and what stands in (tests/interpreter/README in docs/interpreters.md):
- the interpreter is `harness.mjs` on aws-local-stepfunctions, a child process speaking JSON lines;
- S3 and the DynamoDB ledger are a moto server on 127.0.0.1, as in the twin; jobs are local processes;
- every Task is answered by the handler the cloud runs (`functions/<name>/handler.py`), in this process, with
  the Lambda context and error body of the twin's in-process Lambdas (`embedded_aws.moto_lambda`);
- the run is frozen and recorded by `engine.start.start_run`, the inbox's own function, through the engine's
  `Executions` port, here `HarnessExecutions`: it hands the execution input to the harness and describes the
  execution from the harness's end of it;
- the engine's Step Functions callback port (`TaskCallbacks`) is `HarnessCallbacks`: SendTaskSuccess/Failure/
  Heartbeat go to the harness, which answers whether the token was still open;
- the watch function's handler runs on a scheduled event, as EventBridge would call it (every `TICK_SECONDS`, and at
  once when a local job exits), and
  the reap handler gets the "Execution Status Change" event when the execution has ended.
It runs in its own process because the handlers read the process environment (one engine per process).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
TICK_SECONDS = 0.2
ACCOUNT = "123456789012"
TOKEN_PLACEHOLDER = "alsf-task-token"  # the context's $$.Task.Token; the harness mints one per attempt


class HarnessGone(RuntimeError):
    """The interpreter process ended before the run did."""


class Channel:
    """JSON lines to and from the harness process; replies to our own requests are matched by id."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self._write = threading.Lock()
        self._next = 0
        self._acks: dict[int, dict[str, Any]] = {}
        self._acked = threading.Condition()
        self.closed = False

    def send(self, doc: Mapping[str, Any]) -> None:
        line = json.dumps(doc, default=str) + "\n"
        with self._write:
            assert self.proc.stdin is not None
            self.proc.stdin.write(line)
            self.proc.stdin.flush()

    def request(self, doc: dict[str, Any], timeout: float = 10.0) -> dict[str, Any]:
        with self._acked:
            self._next += 1
            ident = self._next
        self.send({**doc, "id": ident})
        deadline = time.monotonic() + timeout
        with self._acked:
            while ident not in self._acks:
                left = deadline - time.monotonic()
                if self.closed or left <= 0:
                    raise HarnessGone(f"no answer from the interpreter to {doc.get('type')} {doc.get('action')}")
                self._acked.wait(left)
            return self._acks.pop(ident)

    def acked(self, doc: dict[str, Any]) -> None:
        with self._acked:
            self._acks[int(doc["id"])] = doc
            self._acked.notify_all()

    def close(self) -> None:
        with self._acked:
            self.closed = True
            self._acked.notify_all()


class HarnessCallbacks:
    """The engine's `TaskCallbacks` port on the second interpreter (what `adapters.sfn_callbacks` is on AWS):
    False when the token's Task is over, as SfnCallbacks answers for TaskTimedOut / InvalidToken."""

    def __init__(self, channel: Channel) -> None:
        self.channel = channel

    def _call(self, action: str, token: str, **fields: Any) -> bool:
        return bool(self.channel.request({"type": "callback", "action": action, "token": token, **fields})["accepted"])

    def succeed(self, token: str, output: Mapping[str, object]) -> bool:
        return self._call("success", token, output=dict(output))

    def fail(self, token: str, error: str, cause: str) -> bool:
        return self._call("failure", token, error=error, cause=cause)

    def heartbeat(self, token: str) -> bool:
        return self._call("heartbeat", token)


class HarnessExecutions:
    """The engine's `Executions` port as far as starting a run goes (`engine.start.start_run`): records the
    execution the harness will run; `describe` answers from the harness's end of it."""

    def __init__(self) -> None:
        self.name = ""
        self.input: dict[str, Any] = {}
        self.arn = ""
        self.machine_arn = ""
        self.ended: dict[str, Any] = {}

    def start(self, machine_arn: str, name: str, input_json: str) -> str:
        self.machine_arn, self.name, self.input = machine_arn, name, json.loads(input_json)
        machine = machine_arn.rsplit(":", 1)[-1]
        self.arn = f"arn:aws:states:us-east-1:{ACCOUNT}:execution:{machine}:{name}"
        return self.arn

    def describe(self, execution_arn: str) -> Any:
        from npa_workflow.engine.ports import Execution, ExecutionNotFound

        if execution_arn != self.arn:
            raise ExecutionNotFound(execution_arn)
        return Execution(arn=self.arn, name=self.name, machine_arn=self.machine_arn,
                         status=str(self.ended.get("status") or "RUNNING"), input=json.dumps(self.input))


def _arn(name: str) -> str:
    return f"arn:aws:lambda:us-east-1:{ACCOUNT}:function:npa-workflow-{name}"


def _function_arns() -> dict[str, str]:
    """The functions the state machine's Tasks call (the protocol's table; the twin deploys the same rows)."""
    from npa_workflow.protocol import functions

    return {fn.name: _arn(fn.name) for fn in functions.MACHINE_INVOKED}


def _invoke_handler(function_arn: str, event: Any, handlers: Mapping[str, str]) -> dict[str, Any]:
    """Call the function's real handler as the twin's in-process Lambda does (context, error body)."""
    import importlib

    from npa_workflow.embedded_aws.moto_lambda import error_body

    try:
        module_name, _, attr = handlers[function_arn].rpartition(".")
        result = getattr(importlib.import_module(module_name), attr)(event, _context(function_arn))
        json.dumps(result)
    except Exception as exc:  # noqa: BLE001 - every handler error is the Task's error, as on Lambda
        return {"ok": False, "error": error_body(exc)}
    return {"ok": True, "payload": result}


def _status_change(starter: HarnessExecutions, status: str) -> dict[str, Any]:
    """What EventBridge sends the reap function when the execution has ended (the twin's event builder)."""
    from dataclasses import replace

    from npa_workflow.embedded_aws.event_pump import execution_status_event

    return execution_status_event(replace(starter.describe(starter.arn), status=status))


def _buckets(loaded: Any, run_id: str, engine_bucket: str) -> list[str]:
    """The engine bucket and every bucket the run's config names (the twin creates the same set)."""
    import re

    from npa_workflow.spec.config import resolve_config

    run_ctx, _ = resolve_config(loaded.spec.config, loaded.spec.name, run_id, loaded.spec.run)
    names = [engine_bucket, str(run_ctx.config.get("bucket") or "").strip()]
    for value in run_ctx.config.values():
        names += re.findall(r"s3://([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(?:/|$)", str(value))
    return [n for n in dict.fromkeys(names) if n]


def start_harness(home: Path) -> subprocess.Popen[str]:
    """The interpreter process; started first, so that Node loads the package while this process sets up."""
    home.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(["node", str(HERE / "harness.mjs")], cwd=REPO, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=open(home / "harness.stderr", "w"),  # noqa: SIM115
                            text=True, bufsize=1)


def run_case(case: dict[str, Any], proc: subprocess.Popen[str]) -> dict[str, Any]:
    from npa_workflow import run_report, wiring
    from npa_workflow.compile.asl import CompileOptions, compile_spec
    from npa_workflow.embedded_aws.event_pump import scheduled_event
    from npa_workflow.embedded_aws.moto_server import start_moto_server
    from npa_workflow.engine.runs import RunOptions
    from npa_workflow.engine.start import start_run
    from npa_workflow.local import runtime
    from npa_workflow.local_jobs.job_exits import JobExits
    from npa_workflow.protocol import functions as function_table
    from npa_workflow.protocol.stack import LOCAL_BUCKET
    from npa_workflow.run_report import build_report
    from npa_workflow.spec.catalog import find_catalog
    from npa_workflow.spec.load import load_spec

    opts = {**case.get("options", {})}
    spec_path = Path(case["spec"])
    home = Path(case["home"])
    run_id = case["run_id"]
    variables = {str(k): str(v) for k, v in case.get("variables", {}).items()}
    loaded = load_spec(spec_path, catalog=case.get("catalog"), overrides=variables)
    max_wait = int(opts.get("max_wait_seconds", 3600))
    # The machine the twin deploys for the same LocalRunOptions (local.runtime.LocalRuntime._deploy).
    compile_options = CompileOptions(
        max_wait_seconds=max_wait,
        heartbeat_seconds=runtime.local_heartbeat_seconds(max_wait),
        retries=int(opts.get("retries", 0)),
        retry_interval_seconds=int(opts.get("retry_interval_seconds", 30)),
        max_infrastructure_recoveries=int(opts.get("max_infrastructure_recoveries", 1)),
        max_concurrency_cap=int(opts.get("max_concurrency", 0)),
        **case.get("compile", {}),
    )
    compiled = compile_spec(loaded, compile_options)
    arns = _function_arns()
    handlers = {arn: function_table.slot(name).handler for name, arn in arns.items()}
    definition = json.loads(runtime.machine_definition(compiled.definition, arns))

    server = start_moto_server()
    env = runtime.embedded_aws_env(server, home)
    with contextlib.ExitStack() as stack:
        # The twin's embedded AWS as `run` and `serve` enter it (environment, serialized conditional writes, the
        # handlers' logs to a file); its moto Step Functions and Lambda sit unused here.
        runtime.enter_embedded_aws(stack, server, env, home / "lambdas.log", home / "aws")
        engine = wiring.engine_from_environment()
        for bucket in _buckets(loaded, run_id, LOCAL_BUCKET):
            runtime.create_bucket(engine.store.client, bucket)
        engine.ledger.create_table()
        for obj in case.get("objects", []):
            engine.store.put(obj["uri"], obj["body"].encode())

        stack.callback(_stop, proc)
        channel = Channel(proc)

        starter = HarnessExecutions()
        catalog_path = find_catalog(case.get("catalog"), spec_path)
        start_run(
            engine, starter, machine_arn=f"arn:aws:states:us-east-1:{ACCOUNT}:stateMachine:npa-workflow-alsf",
            compiled=compiled, loaded=loaded, spec_text=spec_path.read_text(encoding="utf-8"),
            catalog_text=catalog_path.read_text(encoding="utf-8") if catalog_path else "", run_id=run_id,
            variables=variables,
            options=RunOptions(workdir=str(spec_path.resolve().parent),
                               cancel_on_timeout=bool(opts.get("cancel_on_timeout", True)), max_wait_seconds=max_wait),
        )
        ended = starter.ended
        # Every handler's engine is the cached one: give it the ports of this interpreter's Step Functions.
        engine.callbacks = HarnessCallbacks(channel)
        engine.executions = starter  # type: ignore[assignment]  # the watch pass describes it for orphan tokens
        done = threading.Event()
        # Whatever happens below, no job of the run outlives this process (the reap function cancels by exact id).
        stack.callback(_reap_quietly, run_id)
        pool = stack.enter_context(ThreadPoolExecutor(max_workers=64))

        def answer(msg: dict[str, Any]) -> None:
            reply = _invoke_handler(msg["function"], msg["payload"], handlers)
            with contextlib.suppress(OSError, ValueError):
                channel.send({"type": "result", "id": msg["id"], **reply})

        def read() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                try:
                    msg = json.loads(line)
                except ValueError:  # something else printed on the protocol's stdout: say what, stop
                    ended.update(status="HARNESS_ERROR", error="", cause=f"not a protocol line: {line[:300]!r}")
                    break
                if msg["type"] == "invoke":
                    pool.submit(answer, msg)
                elif msg["type"] == "callback_ack":
                    channel.acked(msg)
                elif msg["type"] == "end":
                    ended.update(msg)
                    done.set()
            channel.close()
            done.set()

        # What the handlers import on their first invocation, here while Node still loads the interpreter.
        import npa_workflow.engine.decide
        import npa_workflow.engine.launch
        import npa_workflow.engine.trigger  # noqa: F401

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        channel.send({"type": "start", "definition": definition, "input": starter.input,
                      "context": {"Execution": {"Id": starter.arn, "Name": starter.name},
                                  "Task": {"Token": TOKEN_PLACEHOLDER}},
                      "token_placeholder": TOKEN_PLACEHOLDER})

        watch = handlers_module("watch")
        deadline = time.monotonic() + float(case.get("timeout_seconds", 60))
        exits = JobExits(home / "jobs")  # the twin's event-driven completion: a job's exit wakes the watch at once
        while not done.is_set():
            exits.wait(TICK_SECONDS, done)
            if done.is_set():
                break
            if time.monotonic() > deadline:
                ended.update(status="HARNESS_TIMEOUT", error="", cause=f"no end after {case.get('timeout_seconds')} s")
                break
            with contextlib.suppress(HarnessGone):
                watch(scheduled_event(), _context(_arn("watch")))
        status = ended.get("status") or "HARNESS_GONE"
        reap = handlers_module("reap")
        # What EventBridge delivers to the reap function when the execution has ended.
        reap(_status_change(starter, status if status == "SUCCEEDED" else "FAILED"), _context(_arn("reap")))
        # Map iterations the interpreter still starts after a failure launch jobs after that reap: stop the
        # interpreter, let the launches in flight finish, and deliver the event again (at-least-once, as AWS).
        _stop(proc)
        pool.shutdown(wait=True)
        reap(_status_change(starter, status if status == "SUCCEEDED" else "FAILED"), _context(_arn("reap")))
        items = run_report.ledger_items(engine.ledger, run_id)
        report = build_report(run_id=run_id, workflow=loaded.spec.name, loaded=loaded, status=status, items=items,
                              execution_arn=starter.arn)
        return {"status": status, "error": ended.get("error"), "cause": ended.get("cause"),
                "events": ended.get("events", []), "report": report, "definition": definition}


def handlers_module(name: str) -> Any:
    import importlib

    from npa_workflow.protocol import functions

    return importlib.import_module(functions.slot(name).module).handler


def _context(function_arn: str) -> Any:
    """The Lambda context the twin's in-process Lambdas give a handler (`embedded_aws.moto_lambda.LambdaContext`)."""
    from npa_workflow.embedded_aws.moto_lambda import LambdaContext

    name = function_arn.rsplit(":", 1)[-1]
    return LambdaContext(function_name=name, function_version="$LATEST", invoked_function_arn=function_arn,
                         memory_limit_in_mb=256, timeout_seconds=900, log_group_name=f"/aws/lambda/{name}")


def _reap_quietly(run_id: str) -> None:
    from npa_workflow.engine.cleanup import cancel_active
    from npa_workflow.wiring import engine_from_environment

    with contextlib.suppress(Exception):
        cancel_active(engine_from_environment(), run_id, "the second-interpreter bridge ended")


def _stop(proc: subprocess.Popen[str]) -> None:
    with contextlib.suppress(OSError, ValueError):
        assert proc.stdin is not None
        proc.stdin.close()
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


def main(argv: list[str]) -> int:
    case_path, result_path = Path(argv[1]), Path(argv[2])
    case = json.loads(case_path.read_text(encoding="utf-8"))
    result = run_case(case, start_harness(Path(case["home"])))
    result_path.write_text(json.dumps(result, indent=1, default=str), encoding="utf-8")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "npa-workflow-alsf")
    sys.exit(main(sys.argv))
