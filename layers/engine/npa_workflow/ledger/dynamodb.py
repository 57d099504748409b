"""`DynamoLedger`: the run ledger on one DynamoDB table (shapes and keys: `npa_workflow.ledger.items`).

Every write that can race is conditional:

- `put_run` only creates (a duplicate inbox event finds the run already there);
- `begin_attempt` is the launch lock: the attempt item is created only if that attempt does not exist yet,
  so of two concurrent launches exactly one wins and the other gets `AttemptExists` with the winner's item
  (and reuses its job instead of submitting a second one);
- `record_submission` never replaces a recorded job id with a different one (that would be a second job);
- `mark_status` / `finish_attempt` never move an attempt out of a terminal status, so the watch pass, the
  cleanup Task and the reap Lambda can race and only the first finish counts; the one exception is
  `revoke_success`, which turns a SUCCEEDED attempt into FAILED (never back) when what its job wrote turns
  out unusable (its decision artifact), so that a resume relaunches the wave instead of replaying it;
- `put_watermark` never overwrites a satisfied watermark, so exactly one caller sees the trigger fire.

Reads that decide a launch (`latest_attempt`, `get_attempt`) are strongly consistent; the index reads
(`active_waves`, `active_watches`, `list_runs`) are eventually consistent, as GSIs are.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator
from typing import Any

from botocore.exceptions import ClientError

from npa_workflow.ledger.errors import AttemptExists, LedgerConflict, LedgerNotFound
from npa_workflow.ledger.items import (
    ACTIVE,
    RUNS,
    TERMINAL_RUN,
    TERMINAL_WAVE,
    TRIGGER,
    DecisionRecord,
    DecisionSource,
    ErrorCategory,
    RunError,
    RunRecord,
    RunStatus,
    TimelineEntry,
    Watermark,
    WaveAttempt,
    WaveStatus,
    decision_prefix,
    key_part,
    run_pk,
    serialize,
    watermark_sk,
    wave_prefix,
    wave_sk,
)
from npa_workflow.timestamps import utc_now

STACK_PK = "STACK"
WATCH_LEASE_SK = "WATCH#lease"
OUTAGE_SK = "SCHEDULER#outage"
ACTIVE_INDEX = "active"
RUNS_INDEX = "runs"
TTL_ATTRIBUTE = "expires_at"
_DECISION_SEQ_TRIES = 10
_CHANGED_RUNS_MAX = 10_000
_NOT_TERMINAL = "NOT #status IN (:t1, :t2, :t3)"
_TERMINAL_VALUES = {f":t{i}": {"S": s.value} for i, s in enumerate(sorted(TERMINAL_WAVE), start=1)}


def _conditional_failed(exc: ClientError) -> bool:
    return bool(exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException")


def _old_item(exc: ClientError) -> dict[str, Any] | None:
    """The item as it was when a condition failed (ReturnValuesOnConditionCheckFailure=ALL_OLD)."""
    return exc.response.get("Item") or None


class DynamoLedger:
    """The ledger of every run, in table `table_name`.

    `client`: a boto3 DynamoDB client; created on first use otherwise, honouring `AWS_ENDPOINT_URL`
    (the local runtime's embedded moto). `retention_days`: when set, every item created gets a TTL
    (`expires_at`) that many days ahead. `page_size`: the `Limit` of each Query page (tests use a small
    one to exercise pagination); every list method follows `LastEvaluatedKey` to the end.
    """

    def __init__(
        self,
        table_name: str,
        client: Any = None,
        *,
        retention_days: int | None = None,
        page_size: int | None = None,
    ) -> None:
        self.table_name = table_name
        self._client = client
        self.retention_days = retention_days
        self.page_size = page_size
        # Runs whose waves this ledger wrote since the last `note_changes` (a set's add is atomic: the watch
        # pass's threads share it).
        self._changed_runs: set[str] = set()

    def __repr__(self) -> str:
        return f"DynamoLedger(table_name={self.table_name!r})"

    @property
    def client(self) -> Any:
        if self._client is None:
            import boto3

            self._client = boto3.client("dynamodb", endpoint_url=os.environ.get("AWS_ENDPOINT_URL") or None)
        return self._client

    # ------------------------------------------------------------------------------------------ table

    def create_table(self) -> bool:
        """Create the table (local runtime and tests; CDK owns it in the cloud). False if it existed."""
        string = "S"
        try:
            self.client.create_table(
                TableName=self.table_name,
                BillingMode="PAY_PER_REQUEST",
                AttributeDefinitions=[
                    {"AttributeName": name, "AttributeType": string}
                    for name in ("pk", "sk", "active_pk", "active_sk", "runs_pk", "runs_sk")
                ],
                KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
                GlobalSecondaryIndexes=[
                    {
                        "IndexName": index,
                        "KeySchema": [
                            {"AttributeName": f"{prefix}_pk", "KeyType": "HASH"},
                            {"AttributeName": f"{prefix}_sk", "KeyType": "RANGE"},
                        ],
                        "Projection": {"ProjectionType": "ALL"},
                    }
                    for index, prefix in ((ACTIVE_INDEX, "active"), (RUNS_INDEX, "runs"))
                ],
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ResourceInUseException":
                return False
            raise
        self.client.get_waiter("table_exists").wait(
            TableName=self.table_name, WaiterConfig={"Delay": 1, "MaxAttempts": 60}
        )
        try:
            self.client.update_time_to_live(
                TableName=self.table_name,
                TimeToLiveSpecification={"Enabled": True, "AttributeName": TTL_ATTRIBUTE},
            )
        except ClientError:  # an emulator without TTL: items simply never expire
            pass
        return True

    # ------------------------------------------------------------------------------------------ helpers

    def _expires_at(self) -> int | None:
        """TTL of an item that has ended. An item something still waits on (a RUNNING run, an active attempt,
        a waiting watermark) carries none: a wave may wait up to a year (its deadline) and must not vanish
        from the ledger after `retention_days` (DynamoDB TTL deletes silently); it gets its TTL when it ends."""
        if self.retention_days is None:
            return None
        return int(time.time()) + self.retention_days * 86400

    def _key(self, run_id: str, sk: str) -> dict[str, Any]:
        return {"pk": {"S": run_pk(run_id)}, "sk": {"S": sk}}

    def _get(self, run_id: str, sk: str, consistent: bool = True) -> dict[str, Any] | None:
        resp = self.client.get_item(TableName=self.table_name, Key=self._key(run_id, sk), ConsistentRead=consistent)
        item: dict[str, Any] | None = resp.get("Item")
        return item

    def _query(self, limit: int | None = None, **kwargs: Any) -> Iterator[dict[str, Any]]:
        """Every item of a Query, following LastEvaluatedKey; at most `limit` items when given."""
        kwargs["TableName"] = self.table_name
        seen = 0
        while True:
            page_limit = self.page_size
            if limit is not None:
                page_limit = min(page_limit or limit, limit - seen)
            if page_limit:
                kwargs["Limit"] = page_limit
            resp = self.client.query(**kwargs)
            for item in resp.get("Items", []):
                yield item
                seen += 1
                if limit is not None and seen >= limit:
                    return
            last = resp.get("LastEvaluatedKey")
            if not last:
                return
            kwargs["ExclusiveStartKey"] = last

    def _update(
        self, run_id: str, sk: str, expression: str, values: dict[str, Any], condition: str, **kwargs: Any
    ) -> dict[str, Any]:
        """UpdateItem returning the new item; raises ClientError (with the old item) when `condition` fails."""
        params: dict[str, Any] = {
            "TableName": self.table_name,
            "Key": self._key(run_id, sk),
            "UpdateExpression": expression,
            "ConditionExpression": condition,
            "ReturnValues": "ALL_NEW",
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            **kwargs,
        }
        if values:
            params["ExpressionAttributeValues"] = values
        attributes: dict[str, Any] = self.client.update_item(**params)["Attributes"]
        return attributes

    @staticmethod
    def _timeline_value(status: str, note: str = "", at: str | None = None) -> dict[str, Any]:
        entry = TimelineEntry(status=status, note=note, at=at or utc_now())
        value: dict[str, Any] = serialize({"e": [entry.model_dump()]})["e"]
        return value

    # ------------------------------------------------------------------------------------------ runs

    def put_run(self, run: RunRecord) -> bool:
        """Create the RUN item. False (nothing written) if the run already exists."""
        if run.expires_at is None and run.status in TERMINAL_RUN:
            run = run.model_copy(update={"expires_at": self._expires_at()})
        try:
            self.client.put_item(
                TableName=self.table_name, Item=run.to_item(), ConditionExpression="attribute_not_exists(pk)"
            )
        except ClientError as exc:
            if _conditional_failed(exc):
                return False
            raise
        return True

    def get_run(self, run_id: str, *, consistent: bool = True) -> RunRecord | None:
        """The RUN item; `consistent=False`: an eventually consistent read (half the read units: a watcher's poll,
        which sees a newer item at its next poll)."""
        item = self._get(run_id, "RUN", consistent)
        return RunRecord.from_item(item) if item else None

    def update_run_status(
        self,
        run_id: str,
        status: RunStatus | str,
        error: RunError | None = None,
        *,
        execution_arn: str | None = None,
    ) -> RunRecord:
        """Set the run's status. Terminal statuses stamp `ended_at`; RUNNING (a resumed run) clears
        `ended_at` and `error`. Raises `LedgerNotFound` if there is no such run."""
        status = RunStatus(status)
        sets = ["#status = :status"]
        removes: list[str] = []
        values: dict[str, Any] = {":status": {"S": status.value}}
        if status in TERMINAL_RUN:
            sets.append("ended_at = :now")
            values[":now"] = {"S": utc_now()}
            expires = self._expires_at()
            if expires is not None:
                sets.append(f"{TTL_ATTRIBUTE} = :expires")
                values[":expires"] = {"N": str(expires)}
        else:
            removes += ["ended_at", TTL_ATTRIBUTE]  # running again (resumed): nothing may expire it
        if error is not None:
            sets.append("#error = :error")
            values[":error"] = serialize({"e": error.model_dump(exclude_none=True)})["e"]
        elif status not in TERMINAL_RUN:
            removes.append("#error")
        if execution_arn:
            sets.append("execution_arn = :arn")
            values[":arn"] = {"S": execution_arn}
        values[":one"] = {"N": "1"}
        # The same write moves the run's change counter: a watcher that polls this item sees the new status.
        expression = ("SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes else "")
                      + " ADD changes :one")
        names = {"#status": "status"}
        if "#error" in expression:
            names["#error"] = "error"
        try:
            item = self._update(
                run_id, "RUN", expression, values, "attribute_exists(pk)", ExpressionAttributeNames=names
            )
        except ClientError as exc:
            if _conditional_failed(exc):
                raise LedgerNotFound(f"no run {run_id!r} in ledger {self.table_name}") from None
            raise
        return RunRecord.from_item(item)

    def record_code_change(self, run_id: str, from_digest: str, to_digest: str, code_uri: str) -> RunRecord:
        """Append a re-stage of the run's step code (a resume with fixed code) to the RUN item's `code_changes`:
        the run's report says from which code to which, and when. Raises `LedgerNotFound` without the run."""
        entry = serialize({"e": [{"at": utc_now(), "from": from_digest, "to": to_digest, "uri": code_uri}]})["e"]
        try:
            item = self._update(
                run_id, "RUN", "SET code_changes = list_append(if_not_exists(code_changes, :none), :entry) "
                               "ADD changes :one",
                {":none": {"L": []}, ":entry": entry, ":one": {"N": "1"}}, "attribute_exists(pk)",
            )
        except ClientError as exc:
            if _conditional_failed(exc):
                raise LedgerNotFound(f"no run {run_id!r} in ledger {self.table_name}") from None
            raise
        return RunRecord.from_item(item)

    def note_changes(self) -> int:
        """Move the change counter (`changes`) of every run whose waves this ledger wrote since the last call:
        one UpdateItem per run, however many of its waves changed. The watch pass calls it once at its end, so a
        watcher (`stack_client.RunFollower`) polls the RUN item alone and reads the waves when it moved; the wave
        writes themselves stay one write each (a counter on the RUN item in the same request would need a
        transaction: twice the write units on every wave write). Returns how many runs it noted."""
        noted = 0
        while self._changed_runs:
            run_id = self._changed_runs.pop()
            try:
                self.client.update_item(TableName=self.table_name, Key=self._key(run_id, "RUN"),
                                        UpdateExpression="ADD changes :one", ConditionExpression="attribute_exists(pk)",
                                        ExpressionAttributeValues={":one": {"N": "1"}})
                noted += 1
            except ClientError as exc:
                if not _conditional_failed(exc):  # no such run: nothing watches it
                    self._changed_runs.add(run_id)  # throttled, say: the next pass notes it
                    raise
        return noted

    def _changed(self, run_id: str) -> None:
        if len(self._changed_runs) < _CHANGED_RUNS_MAX:  # a launch Lambda never notes: its set stays bounded
            self._changed_runs.add(run_id)

    def request_cancel(self, run_id: str, note: str = "") -> str:
        """Record, before anything is signalled, that the run is to be cancelled (item sk `CANCEL`); returns
        when it was first requested. Launches refuse from then on (engine/launch.py); a resume clears it."""
        item = {**self._key(run_id, "CANCEL"), "kind": {"S": "CANCEL"}, "requested_at": {"S": utc_now()},
                "note": {"S": note[:500]}}
        expires = self._expires_at()
        if expires is not None:
            item["expires_at"] = {"N": str(expires)}
        try:
            self.client.put_item(TableName=self.table_name, Item=item, ConditionExpression="attribute_not_exists(pk)")
        except ClientError as exc:
            if not _conditional_failed(exc):
                raise
        return self.cancel_requested(run_id) or item["requested_at"]["S"]

    def cancel_requested(self, run_id: str) -> str | None:
        item = self._get(run_id, "CANCEL")
        return str(item["requested_at"]["S"]) if item else None

    def clear_cancel(self, run_id: str) -> None:
        self.client.delete_item(TableName=self.table_name, Key=self._key(run_id, "CANCEL"))

    def list_runs(self, limit: int = 50) -> list[RunRecord]:
        """Runs, newest first (index `runs`; for the CLI)."""
        items = self._query(
            limit=limit,
            IndexName=RUNS_INDEX,
            KeyConditionExpression="runs_pk = :p",
            ExpressionAttributeValues={":p": {"S": RUNS}},
            ScanIndexForward=False,
        )
        return [RunRecord.from_item(i) for i in items]

    # ------------------------------------------------------------------------------------------ waves

    def begin_attempt(
        self,
        run_id: str,
        wave_key: str,
        *,
        state: str,
        attempt: int | None = None,
        group: str | None = None,
        iteration: int | None = None,
        job_name: str | None = None,
        task_token: str | None = None,
        replayed: bool = False,
        status: WaveStatus | str = WaveStatus.PENDING,
        outputs: list[str] | None = None,
        note: str = "",
    ) -> WaveAttempt:
        """Take the launch lock: create attempt `attempt` (default: the latest + 1) of the wave.

        Raises `AttemptExists` (with `.existing`) if that attempt already exists: the caller must then
        reuse the recorded job, never submit another. A launch Lambda passes the Task's own attempt number
        (from the Step Functions retry count), so a retried Lambda invocation of the same Task lands on the
        existing item, while an ASL `Retry` gets a fresh attempt. A replayed wave is begun with
        `replayed=True, status=SUCCEEDED` and is never active.
        """
        if attempt is None:
            latest = self.latest_attempt(run_id, wave_key)
            attempt = latest.attempt + 1 if latest else 1
        status = WaveStatus(status)
        now = utc_now()
        wave = WaveAttempt(
            run_id=run_id,
            wave_key=wave_key,
            state=state,
            group=group,
            iteration=iteration,
            attempt=attempt,
            job_name=job_name,
            task_token=task_token,
            status=status,
            replayed=replayed,
            outputs=outputs or [],
            timeline=[TimelineEntry(at=now, status=status.value, note=note or ("replayed" if replayed else "begin"))],
            ended_at=now if status in TERMINAL_WAVE else None,
            expires_at=self._expires_at() if status in TERMINAL_WAVE else None,
        )
        try:
            self.client.put_item(
                TableName=self.table_name,
                Item=wave.to_item(),
                ConditionExpression="attribute_not_exists(pk)",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if not _conditional_failed(exc):
                raise
            old = _old_item(exc) or self._get(run_id, wave_sk(wave_key, attempt))
            existing = WaveAttempt.from_item(old) if old else None
            raise AttemptExists(
                f"attempt {attempt} of wave {wave_key!r} of run {run_id!r} already exists", existing
            ) from None
        self._changed(run_id)
        return wave

    def get_attempt(self, run_id: str, wave_key: str, attempt: int) -> WaveAttempt | None:
        item = self._get(run_id, wave_sk(wave_key, attempt))
        return WaveAttempt.from_item(item) if item else None

    def latest_attempt(self, run_id: str, wave_key: str) -> WaveAttempt | None:
        """The highest-numbered attempt of the wave (strongly consistent), or None."""
        resp = self.client.query(
            TableName=self.table_name,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            ExpressionAttributeValues={":pk": {"S": run_pk(run_id)}, ":prefix": {"S": wave_prefix(wave_key)}},
            ScanIndexForward=False,
            Limit=1,
            ConsistentRead=True,
        )
        items = resp.get("Items", [])
        return WaveAttempt.from_item(items[0]) if items else None

    def attempts(self, run_id: str, wave_key: str | None = None) -> list[WaveAttempt]:
        """Every WAVE item of the run (or of one wave), in key order: by wave key, then attempt."""
        prefix = wave_prefix(wave_key) if wave_key is not None else "WAVE#"
        items = self._query(
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            ExpressionAttributeValues={":pk": {"S": run_pk(run_id)}, ":prefix": {"S": prefix}},
            ConsistentRead=True,
        )
        return [WaveAttempt.from_item(i) for i in items]

    def state_attempt_count(self, run_id: str, state: str) -> int:
        """How many attempts of `state` the run has, over every loop round and retry (a launch's fence sequence).

        Counted by DynamoDB (`Select=COUNT`: no item comes back) over the state's own sort-key range — the wave
        keys `<state>` and `<state>|<counters>` both begin `WAVE#<state>` — filtered to exactly that state (a
        longer name such as `train2` shares the prefix). Reading every attempt of the run instead made each launch
        of a 10,000-member group read the whole run's partition: O(members²) reads on AWS."""
        kwargs: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :prefix)",
            "FilterExpression": "#state = :state",
            "ExpressionAttributeNames": {"#state": "state"},
            "ExpressionAttributeValues": {":pk": {"S": run_pk(run_id)}, ":prefix": {"S": f"WAVE#{key_part(state)}"},
                                          ":state": {"S": state}},
            "Select": "COUNT",
            "ConsistentRead": True,
        }
        count = 0
        while True:  # a COUNT query still stops at 1 MB read per page (DynamoDB Query): follow every page
            resp = self.client.query(**kwargs)
            count += int(resp.get("Count", 0))
            if not resp.get("LastEvaluatedKey"):
                return count
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]

    def state_attempts(self, run_id: str, state: str) -> list[WaveAttempt]:
        """Every attempt of `state` in the run, over every loop round and retry, as keys and statuses only
        (`wave_key`, `attempt`, `status`, `state`; the other fields take their defaults): a consistent read of the
        state's own sort-key range, filtered to exactly that state as `state_attempt_count` is. What a launch
        decides on — the latest attempt of its wave and the state's fence sequence — in one read."""
        names = {"#state": "state", "#status": "status", "#wk": "wave_key", "#att": "attempt", "#run": "run_id"}
        items = self._query(
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            FilterExpression="#state = :state",
            ProjectionExpression="pk, sk, #run, #state, #status, #wk, #att",
            ExpressionAttributeNames=names,
            ExpressionAttributeValues={":pk": {"S": run_pk(run_id)}, ":prefix": {"S": f"WAVE#{key_part(state)}"},
                                       ":state": {"S": state}},
            ConsistentRead=True,
        )
        return [WaveAttempt.from_item(i) for i in items]

    def open_attempts(self, run_id: str) -> list[WaveAttempt]:
        """The run's attempts not yet terminal, read from the base table with a consistent read. Cleanup and
        reap use this, not `active_waves`: a GSI is eventually consistent (on AWS a just-launched attempt may
        not be in the `active` index yet), and a job that cleanup does not see is left running."""
        return [w for w in self.attempts(run_id) if w.status not in TERMINAL_WAVE]

    def watermarks(self, run_id: str) -> list[Watermark]:
        """Every trigger watermark of the run (consistent read of the base table)."""
        items = self._query(
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            ExpressionAttributeValues={":pk": {"S": run_pk(run_id)}, ":prefix": {"S": "WATERMARK#"}},
            ConsistentRead=True,
        )
        return [Watermark.from_item(i) for i in items]

    def _missing_or(self, exc: ClientError, run_id: str, wave_key: str, attempt: int) -> WaveAttempt:
        """The attempt as it was when a condition failed; `LedgerNotFound` when it does not exist."""
        if not _conditional_failed(exc):
            raise exc
        old = _old_item(exc) or self._get(run_id, wave_sk(wave_key, attempt))
        if not old:
            raise LedgerNotFound(f"no attempt {attempt} of wave {wave_key!r} of run {run_id!r}") from None
        return WaveAttempt.from_item(old)

    def record_submission(
        self,
        run_id: str,
        wave_key: str,
        attempt: int,
        *,
        job_id: str | None = None,
        request_id: str | None = None,
        job_name: str | None = None,
        status: WaveStatus | str = WaveStatus.LAUNCHING,
        note: str = "",
    ) -> WaveAttempt:
        """Record what the scheduler returned for the launch (request id first, job id once known).

        Never replaces a different recorded job id (`LedgerConflict`: a second job for one attempt).
        If the attempt is already terminal (e.g. reaped while launching), the ids are still recorded, so
        cleanup can cancel the job by exact id, and `LedgerConflict` tells the caller to cancel it.
        """
        status = WaveStatus(status)
        if status in TERMINAL_WAVE:
            raise ValueError("record_submission takes a non-terminal status; use finish_attempt")
        fields = {"job_id": job_id, "request_id": request_id, "job_name": job_name}
        sets = [f"{k} = :{k}" for k, v in fields.items() if v is not None]
        values: dict[str, Any] = {f":{k}": {"S": v} for k, v in fields.items() if v is not None}
        job_guard = "(attribute_not_exists(job_id) OR job_id = :job_id)" if job_id else ""
        status_sets = [
            "#status = :status",
            "submitted_at = if_not_exists(submitted_at, :now)",
            "timeline = list_append(if_not_exists(timeline, :empty), :entry)",
        ]
        status_values = {
            ":status": {"S": status.value},
            ":now": {"S": utc_now()},
            ":empty": {"L": []},
            ":entry": self._timeline_value(status.value, note or self._submission_note(fields)),
            **_TERMINAL_VALUES,
        }
        condition = " AND ".join(c for c in ("attribute_exists(pk)", _NOT_TERMINAL, job_guard) if c)
        try:
            item = self._update(
                run_id,
                wave_sk(wave_key, attempt),
                "SET " + ", ".join(sets + status_sets),
                {**values, **status_values},
                condition,
                ExpressionAttributeNames={"#status": "status"},
            )
            self._changed(run_id)
            return WaveAttempt.from_item(item)
        except ClientError as exc:
            current = self._missing_or(exc, run_id, wave_key, attempt)
        if job_id and current.job_id and current.job_id != job_id:
            raise LedgerConflict(
                f"attempt {attempt} of wave {wave_key!r} already has job {current.job_id}, not {job_id}", current
            )
        if sets:  # terminal already: keep the ids anyway so the job can be cancelled by exact id
            try:
                current = WaveAttempt.from_item(
                    self._update(
                        run_id,
                        wave_sk(wave_key, attempt),
                        "SET " + ", ".join(sets),
                        values,
                        " AND ".join(c for c in ("attribute_exists(pk)", job_guard) if c),
                    )
                )
            except ClientError as exc:
                current = self._missing_or(exc, run_id, wave_key, attempt)
        raise LedgerConflict(
            f"attempt {attempt} of wave {wave_key!r} is already {current.status.value}; cancel the submitted job",
            current,
        )

    @staticmethod
    def _submission_note(fields: dict[str, str | None]) -> str:
        return ", ".join(f"{k}={v}" for k, v in fields.items() if v and k != "job_name")

    def set_token(self, run_id: str, wave_key: str, attempt: int, task_token: str) -> WaveAttempt:
        """Store the task token of the Task now waiting on this attempt (a retried or redriven Task brings
        a new one). Returns the attempt: if it is already terminal, the caller completes the token now."""
        try:
            item = self._update(
                run_id,
                wave_sk(wave_key, attempt),
                "SET task_token = :token",
                {":token": {"S": task_token}},
                "attribute_exists(pk)",
            )
        except ClientError as exc:
            self._missing_or(exc, run_id, wave_key, attempt)
            raise  # pragma: no cover - _missing_or raises for a missing item
        return WaveAttempt.from_item(item)

    def mark_status(
        self, run_id: str, wave_key: str, attempt: int, status: WaveStatus | str, note: str = "",
        at: str | None = None,
    ) -> bool:
        """Move a non-terminal attempt to another non-terminal status (LAUNCHING/RUNNING/UNKNOWN).

        RUNNING stamps `started_at` once (`at`: when the job really started, if the scheduler says).
        Returns False when nothing changed: the attempt is terminal or already has that status (the
        watch pass calls this every tick; the timeline gets changes only).
        """
        status = WaveStatus(status)
        if status in TERMINAL_WAVE:
            raise ValueError("mark_status takes a non-terminal status; use finish_attempt")
        sets = ["#status = :status", "timeline = list_append(if_not_exists(timeline, :empty), :entry)"]
        values: dict[str, Any] = {
            ":status": {"S": status.value},
            ":empty": {"L": []},
            ":entry": self._timeline_value(status.value, note),
            **_TERMINAL_VALUES,
        }
        if status is WaveStatus.RUNNING:
            sets.append("started_at = if_not_exists(started_at, :now)")
            values[":now"] = {"S": at or utc_now()}
        try:
            self._update(
                run_id,
                wave_sk(wave_key, attempt),
                "SET " + ", ".join(sets),
                values,
                f"attribute_exists(pk) AND {_NOT_TERMINAL} AND #status <> :status",
                ExpressionAttributeNames={"#status": "status"},
            )
        except ClientError as exc:
            self._missing_or(exc, run_id, wave_key, attempt)
            return False
        self._changed(run_id)
        return True

    def finish_attempt(
        self,
        run_id: str,
        wave_key: str,
        attempt: int,
        status: WaveStatus | str,
        error: str | None = None,
        error_category: ErrorCategory | str | None = None,
        *,
        outputs: list[str] | None = None,
        note: str = "",
        started_at: str | None = None,
        ended_at: str | None = None,
    ) -> bool:
        """End the attempt (SUCCEEDED/FAILED/CANCELLED) and drop it from the `active` index.

        `started_at`/`ended_at`: the job's own times when the scheduler reports them (a job can start
        and end between two watch ticks); otherwise `ended_at` is now.

        Conditional on the attempt not being terminal already: returns True for the one call that ended
        it, False for every later one (watch pass, cleanup and reap may race). Raises `LedgerNotFound`
        if the attempt does not exist.
        """
        status = WaveStatus(status)
        if status not in TERMINAL_WAVE:
            raise ValueError(f"finish_attempt takes a terminal status, got {status.value}")
        sets = [
            "#status = :status",
            "ended_at = :now",
            "timeline = list_append(if_not_exists(timeline, :empty), :entry)",
        ]
        values: dict[str, Any] = {
            ":status": {"S": status.value},
            ":now": {"S": ended_at or utc_now()},
            ":empty": {"L": []},
            ":entry": self._timeline_value(status.value, note or (error or "")[:200]),
            **_TERMINAL_VALUES,
        }
        names = {"#status": "status"}
        expires = self._expires_at()
        if expires is not None:
            sets.append(f"{TTL_ATTRIBUTE} = :expires")
            values[":expires"] = {"N": str(expires)}
        if error is not None:
            sets.append("#error = :error")
            values[":error"] = {"S": error}
            names["#error"] = "error"
        if error_category is not None:
            sets.append("error_category = :category")
            values[":category"] = {"S": ErrorCategory(error_category).value}
        if started_at is not None:
            sets.append("started_at = if_not_exists(started_at, :started)")
            values[":started"] = {"S": started_at}
        if outputs is not None:
            sets.append("outputs = :outputs")
            values[":outputs"] = serialize({"o": list(outputs)})["o"]
        try:
            self._update(
                run_id,
                wave_sk(wave_key, attempt),
                "SET " + ", ".join(sets) + " REMOVE active_pk, active_sk",
                values,
                f"attribute_exists(pk) AND {_NOT_TERMINAL}",
                ExpressionAttributeNames=names,
            )
        except ClientError as exc:
            self._missing_or(exc, run_id, wave_key, attempt)
            return False
        self._changed(run_id)
        return True

    def revoke_success(
        self, run_id: str, wave_key: str, attempt: int, error: str, error_category: ErrorCategory | str
    ) -> bool:
        """Turn a SUCCEEDED attempt into FAILED with `error`: its job exited 0, but what it wrote cannot be used
        (the decision artifact a decide read is missing or malformed). A resume relaunches a FAILED wave and
        replays a SUCCEEDED one unread, so the success must not stand. The job's own times stay as recorded.

        Conditional on the attempt being SUCCEEDED: True for the call that revoked it, False when it was not
        SUCCEEDED (already revoked, or never succeeded). Raises `LedgerNotFound` if it does not exist."""
        values: dict[str, Any] = {
            ":failed": {"S": WaveStatus.FAILED.value},
            ":succeeded": {"S": WaveStatus.SUCCEEDED.value},
            ":error": {"S": error},
            ":category": {"S": ErrorCategory(error_category).value},
            ":empty": {"L": []},
            ":entry": self._timeline_value(WaveStatus.FAILED.value, f"success revoked: {error}"[:200]),
        }
        try:
            self._update(
                run_id,
                wave_sk(wave_key, attempt),
                "SET #status = :failed, #error = :error, error_category = :category, "
                "timeline = list_append(if_not_exists(timeline, :empty), :entry)",
                values,
                "attribute_exists(pk) AND #status = :succeeded",
                ExpressionAttributeNames={"#status": "status", "#error": "error"},
            )
        except ClientError as exc:
            self._missing_or(exc, run_id, wave_key, attempt)
            return False
        self._changed(run_id)
        return True

    def append_timeline(
        self, run_id: str, wave_key: str, attempt: int, status: str, note: str = "", at: str | None = None
    ) -> None:
        """Add one `{at, status, note}` entry to the attempt's timeline (e.g. a per-task scheduler event)."""
        try:
            self._update(
                run_id,
                wave_sk(wave_key, attempt),
                "SET timeline = list_append(if_not_exists(timeline, :empty), :entry)",
                {":empty": {"L": []}, ":entry": self._timeline_value(status, note, at)},
                "attribute_exists(pk)",
            )
        except ClientError as exc:
            self._missing_or(exc, run_id, wave_key, attempt)
            return
        self._changed(run_id)

    def active_waves(self, limit: int | None = None, fields: Iterable[str] | None = None) -> list[WaveAttempt]:
        """Every non-terminal wave attempt of every run: one Query on the sparse `active` index.

        `fields`: read only these attributes (a ProjectionExpression; the others take their defaults, so
        the attempts are partial: for reading, never for writing back). The watch pass reads
        `WATCH_FIELDS`: a running attempt's timeline grows with every scheduler event, and every attribute
        read is bytes on the wire and parse time per wave (DynamoDB still counts the whole item against the
        Query's 1 MB page and its read units)."""
        extra: dict[str, Any] = {}
        if fields is not None:
            names = {f"#f{i}": name for i, name in enumerate(sorted(set(fields)))}
            extra = {"ProjectionExpression": ", ".join(names), "ExpressionAttributeNames": names}
        items = self._query(
            limit=limit,
            IndexName=ACTIVE_INDEX,
            KeyConditionExpression="active_pk = :p",
            ExpressionAttributeValues={":p": {"S": ACTIVE}},
            **extra,
        )
        return [WaveAttempt.from_item(i) for i in items]

    # ------------------------------------------------------------------------------------------ the watch's own

    # Items about the stack rather than a run, under pk `STACK` (a run's pk is `RUN#…`: no run id reaches it).
    def _stack_key(self, sk: str) -> dict[str, Any]:
        return {"pk": {"S": STACK_PK}, "sk": {"S": sk}}

    def take_watch_lease(self, holder: str, seconds: float) -> bool:
        """One watch tick at a time: True when `holder` now holds the lease for `seconds` (nobody held it, or
        the holder's lease ran out: a tick killed at its timeout frees it by its own expiry). A conditional
        PutItem, so of two ticks racing exactly one wins; the other leaves the pass to it."""
        now = time.time()
        try:
            self.client.put_item(
                TableName=self.table_name,
                Item={**self._stack_key(WATCH_LEASE_SK), "holder": {"S": holder},
                      "lease_until": {"N": f"{now + max(0.0, seconds):.3f}"}},
                ConditionExpression="attribute_not_exists(pk) OR lease_until < :now",
                ExpressionAttributeValues={":now": {"N": f"{now:.3f}"}},
            )
        except ClientError as exc:
            if _conditional_failed(exc):
                return False
            raise
        return True

    def release_watch_lease(self, holder: str) -> None:
        """End `holder`'s lease now (an UpdateItem, conditional on still holding it: a later tick's is kept)."""
        try:
            self.client.update_item(
                TableName=self.table_name, Key=self._stack_key(WATCH_LEASE_SK),
                UpdateExpression="SET lease_until = :zero", ConditionExpression="holder = :holder",
                ExpressionAttributeValues={":zero": {"N": "0"}, ":holder": {"S": holder}},
            )
        except ClientError as exc:
            if not _conditional_failed(exc):
                raise

    def record_scheduler_outage(self, message: str) -> str:
        """The watch could not reach the scheduler: keep when that began (the first failure of this outage) and
        the latest reason; returns since when. Cleanup names it in a timed-out state's error."""
        item = self.client.update_item(
            TableName=self.table_name, Key=self._stack_key(OUTAGE_SK),
            UpdateExpression="SET since = if_not_exists(since, :now), last_error = :message, last_at = :now",
            ExpressionAttributeValues={":now": {"S": utc_now()}, ":message": {"S": message[:500]}},
            ReturnValues="ALL_NEW",
        )["Attributes"]
        return str(item["since"]["S"])

    def scheduler_outage(self) -> tuple[str, str] | None:
        """(since, last error) of the scheduler outage in progress, or None."""
        item = self.client.get_item(TableName=self.table_name, Key=self._stack_key(OUTAGE_SK),
                                    ConsistentRead=True).get("Item")
        if not item or "since" not in item:
            return None
        return str(item["since"]["S"]), str(item.get("last_error", {}).get("S", ""))

    def clear_scheduler_outage(self) -> None:
        """The scheduler answered again (an UpdateItem: the functions' roles hold no DeleteItem)."""
        self.client.update_item(TableName=self.table_name, Key=self._stack_key(OUTAGE_SK),
                                UpdateExpression="REMOVE since, last_error, last_at")

    # ------------------------------------------------------------------------------------------ decisions

    def record_decision(
        self,
        run_id: str,
        state: str,
        loops_key: str = "",
        *,
        uri: str,
        raw: str | None = None,
        decision: str | None = None,
        source: DecisionSource = "artifact",
        error: str | None = None,
        read_at: str | None = None,
    ) -> DecisionRecord:
        """Append one decision read (next `seq` for this state and loops key; concurrent readers each get
        their own seq). `raw` is truncated to 2000 characters."""
        for _ in range(_DECISION_SEQ_TRIES):
            latest = next(
                self._query(
                    limit=1,
                    KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
                    ExpressionAttributeValues={
                        ":pk": {"S": run_pk(run_id)},
                        ":prefix": {"S": decision_prefix(state, loops_key)},
                    },
                    ScanIndexForward=False,
                    ConsistentRead=True,
                ),
                None,
            )
            seq = DecisionRecord.from_item(latest).seq + 1 if latest else 1
            record = DecisionRecord(
                run_id=run_id,
                state=state,
                loops_key=loops_key,
                seq=seq,
                uri=uri,
                raw=raw,
                decision=decision,
                source=source,
                error=error,
                read_at=read_at or utc_now(),
                expires_at=self._expires_at(),
            )
            try:
                self.client.put_item(
                    TableName=self.table_name, Item=record.to_item(), ConditionExpression="attribute_not_exists(pk)"
                )
                return record
            except ClientError as exc:
                if not _conditional_failed(exc):
                    raise
        raise LedgerConflict(f"could not record a decision of {state!r} in run {run_id!r}: too much contention")

    def decisions(self, run_id: str, state: str | None = None) -> list[DecisionRecord]:
        """Every decision read of the run (or of one state), by state, loops key, then seq."""
        prefix = "DECISION#" if state is None else f"DECISION#{key_part(state)}#"
        items = self._query(
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            ExpressionAttributeValues={":pk": {"S": run_pk(run_id)}, ":prefix": {"S": prefix}},
            ConsistentRead=True,
        )
        return [DecisionRecord.from_item(i) for i in items]

    # ------------------------------------------------------------------------------------------ watermarks

    def put_watermark(self, watermark: Watermark) -> bool:
        """Write the latest observation of a trigger. A waiting watermark (token, not satisfied) is in the
        `active` index under `TRIGGER`; writing `satisfied=True` or no token takes it out.

        Never overwrites a satisfied watermark: returns False then. So when the S3 event and the watch
        pass both see enough objects, exactly one gets True and completes the task token.
        """
        waiting = bool(watermark.task_token) and not watermark.satisfied
        watermark = watermark.model_copy(update={"expires_at": None if waiting else self._expires_at()})
        try:
            self.client.put_item(
                TableName=self.table_name,
                Item=watermark.to_item(),
                ConditionExpression="attribute_not_exists(pk) OR satisfied = :false",
                ExpressionAttributeValues={":false": {"BOOL": False}},
            )
        except ClientError as exc:
            if _conditional_failed(exc):
                return False
            raise
        return True

    def watermark(self, run_id: str, state: str, loops_key: str = "") -> Watermark | None:
        item = self._get(run_id, watermark_sk(state, loops_key))
        return Watermark.from_item(item) if item else None

    def active_watches(self, limit: int | None = None) -> list[Watermark]:
        """Every trigger still waiting, across runs: one Query on the `active` index."""
        items = self._query(
            limit=limit,
            IndexName=ACTIVE_INDEX,
            KeyConditionExpression="active_pk = :p",
            ExpressionAttributeValues={":p": {"S": TRIGGER}},
        )
        return [Watermark.from_item(i) for i in items]
