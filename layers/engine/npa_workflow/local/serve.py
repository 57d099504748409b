"""`npa-workflow serve`: the whole stack on one machine, so a team can try the real flow with no AWS account.

What it starts (the embedded AWS of `embedded_aws`, entered as `local.runtime` enters it: `enter_embedded_aws`):

- moto in server mode on 127.0.0.1 (`--port`, default a free one) with the stack `local.embedded_stack` deploys
  from the CDK app's deployment model for every spec in the catalog's folder (`--catalog`, default
  `specs/tools.yaml`: every other `*.yaml` there is a spec): the engine bucket `npa-workflow-local` (versioned,
  EventBridge on), the bucket(s) each spec's config names (its trigger-event buckets), the ledger table, every
  function (in-process handlers) with the stack's environment, one `<stack>_<spec>` machine per spec, compiled
  as the stack compiles them, and the event rules;
- the deployed specs' text at `catalog/specs/<name>.yaml`, the catalog at `catalog/tools.yaml` and the machine map
  at `catalog/machines.json` (what the inbox reads); ad-hoc specs are allowed (as with `-c allowAdHocSpecs=true`:
  the inbox creates a content-addressed machine for them).

Then the event sources of the cloud stack are emulated by the event pump (`embedded_aws.event_pump`: AWS-shaped
events, delivered to the deployed functions through the Lambda API, retried, failures written to
`serve/lambda-failures.jsonl`), from what the embedded stack itself does (no bucket or run is listed per tick, so
a serve that stored a thousand runs costs what a fresh one does):

- S3 object arrival: the durable layer hears every object the stack stores (`DurableAws.object_written`, on the
  writing thread); each is queued and delivered by the loop as one "Object Created" event to the functions of
  the rules whose EventPatterns match it — under `inbox/` of the engine bucket → the inbox function, an object
  of the engine bucket or of a trigger-event bucket → the trigger function; another bucket's object reaches none.
  An object overwritten twice before the loop delivers it is delivered once (its last version), like a coalesced
  event; the inbox absorbs duplicates. Once, at start, the engine and trigger-event buckets are listed: what a
  previous serve stored but did not deliver (killed in between) is delivered then;
- the schedule: a "Scheduled Event" to the watch function every tick (`tick_seconds`, 0.25 s) while a run is
  RUNNING (a job's exit, an object's arrival wake the loop at once), every `IDLE_WATCH_SECONDS` otherwise;
- execution status change: each RUNNING run (known from the ledger's writes, not by listing every run) whose
  execution ended is one "Execution Status Change" event to the reap function (the ReapRule's pattern matches
  this stack's machines) — SUCCEEDED is recorded, FAILED/ABORTED/TIMED_OUT reaped, after failing the task tokens
  the execution waits on (moto notices a StopExecution only when the waiting Task ends). Each run's end is said
  once. An end is told by the interpreter (`embedded_aws.execution_ends`), a StopExecution or the run's own
  ledger write, and read with `DescribeExecution` then; every followed run is described every `FOLLOW_SECONDS`
  anyway, not at every tick.

Steps run as local processes. A run whose code `submit` staged (`code/<digest>/`, the default) starts each step in
a checkout of that code under the local home (`local_jobs.code_checkout`), as a SkyPilot task starts in its
`file_mounts` copy: a later edit of the folder does not reach it. A run staged without code (`--no-code`, a raw
inbox upload with no code bundle beside it) starts in the spec folder (the serve process changes into it).
The stack's DynamoDB items and S3 objects are kept under `serve/aws/` of the local home (`embedded_aws.durable_aws`),
with the S3 event source's cursor: a serve restarted on the same home knows every run of the previous one and
delivers no object event twice. A run whose execution died with the previous process (kill -9) is recorded
ABORTED and its jobs cancelled. Stopping serve (Ctrl-C / SIGTERM) stops and reaps every running run.
Job records and logs live under the local home (`$NPA_WORKFLOW_HOME`, else `./.npa-workflow` where serve was
started); `serve.json` there names the endpoint, and the home is published in the bucket
(`protocol.stack.SERVE_HOME_KEY`) for clients in other folders. With `ServeOptions.console` (the CLI's default)
the web console is served too, at its own port (`console.embedded`: told of every ledger write by the durable
layer).
"""

