"""The embedded AWS survives its process: moto's DynamoDB items and S3 objects, written through to disk.

moto keeps every resource in this process's memory. A local run must outlive the process (kill -9, Ctrl-C, a
failure then `--resume`; `serve` restarted on the same home), so :class:`DurableAws` hooks the few moto backend
methods every mutation goes through and, before the request that made the change is answered, records the
result under a state directory:

- ``state.sqlite`` (WAL): one row per DynamoDB item (table, key → the item as DynamoDB JSON) and per S3 object
  (bucket, key → the name of its body file), plus the buckets;
- ``s3/<hash>``: each object's body (written to a temporary file, then renamed over the old one).

A write that returned to its caller is on disk: the kernel has it, so it survives the process being killed.
(SQLite runs with ``synchronous=NORMAL``: a power loss may lose the last writes; a process crash cannot.)

:meth:`DurableAws.restore_objects` and :meth:`DurableAws.restore_items` put everything back into a fresh moto
before anything runs, straight into the backends (no HTTP round trip per item), with the journal paused.
Execution records are not kept: moto's Step Functions interpreter cannot be resumed, so a resumed run is a new
execution replaying the ledger's waves.

Kept: item attributes and object bodies. Not kept: S3 metadata, tags, noncurrent versions (a restore writes each
object's last body as a new version),
table schemas (the stack deploys the ledger table before restoring).

The DynamoDB hooks also serialize writes: DynamoDB applies a conditional write atomically per item; moto's
server checks the condition and writes without a lock, each request on its own thread. The ledger's launch lock
and "only the first finish counts" rely on that atomicity. And they keep reads apart from a write's change:
DynamoDB gives reads read-committed isolation ("read operations always return committed values for an item",
developer guide, HowItWorks.ReadConsistency): a read sees the item before or after a write. moto iterates a
partition's and an item's dicts as another thread's write changes them and answers 500 ("dictionary changed size
during iteration", a traceback on the stack's stderr). A read waits only for moto's change, not for its record on disk.

Seams (moto 5.2.5, the version `embedded_aws.moto_lambda` refuses to run without):
``DynamoDBBackend.put_item/update_item/delete_item/transact_write_items`` (``batch_write_item`` calls put/delete),
``DynamoHandler.call_action`` for the read actions (``READ_ACTIONS``: the handler's whole answer, serialization
included), ``S3Backend.put_object`` (multipart completion and copy call it) and ``S3Backend.delete_object``
(``delete_objects`` calls it), ``S3Backend.create_bucket``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

__all__ = ["HANDOFF_WAIT_S", "RUN_STATE_DIR", "DurableAws", "StateInUse", "durable_aws", "held_elsewhere",
           "run_ledger_items"]

LOG = logging.getLogger(__name__)
ACCOUNT = "123456789012"  # moto's default account: what the servers' clients use
REGION = "us-east-1"
STATE_FILE = "state.sqlite"
RUN_STATE_DIR = "aws"  # runs/<run-id>/aws: a local run's stack
# The DynamoDB actions that iterate moto's tables and items to answer (X-Amz-Target names; batch and transact
# reads call the backend's get_item): held apart from a write's change.
READ_ACTIONS = frozenset({"GetItem", "BatchGetItem", "Query", "Scan", "TransactGetItems"})
_SCHEMA = """
create table if not exists items (tbl text not null, key text not null, item text not null, primary key (tbl, key));
create table if not exists objects (bucket text not null, key text not null, body text not null,
                                    primary key (bucket, key));
create table if not exists buckets (name text primary key);
create table if not exists delivered (source text not null, ident text not null, version text not null,
                                      primary key (source, ident));
"""


class StateInUse(RuntimeError):
    """Another process's stack holds this state directory."""


def _lock_path(root: Path) -> Path:
    return Path(root) / "lock"


# The flock belongs to the lock file's open file description, and a process forked from the holder shares it until
# its exec closes the descriptor (every descriptor here is close-on-exec). A runtime killed while it was starting a
# process (the executor starts the next job's wrapper ahead, on a thread, right after each launch) leaves that
# child holding the lock for the moments until its exec: milliseconds, more on a loaded machine. Whoever takes the
# state over from a runtime that just died (`--resume` after kill -9) waits this long for such a handoff before it
# says the state is in use; a live holder keeps it far longer, so the answer is the same, only later.
HANDOFF_WAIT_S = 5.0
_HANDOFF_POLL_S = 0.05


