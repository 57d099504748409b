"""A client of one stack: where a run is submitted (the engine bucket's `inbox/`) and where it is followed (the
ledger table, the state machines' executions).

- `StackClient.local(endpoint)`: a stack started by `npa-workflow serve` (its embedded AWS at `endpoint`;
  dummy credentials, the local runtime's bucket and table names);
- `StackClient.cloud(stack=NAME)`: a deployed stack; the bucket and the ledger table are read from its
  CloudFormation outputs (`protocol.stack`: the names the CDK app emits; credentials and region: the usual boto3
  chain). `StackClient.cloud(bucket=B)` knows only the bucket: enough to submit, not to
  follow a run (that needs the ledger: give --stack, or `ledger_table`).

Submitting uploads a spec or a run request under `inbox/` and computes the run id exactly as the inbox does
(`engine.start.run_id_for_object` of the uploaded object's version id, else its ETag; a request's `runId` when
given), then waits for the run to appear in the ledger or for `inbox-rejected/<key>.json`.

Following a run (`status --watch`, `submit --wait`) is `RunFollower`: one GetItem per refresh while nothing
changed; `report()` reads everything once (the run, its frozen spec, every ledger item, the history).
"""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from npa_workflow.adapters.s3_store import S3Store
from npa_workflow.adapters.sfn_executions import SfnExecutions
from npa_workflow.engine.inbox import INBOX_PREFIX, RUN_REQUEST_API, rejected_key_for
from npa_workflow.engine.ports import ExecutionNotFound, Executions, StoreAccessDenied
from npa_workflow.engine.resume_plan import NEW_EXECUTION, REDRIVE, ResumePlan, plan_resume
from npa_workflow.engine.start import run_id_for_object
from npa_workflow.ledger import DynamoLedger, RunRecord, RunStatus, WaveStatus
from npa_workflow.protocol import stack as stack_outputs
from npa_workflow.protocol.definitions import definition_digest
from npa_workflow.protocol.errors import RUN_CANCELLED
from npa_workflow.protocol.run_ids import next_execution_name

TERMINAL = ("SUCCEEDED", "FAILED", "ABORTED", "TIMED_OUT")
LOCAL_REGION = "us-east-1"
LOCAL_CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing",
                     "aws_session_token": "testing"}


class StackError(Exception):
    """Something the user can fix (no such stack, a missing output, an unknown run): the message says what."""


@dataclass(frozen=True)
class Submitted:
    key: str
    run_id: str = ""
    rejected: bool = False
    errors: list[dict[str, str]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"run_id": self.run_id or None, "key": self.key}
        if self.rejected:
            doc.update(rejected=True, errors=self.errors)
        return doc