from __future__ import annotations

import collections
import contextlib
import functools
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from npa_workflow import wiring
from npa_workflow.adapters.sfn_executions import SfnExecutions
from npa_workflow.compile.asl import compile_spec
from npa_workflow.embedded_aws.durable_aws import DurableAws
from npa_workflow.embedded_aws.event_pump import EventPump
from npa_workflow.embedded_aws.execution_ends import execution_ends
from npa_workflow.engine.inbox import read_document
from npa_workflow.engine.ports import Execution, ExecutionsError
from npa_workflow.ledger import RunError, RunRecord, RunStatus
from npa_workflow.local.embedded_stack import (
    S3_URI_BUCKET,
    EmbeddedStack,
    StackSpec,
    config_buckets,
    deploy_stack,
    twin_deployment,
)
from npa_workflow.local.runtime import (
    REGION,
    LocalRunError,
    create_bucket,
    embedded_aws_env,
    enter_embedded_aws,
    local_home,
    process_environment,
)
from npa_workflow.local_jobs.job_exits import JobExits
from npa_workflow.protocol import errors
from npa_workflow.protocol import functions as function_table
from npa_workflow.protocol.deployment import INBOX_PREFIX
from npa_workflow.protocol.stack import LOCAL_BUCKET, LOCAL_LEDGER_TABLE, SERVE_HOME_KEY, deployable_spec_files
from npa_workflow.spec.load import load_spec
from npa_workflow.spec.validate import LoadedSpec

LOG = logging.getLogger(__name__)
ENDED = ("FAILED", "ABORTED", "TIMED_OUT")
RUNS_TRACKED = 1000
REAP_SETTLE_SECONDS = 10.0
OBJECT_EVENTS = "s3-object-created"  # the durable cursor of the S3 event source
IDLE_WATCH_SECONDS = 5.0  # the watch's schedule while no run is RUNNING (nothing to watch; a safety net)
# Every followed run's execution is described at least this often, told of its end or not (a safety net: an
# interpreter that raised never says it ended); between, only the runs with news are.
FOLLOW_SECONDS = 1.0


@dataclass(frozen=True)
class ServeOptions:
    catalog: Path = Path("specs/tools.yaml")
    port: int | None = None
    home: Path | None = None
    tick_seconds: float = 0.25
    console: bool = False  # also serve the web console (`npa_workflow.console`), on `console_port` (None: free)
    console_port: int | None = None


def deployable_specs(catalog: Path) -> list[Path]:
    """The spec files in the catalog's folder, by the rule the CDK app deploys with (protocol.stack)."""
    return [p for p in deployable_spec_files(catalog.parent) if p.resolve() != catalog.resolve()]


def _spec_buckets(config: Any) -> list[str]:
    """Buckets a spec's config names literally (`bucket:` and `s3://…` values; templated ones are skipped)."""
    if not isinstance(config, dict):
        return []
    found = []
    bucket = str(config.get("bucket") or "").strip()
    if bucket and "{" not in bucket:
        found.append(bucket)
    for value in config.values():
        found += S3_URI_BUCKET.findall(str(value))
    return found


@contextlib.contextmanager
def record_stops(stopped: Callable[[str], None]) -> Iterator[None]:
    """Tell `stopped(arn)` of every execution StopExecution was called for. moto 5.2.5 stops an execution by
    flagging its interpreter, which still follows the waiting Task's Catch once the token fails and may then report
    FAILED; AWS reports ABORTED and emits that status change. Seam: `StepFunctionBackend.stop_execution(self, arn)`."""
    from moto.stepfunctions.models import StepFunctionBackend

    original = StepFunctionBackend.stop_execution

    def stop_execution(self: Any, execution_arn: str, *args: Any, **kwargs: Any) -> Any:
        result = original(self, execution_arn, *args, **kwargs)
        stopped(execution_arn)
        return result

    StepFunctionBackend.stop_execution = stop_execution  # type: ignore[method-assign]
    try:
        yield
    finally:
        StepFunctionBackend.stop_execution = original  # type: ignore[method-assign]