def _take_flock(handle: Any, wait_s: float) -> bool:
    """An exclusive flock on ``handle``, retried for up to ``wait_s`` seconds; whether it was taken."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(_HANDOFF_POLL_S)


def held_elsewhere(root: Path, wait_s: float = 0.0) -> bool:
    """Whether a live process holds the state in ``root`` (its stack is running). ``wait_s``: how long a holder
    may take to let go before the answer is yes (`HANDOFF_WAIT_S` when taking over from a runtime that just died;
    0 for a listing, which only reports)."""
    path = _lock_path(root)
    if not path.is_file():
        return False
    with open(path) as handle:  # read-only: flock needs no write access, and a read-only home can be asked too
        if not _take_flock(handle, wait_s):
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
    return False


class DurableAws:
    """The durable state of one embedded AWS, in ``root`` (see the module doc). One process at a time holds it
    (an flock on ``root/lock``, released by the kernel when the process dies, kill -9 included, and any child it
    was forking has exec'd; taking it waits ``wait_s`` for that handoff, see `HANDOFF_WAIT_S`)."""

    def __init__(self, root: Path, wait_s: float = HANDOFF_WAIT_S) -> None:
        self.root = Path(root)
        self.bodies = self.root / "s3"
        self.bodies.mkdir(parents=True, exist_ok=True)
        self._lock_file = open(_lock_path(self.root), "a+")  # noqa: SIM115 - held for the stack's life
        if not _take_flock(self._lock_file, wait_s):
            self._lock_file.close()
            raise StateInUse(f"{self.root} is in use by another npa-workflow process (stop that run or serve, or "
                             "use another NPA_WORKFLOW_HOME)") from None
        self._db = sqlite3.connect(self.root / STATE_FILE, check_same_thread=False, isolation_level=None)
        self._db.execute("pragma journal_mode=wal")
        self._db.execute("pragma synchronous=normal")
        self._db.executescript(_SCHEMA)
        self._lock = threading.RLock()  # one writer: the sqlite connection and moto's DynamoDB writes
        self._paused = threading.local()
        self._closed = False
        # The first write the disk refused (full, read-only): the runtime stops on it (local.runtime), resumable.
        self.storage_fault: BaseException | None = None
        self.item_writes = 0  # grows with every DynamoDB write recorded: a reader knows when to look again
        self._item_listeners: list[Callable[[str, dict[str, Any], dict[str, Any] | None], None]] = []
        self._object_listeners: list[Callable[[str, str, str, int, str | None], None]] = []

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._db.close()
            self._lock_file.close()  # releases the flock

    # ------------------------------------------------------------------------------------------ recording
    def _recording(self) -> bool:
        # After close, a straggling moto thread (an execution being stopped) writes to a stack that is going away.
        return not self._closed and not getattr(self._paused, "on", False)

    @contextlib.contextmanager
    def _noting_storage_faults(self) -> Iterator[None]:
        try:
            yield
        except (sqlite3.OperationalError, OSError) as exc:
            from npa_workflow.storage_errors import is_storage_fault

            if self.storage_fault is None and is_storage_fault(exc):
                self.storage_fault = exc
            raise

    def record_item(self, table: str, key: dict[str, Any], item: dict[str, Any] | None) -> None:
        with self._noting_storage_faults():
            self._record_item(table, key, item)

    def _record_item(self, table: str, key: dict[str, Any], item: dict[str, Any] | None) -> None:
        key_text = json.dumps(key, sort_keys=True)
        with self._lock:
            if self._closed:
                return
            if item is None:
                self._db.execute("delete from items where tbl = ? and key = ?", (table, key_text))
            else:
                self._db.execute("insert or replace into items values (?, ?, ?)",
                                 (table, key_text, json.dumps(item, sort_keys=True)))
            self.item_writes += 1
            for listener in self._item_listeners:
                try:
                    listener(table, key, item)
                except Exception as exc:  # noqa: BLE001 - a listener's trouble must not fail the write it heard of
                    # the type only: a message may quote the item, and a ledger item holds a task token
                    LOG.warning("durable AWS: an item listener failed on a %s write: %s", table, type(exc).__name__)

    @contextlib.contextmanager
    def item_written(self, listener: Callable[[str, dict[str, Any], dict[str, Any] | None], None]) -> Iterator[None]:
        """While active, `listener(table, key, item)` (DynamoDB JSON; item None: deleted) hears of every item
        write once it is recorded, on the writing thread, before moto answers the request that made it. It must be
        quick and must not call the stack (it runs inside moto's write lock)."""
        with self._lock:
            self._item_listeners.append(listener)
        try:
            yield
        finally:
            with self._lock:
                self._item_listeners.remove(listener)

    @contextlib.contextmanager
    def object_written(self, listener: Callable[[str, str, str, int, str | None], None]) -> Iterator[None]:
        """While active, `listener(bucket, key, etag, size, version_id)` hears of every object stored (a PUT, a copy,
        a completed multipart upload; `version_id` None in an unversioned bucket) once it is recorded, on the writing
        thread, before moto answers: the stack's S3 event source without listing buckets. Quick, and no call to the
        stack (it runs inside the writers' lock)."""
        with self._lock:
            self._object_listeners.append(listener)
        try:
            yield
        finally:
            with self._lock:
                self._object_listeners.remove(listener)

    def object_stored(self, bucket: str, key: str, etag: str, size: int, version_id: str | None = None) -> None:
        with self._lock:
            listeners = list(self._object_listeners)
        for listener in listeners:
            try:
                listener(bucket, key, etag, size, version_id)
            except Exception as exc:  # noqa: BLE001 - a listener's trouble must not fail the write it heard of
                LOG.warning("durable AWS: an object listener failed: %s", type(exc).__name__)

    def items(self, table: str) -> list[tuple[str, str]]:
        """Every recorded item of `table` as (key JSON, item JSON), both DynamoDB JSON with sorted keys: what
        moto holds (every write is recorded before its request is answered), read without a request to it."""
        with self._lock:
            return list(self._db.execute("select key, item from items where tbl = ?", (table,)))

    def record_object(self, bucket: str, key: str, body: bytes | None) -> None:
        with self._noting_storage_faults():
            self._record_object(bucket, key, body)

    def _record_object(self, bucket: str, key: str, body: bytes | None) -> None:
        name = hashlib.sha256(f"{bucket}\0{key}".encode()).hexdigest()
        path = self.bodies / name
        with self._lock:
            if self._closed:
                return
            if body is None:
                self._db.execute("delete from objects where bucket = ? and key = ?", (bucket, key))
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
                return
            tmp = path.with_name(f"{name}.{threading.get_ident()}.tmp")
            tmp.write_bytes(body)
            os.replace(tmp, path)
            self._db.execute("insert or replace into objects values (?, ?, ?)", (bucket, key, name))

    def record_bucket(self, name: str) -> None:
        with self._lock:
            if self._closed:
                return
            self._db.execute("insert or ignore into buckets values (?)", (name,))

    # ------------------------------------------------------------------------------------------ restore
    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """This thread's writes are not recorded (restoring what is already recorded)."""
        self._paused.on = True
        try:
            yield
        finally:
            self._paused.on = False

    def counts(self) -> dict[str, int]:
        with self._lock:
            return {name: self._db.execute(f"select count(*) from {name}").fetchone()[0]  # noqa: S608 - fixed names
                    for name in ("items", "objects", "buckets")}

    def restore_objects(self) -> int:
        """Put every recorded bucket and object back into this process's moto (before the stack deploys: what it
        deploys then wins over what was kept). Returns the number of objects."""
        from moto.s3.models import s3_backends

        s3 = s3_backends[ACCOUNT]["global"]
        with self._lock:
            buckets = [row[0] for row in self._db.execute("select name from buckets")]
            objects = list(self._db.execute("select bucket, key, body from objects"))
        restored = 0
        with self.paused():
            for name in dict.fromkeys(buckets + [bucket for bucket, _, _ in objects]):
                if name not in s3.buckets:
                    s3.create_bucket(name, REGION)
            for bucket, key, body in objects:
                try:
                    value = (self.bodies / body).read_bytes()
                except FileNotFoundError:  # recorded, then deleted by a process killed in between
                    LOG.warning("durable S3: the body of s3://%s/%s is missing; skipped", bucket, key)
                    continue
                s3.put_object(bucket, key, value, disable_notification=True)
                restored += 1
        return restored

    def restore_items(self) -> int:
        """Put every recorded DynamoDB item back (after the stack created its tables). Returns the number."""
        from moto.dynamodb.models import dynamodb_backends

        dynamodb = dynamodb_backends[ACCOUNT][REGION]
        with self._lock:
            items = list(self._db.execute("select tbl, item from items"))
        restored = 0
        with self.paused():
            for table, item in items:
                try:
                    dynamodb.put_item(table, json.loads(item))
                except Exception as exc:  # noqa: BLE001 - a table this stack no longer deploys
                    LOG.warning("durable DynamoDB: cannot restore an item of table %s: %s", table, exc)
                    continue
                restored += 1
        return restored

    # ------------------------------------------------------------------------------------------ event cursor
    def record_delivered(self, source: str, ident: str, version: str) -> None:
        """An event source's cursor: `ident` (e.g. an S3 object) was delivered at `version` (its ETag)."""
        with self._lock:
            if not self._closed:
                self._db.execute("insert or replace into delivered values (?, ?, ?)", (source, ident, version))

    def delivered(self, source: str) -> dict[str, str]:
        with self._lock:
            return dict(self._db.execute("select ident, version from delivered where source = ?", (source,)))


def run_ledger_items(run_dir: Path) -> list[dict[str, Any]] | None:
    """The ledger items (DynamoDB JSON) of the local run kept in `run_dir` (`runs/<run-id>/`, whose stack holds
    one table), read without moto: another process may read them while the run goes (WAL: every committed
    write). None when no run is kept there; `ledger.json` is what runs wrote before the stack was durable."""
    path = Path(run_dir) / RUN_STATE_DIR / STATE_FILE
    if not path.is_file():
        legacy = Path(run_dir) / "ledger.json"
        return list(json.loads(legacy.read_text(encoding="utf-8")).get("items", [])) if legacy.is_file() else None
    try:
        return _read_items(path)
    except sqlite3.OperationalError:
        # A read-only home (or one whose WAL index this user cannot create): SQLite's reader of a WAL database
        # writes its `-shm` index. A copy of the database and its log, read in a temporary folder, holds every
        # committed write all the same.
        import shutil
        import tempfile

        with tempfile.TemporaryDirectory(prefix="npa-ledger-") as tmp:
            for suffix in ("", "-wal"):
                source = Path(f"{path}{suffix}")
                if source.is_file():
                    shutil.copyfile(source, Path(tmp) / f"{STATE_FILE}{suffix}")
            return _read_items(Path(tmp) / STATE_FILE)


def _read_items(path: Path) -> list[dict[str, Any]]:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return [json.loads(row[0]) for row in db.execute("select item from items")]
    finally:
        db.close()


def _item_key(table: Any, attrs: dict[str, Any]) -> dict[str, Any]:
    key = {table.hash_key_attr: attrs[table.hash_key_attr]}
    if table.range_key_attr:
        key[table.range_key_attr] = attrs[table.range_key_attr]
    return key


def _transact_keys(backend: Any, transact_items: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    keys = []
    for entry in transact_items:
        for op in ("Put", "Update", "Delete"):
            body = entry.get(op)
            if body:
                name = body["TableName"]
                keys.append((name, body["Key"] if op != "Put" else _item_key(backend.get_table(name), body["Item"])))
    return keys


@contextlib.contextmanager
def durable_aws(root: Path | None) -> Iterator[DurableAws | None]:
    """Serialize moto's DynamoDB writes and, when ``root`` is given, record every DynamoDB and S3 change there.

    Active (process-wide: moto's backends are) until the block ends.
    """
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.responses import DynamoHandler
    from moto.s3.models import S3Backend

    state = DurableAws(root) if root is not None else None
    lock = state._lock if state is not None else threading.RLock()  # writers: moto's change, then its record
    # moto's tables: one write's change or one whole read at a time (taken inside `lock`, never around it)
    tables = threading.RLock()
    originals: list[tuple[type, str, Any]] = []

    def record(backend: Any, keys: list[tuple[str, dict[str, Any]]]) -> None:
        if state is None or not state._recording():
            return
        for table_name, key in keys:
            found = backend.get_item(table_name, key)
            state.record_item(table_name, key, found.to_json()["Attributes"] if found is not None else None)

    def patch(cls: type, name: str, make: Any) -> None:
        original = cls.__dict__[name]
        originals.append((cls, name, original))
        setattr(cls, name, make(original))

    def put_item(original: Any) -> Any:
        def hooked(self: Any, table_name: str, item_attrs: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
            with lock:
                with tables:
                    result = original(self, table_name, item_attrs, *args, **kwargs)
                record(self, [(table_name, _item_key(self.get_table(table_name), item_attrs))])
                return result
        return hooked

    def keyed(original: Any) -> Any:  # update_item / delete_item (self, table_name, key, ...)
        def hooked(self: Any, table_name: str, key: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
            with lock:
                with tables:
                    result = original(self, table_name, key, *args, **kwargs)
                record(self, [(table_name, key)])
                return result
        return hooked

    def transact(original: Any) -> Any:
        def hooked(self: Any, transact_items: list[dict[str, Any]], *args: Any, **kwargs: Any) -> Any:
            with lock:
                with tables:
                    result = original(self, transact_items, *args, **kwargs)
                record(self, _transact_keys(self, transact_items))
                return result
        return hooked

    def call_action(original: Any) -> Any:
        def hooked(self: Any) -> Any:
            headers = self.headers  # the action's name, as DynamoDB's JSON protocol sends it
            target = str(headers.get("X-Amz-Target") or headers.get("x-amz-target") or "")
            if target.rpartition(".")[2] not in READ_ACTIONS:
                return original(self)
            with tables:
                return original(self)
        return hooked

    def put_object(original: Any) -> Any:
        def hooked(self: Any, bucket_name: str, key_name: str, value: bytes, *args: Any, **kwargs: Any) -> Any:
            # Under the writers' lock: two PUTs of one key must reach moto and the record in the same order,
            # or a restore would bring back the older body.
            with lock:
                result = original(self, bucket_name, key_name, value, *args, **kwargs)
                if state is not None and state._recording():
                    state.record_object(bucket_name, key_name, result.value)
                    version = getattr(result, "version_id", None)
                    state.object_stored(bucket_name, key_name, str(result.etag), int(result.size),
                                        None if version in (None, "null") else str(version))
                return result
        return hooked

    def delete_object(original: Any) -> Any:
        def hooked(self: Any, bucket_name: str, key_name: str, *args: Any, **kwargs: Any) -> Any:
            with lock:
                result = original(self, bucket_name, key_name, *args, **kwargs)
                if state is not None and state._recording() and key_name not in self.get_bucket(bucket_name).keys:
                    state.record_object(bucket_name, key_name, None)
                return result
        return hooked

    def create_bucket(original: Any) -> Any:
        def hooked(self: Any, bucket_name: str, *args: Any, **kwargs: Any) -> Any:
            result = original(self, bucket_name, *args, **kwargs)
            if state is not None and state._recording():
                state.record_bucket(bucket_name)
            return result
        return hooked

    patch(DynamoDBBackend, "put_item", put_item)
    patch(DynamoDBBackend, "update_item", keyed)
    patch(DynamoDBBackend, "delete_item", keyed)
    patch(DynamoDBBackend, "transact_write_items", transact)
    patch(DynamoHandler, "call_action", call_action)
    if state is not None:
        patch(S3Backend, "put_object", put_object)
        patch(S3Backend, "delete_object", delete_object)
        patch(S3Backend, "create_bucket", create_bucket)
    try:
        yield state
    finally:
        for cls, name, original in reversed(originals):
            setattr(cls, name, original)
        if state is not None:
            state.close()