class StackClient:
    def __init__(self, session: Any, *, bucket: str, ledger_table: str = "", endpoint_url: str | None = None,
                 outputs: dict[str, str] | None = None) -> None:
        self.session = session
        self.bucket = bucket
        self.ledger_table = ledger_table
        self.endpoint_url = endpoint_url
        self.outputs = dict(outputs or {})
        self.s3 = session.client("s3", endpoint_url=endpoint_url)
        # The Step Functions control plane through the engine's port (the adapter turns SDK errors into its own).
        self.executions: Executions = SfnExecutions(session.client("stepfunctions", endpoint_url=endpoint_url))
        self._ledger: DynamoLedger | None = None

    # ---------------------------------------------------------------------------------------- construction
    @classmethod
    def local(cls, endpoint_url: str) -> StackClient:
        import boto3

        session = boto3.session.Session(region_name=LOCAL_REGION, **LOCAL_CREDENTIALS)
        return cls(session, bucket=stack_outputs.LOCAL_BUCKET, ledger_table=stack_outputs.LOCAL_LEDGER_TABLE,
                   endpoint_url=endpoint_url.rstrip("/"))

    @classmethod
    def cloud(cls, *, stack: str | None = None, bucket: str | None = None, ledger_table: str | None = None,
              region: str | None = None) -> StackClient:
        import boto3
        from botocore.exceptions import ClientError

        from npa_workflow.adapters.aws_clients import forget_blank_regions

        forget_blank_regions()
        session = boto3.session.Session(region_name=(region or "").strip() or None)
        if not stack:
            if not bucket:
                raise StackError("name the stack: --stack NAME (or --bucket B), or --endpoint URL for a local serve")
            return cls(session, bucket=bucket, ledger_table=ledger_table or "")
        try:
            described = session.client("cloudformation").describe_stacks(StackName=stack)["Stacks"]
        except ClientError as exc:
            raise StackError(f"stack {stack!r}: {exc.response.get('Error', {}).get('Message') or exc}") from None
        outputs = {o["OutputKey"]: o.get("OutputValue", "") for o in described[0].get("Outputs", [])}
        missing = [k for k in stack_outputs.REQUIRED_BY_CLIENTS if not outputs.get(k)]
        if missing and not bucket:
            raise StackError(f"stack {stack!r} has no output(s) {', '.join(missing)}: is it an npa-workflow stack?")
        return cls(session, bucket=bucket or outputs[stack_outputs.BUCKET_NAME],
                   ledger_table=ledger_table or outputs.get(stack_outputs.LEDGER_TABLE_NAME, ""), outputs=outputs)

    def serve_home(self) -> Path | None:
        """A local `serve` stack's home, as it publishes it (`protocol.stack.SERVE_HOME_KEY`): where its jobs'
        records and logs are, whatever folder this client runs in. None: not a serve stack, or an older one."""
        if not self.endpoint_url:
            return None
        try:
            body = self.s3.get_object(Bucket=self.bucket, Key=stack_outputs.SERVE_HOME_KEY)["Body"].read()
            home = json.loads(body).get("home")
        except Exception:  # noqa: BLE001 - unknown: the caller falls back to its own home and says so
            return None
        return Path(home) if isinstance(home, str) and home else None

    @property
    def ledger(self) -> DynamoLedger:
        if not self.ledger_table:
            raise StackError(f"the ledger table is unknown: give --stack NAME (its {stack_outputs.LEDGER_TABLE_NAME} "
                             "output)")
        if self._ledger is None:
            self._ledger = DynamoLedger(self.ledger_table,
                                        self.session.client("dynamodb", endpoint_url=self.endpoint_url))
        return self._ledger

    # ---------------------------------------------------------------------------------------- submit
    def upload(self, body: bytes, stem: str) -> tuple[str, str]:
        """Put `body` under `inbox/`; returns (key, the version id or ETag the inbox computes the run id from)."""
        stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
        key = f"{INBOX_PREFIX}{stem}-{stamp}-{secrets.token_hex(3)}.yaml"
        put = self.s3.put_object(Bucket=self.bucket, Key=key, Body=body)
        return key, put.get("VersionId") or str(put.get("ETag") or "").strip('"')

    def submit(self, document: dict[str, Any], *, timeout: float = 60.0, poll: float = 0.2) -> Submitted:
        """Upload a spec or run request (a parsed document) and wait until the inbox took it or rejected it."""
        name, explicit = _name_and_run_id(document)
        body = yaml.safe_dump(document, sort_keys=False, allow_unicode=True).encode("utf-8")
        key, version = self.upload(body, name or "submit")
        run_id = explicit or run_id_for_object(self.bucket, key, version, name or None)
        return self.wait_taken(key, run_id, timeout=timeout, poll=poll)

    def wait_taken(self, key: str, run_id: str, *, timeout: float = 60.0, poll: float = 0.2) -> Submitted:
        deadline = time.monotonic() + timeout
        rejected = rejected_key_for(key)
        while True:
            body = self._get(rejected)
            if body is not None:
                doc = json.loads(body)
                return Submitted(key, rejected=True, errors=list(doc.get("errors", [])))
            if self.ledger_table and self.ledger.get_run(run_id) is not None:
                return Submitted(key, run_id=run_id)
            if not self.ledger_table:
                return Submitted(key, run_id=run_id)  # bucket only: the id the inbox will use
            if time.monotonic() >= deadline:
                raise StackError(f"the inbox did not take s3://{self.bucket}/{key} within {timeout:.0f}s "
                                 f"(no run {run_id!r} in the ledger, no {rejected})")
            time.sleep(poll)

    def _get(self, key: str) -> bytes | None:
        try:
            return S3Store(self.s3).get(f"s3://{self.bucket}/{key}")
        except StoreAccessDenied:
            return None

    # ---------------------------------------------------------------------------------------- runs
    def run(self, run_id: str) -> RunRecord:
        record = self.ledger.get_run(run_id)
        if record is None:
            raise StackError(f"no run {run_id!r} in ledger {self.ledger_table} (fix: check the run id; `npa-workflow "
                             "list` with the same --endpoint/--stack names the stack's runs)")
        return record

    def execution_status(self, record: RunRecord) -> str:
        if not record.execution_arn:
            return record.status.value
        try:
            return self.executions.describe(record.execution_arn).status
        except Exception:  # noqa: BLE001 - gone, or a service error (denied, throttled): the ledger's status then
            return record.status.value

    def wait(self, run_id: str, *, timeout: float | None = None, poll: float = 0.5,
             describe_every: float = 10.0) -> RunRecord:
        """Until the run's status in the ledger is terminal (the stack records it when the execution ends: the reap
        of its status-change event). Each poll is one GetItem; the execution is described at most every
        `describe_every` seconds, for a SUCCEEDED whose event is late or lost."""
        deadline = None if timeout is None else time.monotonic() + timeout
        described = float("-inf")
        while True:
            record = self.run(run_id)
            if record.status != RunStatus.RUNNING:
                return record
            if time.monotonic() - described < describe_every:
                execution = "RUNNING"
            else:
                described = time.monotonic()
                execution = self.execution_status(record)
            if execution in TERMINAL and execution != "SUCCEEDED":
                pass  # the stack's reap records why: wait for it
            elif execution == "SUCCEEDED":  # a cloud stack records no SUCCEEDED in the ledger
                return record.model_copy(update={"status": RunStatus.SUCCEEDED})
            if deadline is not None and time.monotonic() >= deadline:
                raise StackError(f"run {run_id!r} still RUNNING after {timeout:.0f}s")
            time.sleep(poll)

    def report(self, run_id: str) -> dict[str, Any]:
        """The run report of `npa-workflow run --json` (`run_report.build_report`), from the stack."""
        from npa_workflow.adapters.s3_store import S3Store
        from npa_workflow.engine.runs import RunStore
        from npa_workflow.run_report import build_report, ledger_items

        record = self.run(run_id)
        frozen = RunStore(S3Store(self.s3), self.bucket).load(run_id)
        status = record.status.value
        if status == "RUNNING" and self.execution_status(record) == "SUCCEEDED":
            status = "SUCCEEDED"  # a cloud stack records no SUCCEEDED in the ledger
        return build_report(run_id=run_id, workflow=record.workflow, loaded=frozen.loaded, status=status,
                            items=ledger_items(self.ledger, run_id), execution_arn=record.execution_arn or "",
                            sfn=self.executions.client if record.execution_arn else None)

    def follow(self, run_id: str, *, full_every: float = 30.0) -> RunFollower:
        """A follower of the run (`RunFollower`): what `status --watch` and `submit --wait` refresh."""
        return RunFollower(self, run_id, full_every=full_every)

    def list_runs(self, limit: int = 50) -> list[RunRecord]:
        return self.ledger.list_runs(limit=limit)

    def cancel(self, run_id: str, *, timeout: float = 60.0, poll: float = 0.25) -> dict[str, Any]:
        """Record the cancel in the ledger first (later launches refuse), StopExecution (as soon as the run has
        an execution), then wait until the stack's reap has ended every job of the run (no active wave, a
        terminal run). Reports only what it saw: {"run_id", "status", "cancelled_jobs": [...], "cancelled"}
        where `cancelled` is False when the run ended some other way first (e.g. SUCCEEDED)."""
        record = self.run(run_id)
        if record.status != RunStatus.RUNNING:
            return {"run_id": run_id, "status": record.status.value, "cancelled_jobs": [], "cancelled": False}
        requested_at = self.ledger.request_cancel(run_id, "npa-workflow cancel")
        # What this cancel ends: the attempts open now, and any a launch racing the request opened (they end
        # after it). An earlier execution's cancelled attempts (a cancelled run resumed) ended before: not ours.
        open_now = {(w.wave_key, w.attempt) for w in self.ledger.open_attempts(run_id)}
        stopped = False
        deadline = time.monotonic() + timeout
        while True:
            record = self.run(run_id)
            if not stopped and record.status == RunStatus.RUNNING and record.execution_arn:
                stopped = self._stop(record.execution_arn)
            # This run's open attempts (a consistent read of its own partition), not the stack-wide active index
            # read in full every poll: at thousands of active waves that is pages per poll, for up to a minute.
            active = self.ledger.open_attempts(run_id)
            # A cancelled run ends ABORTED: wait for the stack to record that (a FAILED its cleanup wrote before
            # it saw the cancel is a passing status, rewritten ABORTED), unless the run had ended before the cancel.
            settled = record.status == RunStatus.ABORTED or (
                record.status != RunStatus.RUNNING and (record.ended_at or "") < requested_at)
            if record.status != RunStatus.RUNNING and not active and settled:
                break
            if time.monotonic() >= deadline:
                raise StackError(f"run {run_id!r}: cancel recorded at {requested_at}, but after {timeout:.0f}s the "
                                 f"run is {record.status.value} with {len(active)} active job(s)")
            time.sleep(poll)
        cancelled = [w.job_id for w in self.ledger.attempts(run_id)
                     if w.status == WaveStatus.CANCELLED and w.job_id
                     and ((w.wave_key, w.attempt) in open_now or (w.ended_at or "") >= requested_at)]
        # A run the cancel ended is ABORTED (engine.cleanup records it so in every interleaving); any other end
        # came first.
        return {"run_id": run_id, "status": record.status.value, "cancelled_jobs": cancelled,
                "cancelled": record.status == RunStatus.ABORTED}

    def _stop(self, execution_arn: str) -> bool:
        return self.executions.stop(execution_arn, RUN_CANCELLED, "cancelled with npa-workflow cancel")

    def resume(self, run_id: str, code: tuple[str, str] | None = None) -> dict[str, Any]:
        """RedriveExecution where it continues real work (an ABORTED/TIMED_OUT execution: `engine.resume_plan`);
        otherwise — every FAILED run, or a service without redrive — a new execution `<run>-r<n>` of the same
        state machine with the same input (its launches replay succeeded waves).

        `code`: (URI, digest) of step code staged for the resume (`resume --restage`): when it is not the run's,
        the frozen run is pointed at it and the change recorded (`engine.restage`), and the resume is always a new
        execution (a redrive keeps the execution whose Lambdas may hold the run's old options)."""
        from npa_workflow.engine.restage import restage
        from npa_workflow.engine.runs import RunStore

        record = self.run(run_id)
        if record.status == RunStatus.RUNNING:
            raise StackError(f"run {run_id!r} is still RUNNING: nothing to resume")
        if record.status == RunStatus.SUCCEEDED:
            raise StackError(f"run {run_id!r} SUCCEEDED: nothing to resume")
        if not record.execution_arn:
            raise StackError(f"run {run_id!r} has no execution to resume")
        try:
            execution = self.executions.describe(record.execution_arn)
        except ExecutionNotFound:
            raise StackError(f"run {run_id!r}: its execution {record.execution_arn} no longer exists") from None
        if execution.status == "RUNNING":
            raise StackError(f"run {run_id!r}: its execution is still RUNNING (the ledger will follow): nothing to "
                             "resume yet")
        plan = plan_resume(execution)
        runs = RunStore(S3Store(self.s3), self.bucket)
        current = runs.options(run_id) if code is not None else None
        new_code = current is not None and (current.code_uri, current.code_digest) != code
        if new_code:
            plan = ResumePlan(NEW_EXECUTION, "the step code was re-staged: a new execution replays the succeeded "
                                             "waves and runs the others in the new code")
        self.ledger.clear_cancel(run_id)  # an earlier cancel must not make the resumed run's launches refuse
        if plan.mode == REDRIVE and self.endpoint_url:
            # moto (a local serve) does not implement RedriveExecution: asking it only makes the server log a
            # NotImplementedError traceback, so a local stack goes straight to a new execution.
            plan = ResumePlan(NEW_EXECUTION, "a local stack cannot redrive: a new execution replays the "
                                             "succeeded waves")
        if plan.mode == REDRIVE:
            try:
                self.executions.redrive(record.execution_arn)
                self.ledger.update_run_status(run_id, RunStatus.RUNNING, execution_arn=record.execution_arn)
                return {"run_id": run_id, "execution_arn": record.execution_arn, "redriven": True,
                        "reason": plan.reason}
            except Exception:  # noqa: BLE001 - NotRedrivable, or refused otherwise (IAM): a new execution instead
                plan = ResumePlan(NEW_EXECUTION, "the service refused the redrive: a new execution replays the "
                                                 "succeeded waves")
        self._check_pinned_definition(record, execution.machine_arn)
        changed = restage(runs, self.ledger, run_id, *code) if new_code and code is not None else None
        name = next_execution_name(run_id, execution.name)
        arn = self.executions.start(execution.machine_arn, name, execution.input or "{}")
        self.ledger.update_run_status(run_id, RunStatus.RUNNING, execution_arn=arn)
        return {"run_id": run_id, "execution_arn": arn, "redriven": False, "execution_name": name,
                "reason": plan.reason,
                **({"code": {"from": changed[0], "to": changed[1], "uri": code[0]}} if changed and code else {})}


    def _check_pinned_definition(self, record: RunRecord, machine_arn: str) -> None:
        """A new execution runs the machine's *current* definition, while the run's steps read the spec frozen at
        its start: after a deploy that changed the spec, a renamed or added state has no step to resolve and
        reordered loops and groups shift their keys. So a new execution starts only on the definition the run
        started on (its digest, `protocol.definitions`, frozen on the RUN item). A redrive needs no check: AWS
        redrives an execution with the definition it started with."""
        if not record.definition_digest:
            return  # recorded before the digest was kept: nothing to compare with
        machine = machine_arn.rsplit(":", 1)[-1]
        again = ("fix: submit the spec again as a new run (`npa-workflow submit SPEC`; its succeeded steps' "
                 "outputs are not reused)")
        current = self.executions.definition(machine_arn)
        if current is None:
            raise StackError(f"run {record.run_id!r} cannot be resumed: its state machine {machine} no longer "
                             f"exists (a deploy removed or renamed spec {record.workflow!r}); {again}")
        digest = definition_digest(current)
        if digest != record.definition_digest:
            raise StackError(
                f"run {record.run_id!r} cannot be resumed: a deploy changed state machine {machine} since the run "
                f"started (definition {record.definition_digest[:12]} then, {digest[:12]} now), and a new "
                "execution would run the new definition against the run's frozen spec; "
                f"{again}, or deploy spec {record.workflow!r} as the run started it and resume")