class Serve:
    def __init__(self, options: ServeOptions, on_endpoint: Callable[[str], None] | None = None) -> None:
        self.options = options
        self.on_endpoint = on_endpoint
        self.home = local_home(options.home)
        self.catalog = Path(options.catalog).resolve()
        self._stop = threading.Event()
        self._seen: dict[tuple[str, str], str] = {}
        self._stopped: set[str] = set()  # execution ARNs StopExecution was called for (see record_stops)
        self._durable: DurableAws | None = None
        self.pump: EventPump  # once deployed
        self.endpoint_url = ""
        self.console_url = ""  # once serving, with options.console
        # (bucket, key) → (etag, size, version id) of objects stored since the loop last delivered (durable_aws tells)
        self._arrived: collections.OrderedDict[tuple[str, str], tuple[str, int, str | None]] = \
            collections.OrderedDict()
        self._arrived_lock = threading.Lock()
        # Runs seen RUNNING in the ledger's writes whose end is not said yet: what the loop follows (not every run);
        # of those, the ones with news since the loop last looked (their RUN item written, their execution ended or
        # stopped), and each one's execution. Written on moto's threads, read by the loop: under the lock.
        self._running: set[str] = set()
        self._news: set[str] = set()
        self._followed_arns: dict[str, str] = {}  # execution ARN → run id
        self._follow_lock = threading.Lock()
        self._ledger_table = ""
        self._exits: JobExits | None = None

    def stop(self) -> None:
        self._stop.set()

    # ---------------------------------------------------------------------------------------- start
    def _load_specs(self) -> list[tuple[Path, LoadedSpec]]:
        if not self.catalog.is_file():
            raise LocalRunError(f"no tool catalog at {self.catalog} (give --catalog FILE; its folder holds the specs)")
        specs = [(path, load_spec(path, catalog=self.catalog)) for path in deployable_specs(self.catalog)]
        # Two specs with one metadata.name would deploy one machine: `submit NAME` would run either.
        first: dict[str, Path] = {}
        for path, loaded in specs:
            other = first.setdefault(loaded.spec.name, path)
            if other != path:
                raise LocalRunError(f"{path} and {other} both have metadata.name {loaded.spec.name!r}: rename one "
                                    "(each deployed spec names its own state machine)")
        return specs

    def serve(self) -> None:
        """Start the stack and serve until `stop()` (or Ctrl-C / SIGTERM)."""
        from npa_workflow.embedded_aws.heap import settled_heap

        with settled_heap() as settle:  # settled once deployed (embedded_aws.heap)
            self._serve(settle)

    def _serve(self, settle: Callable[[], None]) -> None:
        import boto3

        from npa_workflow.embedded_aws.moto_server import start_moto_server
        from npa_workflow.local.runtime import metrics_off_in_this_process, signals_interrupt

        specs = self._load_specs()  # a broken spec in the folder is a SpecError before anything starts
        for line in preflight_warnings(specs):
            _say(line)
        metrics_off_in_this_process()
        self.home.mkdir(parents=True, exist_ok=True)
        try:
            server = start_moto_server(self.options.port)
        except RuntimeError as exc:
            raise LocalRunError(str(exc)) from None
        self.endpoint_url = server.endpoint_url
        env = embedded_aws_env(server, self.home, "local")
        with contextlib.ExitStack() as stack:
            durable = enter_embedded_aws(stack, server, env, self.home / "serve" / "lambdas.log",
                                         self.home / "serve" / "aws")
            stack.enter_context(signals_interrupt())
            stack.enter_context(record_stops(self._execution_stopped))
            stack.enter_context(execution_ends(self._execution_news))
            session = boto3.session.Session(region_name=REGION)
            clients = {name: session.client(name, endpoint_url=self.endpoint_url)
                       for name in ("s3", "iam", "lambda", "stepfunctions", "logs", "events")}
            engine = wiring.engine_from_environment()
            # What a previous serve on this home kept (embedded_aws.durable_aws): its objects before the deploy (which
            # then writes the current specs and catalog over them), its ledger after the table exists.
            durable.restore_objects()
            settings = self._deploy(clients, engine, specs)
            stack.enter_context(process_environment(settings.process_environment()))  # what the functions read
            durable.restore_items()
            self._durable = durable
            delivered = durable.delivered(OBJECT_EVENTS)
            self._seen.update({tuple(json.loads(ident)): etag for ident, etag in delivered.items()})
            self._ledger_table = engine.ledger.table_name
            stack.enter_context(durable.object_written(self._object_stored))
            stack.enter_context(durable.item_written(self._item_written))
            settle()
            self._recover(engine)
            self._write_serve_json(settings, clients["s3"])
            # Steps of inbox-started runs run in the spec folder (the inbox freezes no workdir: jobs inherit ours).
            previous_cwd = os.getcwd()
            os.chdir(self.catalog.parent)
            stack.callback(os.chdir, previous_cwd)
            if self.options.console:  # told of every ledger write by the durable layer: no polling
                from npa_workflow.console.embedded import serve_console

                self.console_url = serve_console(stack, self.endpoint_url, durable, self.options.console_port)
            if self.on_endpoint:
                self.on_endpoint(self.endpoint_url)
            try:
                self._loop(engine, clients, settings)
            except KeyboardInterrupt:
                pass
            finally:
                self._reap_all(engine, SfnExecutions(clients["stepfunctions"]), "npa-workflow serve stopped")

    def _deploy(self, clients: dict[str, Any], engine: Any, specs: list[tuple[Path, LoadedSpec]]) -> EmbeddedStack:
        """The stack of every spec in the folder (`local.embedded_stack`, the deployment model's), with ad-hoc specs
        allowed (so `submit` of any spec file works) and the buckets the specs name as trigger-event buckets."""
        s3 = clients["s3"]
        buckets: list[str] = []
        # resolved as `run` resolves them (a bucket that depends on the run id cannot be known before the run)
        for bucket in dict.fromkeys(b for _, loaded in specs for b in config_buckets(loaded)):
            try:
                create_bucket(s3, bucket)
            except ClientError as exc:
                LOG.warning("cannot create the local bucket %s: %s", bucket, exc)
                continue
            buckets.append(bucket)
        deployment = twin_deployment(allow_ad_hoc=True, trigger_event_buckets=buckets)
        # Compiled as the inbox compiles (the deployment's options), so its comparison picks the deployed machine.
        options = deployment.compile_options()
        stack_specs = [StackSpec(loaded.spec.name, path.read_bytes(), compile_spec(loaded, options).definition)
                       for path, loaded in specs]
        stack = deploy_stack(clients, deployment, stack_specs, catalog=self.catalog.read_bytes(),
                             data_buckets=list(dict.fromkeys(buckets)),
                             failures_path=self.home / "serve" / "lambda-failures.jsonl", ledger=engine.ledger)
        self.pump = stack.pump
        return stack

    def _write_serve_json(self, settings: EmbeddedStack, s3: Any) -> None:
        placeholders = {fn.placeholder: settings.function_arns[fn.name] for fn in function_table.MACHINE_INVOKED}
        doc = {"endpoint": self.endpoint_url, "bucket": LOCAL_BUCKET, "ledger_table": LOCAL_LEDGER_TABLE,
               "pid": os.getpid(), "catalog": str(self.catalog),
               "state_machines": dict(settings.machines), "ad_hoc_prefix": settings.deployment.ad_hoc_prefix,
               "ad_hoc_role_arn": settings.role_arn, "function_arns": placeholders}
        (self.home / "serve.json").write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
        # Clients in any folder find this stack's job logs through the stack itself (stack_client.serve_home).
        s3.put_object(Bucket=LOCAL_BUCKET, Key=SERVE_HOME_KEY,
                      Body=json.dumps({"home": str(self.home.resolve()), "pid": os.getpid()}).encode())

    # ---------------------------------------------------------------------------------------- the loop
    def _loop(self, engine: Any, clients: dict[str, Any], settings: EmbeddedStack) -> None:
        sfn = SfnExecutions(clients["stepfunctions"])  # the Executions port on the local Step Functions
        self._exits = exits = JobExits(self.home / "jobs")
        s3 = clients["s3"]
        # once: what a previous serve left undelivered, in the buckets whose events a rule takes
        watched = [LOCAL_BUCKET, *settings.deployment.trigger_event_buckets]
        self._guarded(lambda: self._undelivered_objects(s3, watched))
        last_watch = last_followed = 0.0
        while not self._stop.is_set():
            started = time.monotonic()
            self._guarded(lambda: self._object_events(s3))
            if self._running or started - last_watch >= IDLE_WATCH_SECONDS:
                self._guarded(self.pump.scheduled_watch)
                last_watch = started
            if self._running:
                every_run = started - last_followed >= FOLLOW_SECONDS
                last_followed = started if every_run else last_followed
                self._guarded(functools.partial(self._execution_changes, engine, sfn, every_run=every_run))
            # a job's exit or an object's arrival wakes the loop at once; the tick is the safety net
            exits.wait(max(0.0, self.options.tick_seconds - (time.monotonic() - started)), self._stop)

    @staticmethod
    def _guarded(step: Callable[[], Any]) -> None:
        try:
            step()
        except Exception as exc:  # noqa: BLE001 - one failed pass must not stop the stack
            LOG.warning("serve: a pass failed: %s", exc, exc_info=True)

    # -- what the durable layer hears (on moto's writing threads: quick, no call to the stack) -----------------
    def _object_stored(self, bucket: str, key: str, etag: str, size: int, version_id: str | None = None) -> None:
        with self._arrived_lock:
            self._arrived.pop((bucket, key), None)
            self._arrived[(bucket, key)] = (etag, size, version_id)
        if self._exits is not None:
            self._exits.nudge()

    def _item_written(self, table: str, key: dict[str, Any], item: dict[str, Any] | None) -> None:
        if table != self._ledger_table or item is None or item.get("kind", {}).get("S") != "RUN":
            return
        run = RunRecord.from_item(item)
        with self._follow_lock:
            if run.status == RunStatus.RUNNING and run.execution_arn:
                self._running.add(run.run_id)  # started, or resumed: its next end is news
                self._followed_arns[run.execution_arn] = run.run_id
            if run.run_id in self._running:
                self._news.add(run.run_id)  # its status may have changed (its own cleanup records its end)

    def _execution_news(self, execution_arn: str) -> None:
        """An execution ended (on the interpreter's thread) or was stopped: its run is looked at next pass."""
        with self._follow_lock:
            run_id = self._followed_arns.get(execution_arn)
            if run_id is not None:
                self._news.add(run_id)
        if run_id is not None and self._exits is not None:
            self._exits.nudge()

    def _still_news(self, run_id: str) -> None:
        with self._follow_lock:
            self._news.add(run_id)  # looked at again next pass

    def _execution_stopped(self, execution_arn: str) -> None:
        self._stopped.add(execution_arn)
        self._execution_news(execution_arn)

    # -- S3 → EventBridge ------------------------------------------------------------------------------------
    def _undelivered_objects(self, s3: Any, buckets: list[str]) -> None:
        """Every object of `buckets` not yet delivered at its ETag (the durable cursor), found by listing, once."""
        for bucket in buckets:
            for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
                for obj in page.get("Contents", []):
                    key, etag = obj["Key"], str(obj.get("ETag", ""))
                    if self._seen.get((bucket, key)) != etag:
                        # an upload's run is keyed by its version (the listing has none): asked for inbox/ only
                        version = (s3.head_object(Bucket=bucket, Key=key).get("VersionId")
                                   if bucket == LOCAL_BUCKET and key.startswith(INBOX_PREFIX) else None)
                        self._object_stored(bucket, key, etag, int(obj.get("Size", 0)), version)

    def _object_events(self, s3: Any) -> None:
        """Each object stored since the last pass is one "Object Created" event on the bus: the rules whose
        patterns match it deliver it (the inbox for `inbox/` of the engine bucket, the trigger for the engine
        bucket and the trigger-event buckets; another bucket's object reaches no function, as in the cloud)."""
        while True:
            with self._arrived_lock:
                if not self._arrived:
                    return
                (bucket, key), (etag, size, version_id) = self._arrived.popitem(last=False)
            if self._seen.get((bucket, key)) == etag:
                continue
            inbox = bucket == LOCAL_BUCKET and key.startswith(INBOX_PREFIX)
            if inbox:
                self._ensure_buckets(s3, bucket, key)
            results = self.pump.object_created(bucket, key, etag=etag, size=size, version_id=version_id)
            if inbox:
                done = results.get("inbox") or {"status": "failed (see serve/lambda-failures.jsonl)"}
                _say(f"inbox {key}: {done.get('status')}" + (f" run {done['run_id']}" if done.get("run_id") else ""))
            # Delivered: a restarted serve does not deliver it again (killed before this line, it does).
            self._seen[(bucket, key)] = etag
            if self._durable is not None:
                self._durable.record_delivered(OBJECT_EVENTS, json.dumps([bucket, key]), etag)

    def _ensure_buckets(self, s3: Any, bucket: str, key: str) -> None:
        """An ad-hoc spec's buckets exist locally before its steps write to them (the cloud has them already)."""
        try:
            doc = read_document(s3.get_object(Bucket=bucket, Key=key)["Body"].read(), f"s3://{bucket}/{key}")
        except Exception:  # noqa: BLE001 - the inbox reports a broken document (bounded loader: no YAML bomb)
            return
        if isinstance(doc, dict) and isinstance(doc.get("spec"), dict):
            doc = doc["spec"]
        for name in _spec_buckets(doc.get("config") if isinstance(doc, dict) else None):
            with contextlib.suppress(ClientError):
                create_bucket(s3, name)

    def _execution_changes(self, engine: Any, sfn: SfnExecutions, *, every_run: bool = True) -> None:
        """Each followed run whose execution ended is recorded; each run that left RUNNING is said, once (whether
        its end was recorded here or by the execution's own cleanup). The runs with news only, unless `every_run`."""
        with self._follow_lock:
            looked_at = sorted(self._running if every_run else self._news & self._running)
            self._news.clear()
        for run_id in looked_at:
            run = engine.ledger.get_run(run_id)
            if run is not None and run.status == RunStatus.RUNNING and run.execution_arn:
                try:
                    desc = sfn.describe(run.execution_arn)
                except (ExecutionsError, ClientError):  # this run next pass; the others now
                    self._still_news(run_id)
                    continue
                status = desc.status
                if run.execution_arn in self._stopped:
                    status = "ABORTED"  # moto may end a stopped execution FAILED (it follows the Catch): it was stopped
                if status == "SUCCEEDED":
                    self.pump.execution_status_changed(desc)  # the reap function records the run's end
                elif status in ENDED:
                    self._reap(engine, sfn, run.run_id, status, desc)
                else:
                    continue
                run = engine.ledger.get_run(run_id)
            if run is not None and run.status == RunStatus.RUNNING:
                self._still_news(run_id)  # its end could not be recorded yet (serve/lambda-failures.jsonl)
                continue
            with self._follow_lock:
                self._running.discard(run_id)
                for arn in [a for a, r in self._followed_arns.items() if r == run_id]:
                    del self._followed_arns[arn]
            if run is None:
                continue
            error = f" ({run.error.message})" if run.error is not None and run.status != RunStatus.SUCCEEDED else ""
            _say(f"run {run.run_id}: {run.status.value}{error}")

    def _reap(self, engine: Any, sfn: SfnExecutions, run_id: str, status: str, desc: Execution) -> None:
        """The reap Lambda: fail the tokens the execution still waits on (moto), cancel every job, record why."""
        reason = f"execution ended {status}"
        if desc.cause or desc.error:
            reason += f": {desc.error or ''} {desc.cause or ''}".rstrip()
        tokens = [w.task_token for w in engine.ledger.active_waves() if w.run_id == run_id and w.task_token]
        tokens += [m.task_token for m in engine.ledger.active_watches() if m.run_id == run_id and m.task_token]
        if status == "ABORTED":
            # AWS emits the ABORTED change as StopExecution returns, and the reap Lambda cancels the jobs then:
            # do it before unblocking moto's interpreter (it would otherwise hold the signal back for seconds).
            self._deliver_reap(engine, run_id, reason, status, desc)
        # moto quirk: a stopped execution's interpreter still waits on its Task; failing the token ends the wait,
        # but moto then follows the Catch to the cleanup (which cancels the jobs and records FAILED). Let it
        # settle, then record what the execution really ended as (AWS runs no Catch after StopExecution).
        for token in tokens:
            with contextlib.suppress(Exception):
                engine.callbacks.fail(token, errors.RUN_INTERRUPTED, reason)
        deadline = time.monotonic() + REAP_SETTLE_SECONDS
        while tokens and time.monotonic() < deadline:
            run = engine.ledger.get_run(run_id)
            if run is None or run.status != RunStatus.RUNNING:
                break
            time.sleep(0.05)
        if status != "ABORTED":
            self._deliver_reap(engine, run_id, reason, status, desc)
        run = engine.ledger.get_run(run_id)
        cancelled = engine.ledger.cancel_requested(run_id) is not None  # its reap recorded ABORTED: it stands
        if run is not None and not cancelled and (status != "FAILED" or run.error is None) and (
                run.status != RunStatus(status) or run.error is None):
            with contextlib.suppress(Exception):
                engine.ledger.update_run_status(run_id, RunStatus(status), RunError(state=None, message=reason))

    def _deliver_reap(self, engine: Any, run_id: str, reason: str, status: str, desc: Execution) -> None:
        from npa_workflow.engine.cleanup import reap

        if self.pump.execution_status_changed(replace(desc, status=status)) is None:
            reap(engine, run_id, reason, status=RunStatus(status))  # the reap function failed: leave no job

    def _recover(self, engine: Any) -> None:
        """Runs a previous serve on this home left RUNNING: their executions died with that process (moto's
        interpreter cannot be resumed). Each is recorded ABORTED with the reason and its jobs cancelled by
        exact id, so no orphan writes into this stack; `status` and `list` still show it."""
        from npa_workflow.engine.cleanup import reap

        reason = ("the npa-workflow serve that ran it ended before the run did (killed?); its jobs were "
                  "cancelled: submit it again")
        for run in engine.ledger.list_runs(limit=RUNS_TRACKED):
            if run.status != RunStatus.RUNNING:
                continue
            try:
                reap(engine, run.run_id, reason, status=RunStatus.ABORTED)
            except Exception as exc:  # noqa: BLE001 - the next runs still get recovered
                LOG.warning("serve: cannot recover run %s: %s", run.run_id, exc)
                continue
            _say(f"run {run.run_id}: ABORTED ({reason})")

    def _reap_all(self, engine: Any, sfn: SfnExecutions, reason: str) -> None:
        from npa_workflow.engine.cleanup import reap

        with contextlib.suppress(Exception):
            for run in engine.ledger.list_runs(limit=RUNS_TRACKED):
                if run.status == RunStatus.RUNNING:
                    with contextlib.suppress(Exception):
                        if run.execution_arn:
                            sfn.stop(run.execution_arn, errors.RUN_INTERRUPTED, reason)
                    with contextlib.suppress(Exception):
                        reap(engine, run.run_id, reason)


def preflight_warnings(specs: list[tuple[Path, LoadedSpec]]) -> list[str]:
    """The secrets (and programs) deployed specs' jobs need that serve lacks (engine.preflight): the inbox refuses
    their runs, so it is said once at start, where restarting serve with them exported is the fix."""
    from npa_workflow.engine.preflight import local_problems

    return [f"warning: {path}: {p.path}: {p.message} (fix: {p.hint}); its runs are refused until then"
            for path, loaded in specs for p in local_problems(loaded, "serve", wiring.local_job_env()["PATH"])]


def _say(line: str) -> None:
    sys.stdout.write(f"npa-workflow serve: {line}\n")
    sys.stdout.flush()