class RunFollower:
    """The report of one run, kept up to date at the cost of one GetItem per refresh while nothing changed.

    Each `refresh()` reads the RUN item (eventually consistent: half a read unit up to 4 KB). The waves — a
    consistent Query of the run's whole partition, for a 10,000-wave run ~20 MB and ~5,000 read units — are
    read only when the item moved: its `changes` counter (the watch pass moves it once per pass for every run
    whose waves it wrote: `DynamoLedger.note_changes`), status, execution or error; and at least every
    `full_every` seconds, for what no counter covers (a launch's own writes; a stack deployed before the
    counter existed), when a running execution is also described (a cloud run's SUCCEEDED reaches the ledger
    with the reap event, which EventBridge delivers best effort). The frozen spec is read once; the history once,
    when the run has ended (the live views show none of it, the summary counts it).

    A read that AWS throttled (after the SDK's retries) keeps the last report and says so: the report's
    `throttled` is that one line, and the next refresh reads again. A throttle on the very first read raises.
    """

    def __init__(self, client: StackClient, run_id: str, *, full_every: float = 30.0,
                 clock: Any = time.monotonic) -> None:
        self.client = client
        self.run_id = run_id
        self.full_every = full_every
        self.clock = clock
        self._loaded: Any = None
        self._seen: tuple[Any, ...] | None = None
        self._read_at = float("-inf")
        self._report: dict[str, Any] | None = None

    @property
    def loaded(self) -> Any:
        """The run's frozen spec (three S3 GETs, once)."""
        if self._loaded is None:
            from npa_workflow.engine.runs import RunStore

            self._loaded = RunStore(S3Store(self.client.s3), self.client.bucket).load(self.run_id).loaded
        return self._loaded

    def refresh(self) -> dict[str, Any]:
        from botocore.exceptions import ClientError

        from npa_workflow.adapters.aws_errors import throttled, unread

        try:
            record = self.client.ledger.get_run(self.run_id, consistent=False) or self.client.run(self.run_id)
        except ClientError as exc:
            if not throttled(exc) or self._report is None:
                raise
            return {**self._report, "throttled": unread("GetItem of the run", exc)}
        now = self.clock()
        seen = (record.changes, record.status, record.execution_arn, record.ended_at, record.error)
        due = now - self._read_at >= self.full_every
        if self._report is not None and seen == self._seen and not due:
            return self._report
        status = record.status.value
        if status == "RUNNING" and due and record.execution_arn \
                and self.client.execution_status(record) == "SUCCEEDED":
            status = "SUCCEEDED"  # the ledger's SUCCEEDED comes with the reap event: not yet, or lost
        try:
            report = self._build(record, status)
        except ClientError as exc:
            if not throttled(exc) or self._report is None:
                raise
            return {**self._report, "throttled": unread("the run's ledger Query", exc)}
        self._seen, self._read_at, self._report = seen, now, report
        return report

    def _build(self, record: RunRecord, status: str) -> dict[str, Any]:
        from npa_workflow.run_report import build_report, ledger_items

        ended = status != "RUNNING"
        arn = record.execution_arn or ""
        return build_report(run_id=self.run_id, workflow=record.workflow, loaded=self.loaded, status=status,
                            items=ledger_items(self.client.ledger, self.run_id), execution_arn=arn,
                            sfn=self.client.executions.client if arn and ended else None,
                            read_history_events=ended)


def _name_and_run_id(document: dict[str, Any]) -> tuple[str, str]:
    """The stem the inbox names the run after (the spec's metadata.name) and a request's explicit runId."""
    if str(document.get("apiVersion", "")) == RUN_REQUEST_API:
        spec = document.get("spec")
        name = spec if isinstance(spec, str) else _metadata_name(spec)
        return name, str(document.get("runId") or "")
    return _metadata_name(document), ""


def _metadata_name(doc: Any) -> str:
    if isinstance(doc, dict) and isinstance(doc.get("metadata"), dict):
        return str(doc["metadata"].get("name") or "")
    return ""
