"""Where the console reads runs from, through the read paths the CLI already has:

- `LocalSource`: the runs `npa-workflow run` kept under the local home (`cli.local_runs`: meta.json, report.json,
  the run's ledger file read as `status` reads it). A change is seen from the ledger file's and the run's two
  JSON files' sizes and times (a few `stat`s, no item read); read-only (a local run stops with Ctrl-C where it
  runs, and continues with `run --resume`).
- `StackSource`: a `serve` stack (`--endpoint`) or a deployed one (`--stack`), through `stack_client.StackClient`
  (its ledger, its frozen specs, cancel and resume). Inside `serve` the durable layer tells of every ledger
  write (`embedded_aws.durable_aws.DurableAws.item_written`), so a run is read when it changed; from another process a
  run is read once per poll interval, shared by every viewer (`console.watch`).

`read(run_id)` is the one ledger read of a run (it counts them: `reads`); everything a page shows of a run is
built from its result.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RUN_PK_PREFIX = "RUN#"


@dataclass
class RunData:
    """One read of a run: its report (the shape of `run --json`) and its spec (None when unreadable)."""

    report: dict[str, Any]
    loaded: Any
    console_link: str = ""  # the execution in the Step Functions console (a deployed stack)


class ActionRefused(Exception):
    """Cancel or resume could not be done here (the message says why and what to do)."""


class _Counting:
    def __init__(self) -> None:
        self.reads: dict[str, int] = {}
        self._reads_lock = threading.Lock()

    def _count(self, run_id: str) -> None:
        with self._reads_lock:
            self.reads[run_id] = self.reads.get(run_id, 0) + 1


class LocalSource(_Counting):
    kind = "local"
    can_act = False
    poll_seconds = 0.1  # how often a watched run's files are stat'ed (a change is read within this)

    def __init__(self, home: Path) -> None:
        super().__init__()
        self.home = Path(home)
        self._rows: dict[str, tuple[int, dict[str, str]]] = {}  # run id → (meta.json mtime_ns, its row)
        self._followers: dict[str, Any] = {}
        self._specs: dict[str, Any] = {}

    def describe(self) -> str:
        return f"local runs under {self.home / 'runs'}"

    def runs(self) -> list[dict[str, str]]:
        """Every local run, newest first; a meta.json is re-read only when it changed (10,000 runs: stats)."""
        from npa_workflow.cli.local_runs import local_run_row

        root = self.home / "runs"
        seen: dict[str, tuple[int, dict[str, str]]] = {}
        try:
            entries = list(os.scandir(root))
        except OSError:
            entries = []
        for entry in entries:
            meta = Path(entry.path) / "meta.json"
            try:
                mtime = meta.stat().st_mtime_ns
            except OSError:
                continue
            cached = self._rows.get(entry.name)
            row = cached[1] if cached and cached[0] == mtime and cached[1]["status"] not in ("RUNNING",
                                                                                            "INTERRUPTED") else None
            if row is None:
                row = local_run_row(meta)
                if row is None:
                    continue
            seen[entry.name] = (mtime, row)
        self._rows = seen
        rows = [row for _, row in seen.values()]
        rows.sort(key=lambda r: (r["started_at"], r["run_id"]), reverse=True)
        return rows

    def current_states(self, run_id: str) -> list[str]:
        from npa_workflow.embedded_aws.durable_aws import run_ledger_items

        items = run_ledger_items(self.home / "runs" / run_id) or []
        return _running_states(items)

    def change_token(self, run_id: str) -> Hashable:
        from npa_workflow.embedded_aws.durable_aws import RUN_STATE_DIR, STATE_FILE

        run_dir = self.home / "runs" / run_id
        token = []
        for path in (run_dir / RUN_STATE_DIR / STATE_FILE, run_dir / RUN_STATE_DIR / f"{STATE_FILE}-wal",
                     run_dir / "meta.json", run_dir / "report.json"):
            try:
                st = path.stat()
                token.append((st.st_mtime_ns, st.st_size))
            except OSError:
                token.append(None)
        return tuple(token)

    def read(self, run_id: str) -> RunData | None:
        from npa_workflow.cli.local_runs import LocalRunFollower, local_run_dir
        from npa_workflow.cli.logs import local_run_spec

        run_dir = local_run_dir(self.home, run_id)
        if run_dir is None:
            return None
        follower = self._followers.get(run_id)
        if follower is None:
            follower = self._followers[run_id] = LocalRunFollower(run_dir)
        self._count(run_id)
        report = follower.report()
        if report is None:
            return None
        if run_id not in self._specs:  # the graph's spec, once per run (its file as the run's meta.json names it)
            self._specs[run_id] = local_run_spec(run_dir)
        return RunData(report, self._specs[run_id])

    def log_sources(self, run_id: str) -> list[Any]:
        from npa_workflow.cli.logs import local_run_sources

        try:
            return local_run_sources(run_id, self.home)
        except LookupError:
            return []

    def cancel(self, run_id: str) -> None:
        raise ActionRefused(f"run {run_id} is a local `npa-workflow run`: stop it with Ctrl-C in its terminal (the "
                            "console acts on a stack: --endpoint URL or --stack NAME)")

    def resume(self, run_id: str) -> None:
        raise ActionRefused(f"run {run_id} is a local `npa-workflow run`: continue it with `npa-workflow run SPEC "
                            f"--run-id {run_id} --resume`")


def _running_states(items: list[dict[str, Any]]) -> list[str]:
    states = []
    for item in items:
        if item.get("kind", {}).get("S") != "WAVE":
            continue
        status = item.get("status", {}).get("S", "")
        state = item.get("state", {}).get("S", "")
        if status in ("PENDING", "LAUNCHING", "RUNNING") and state and state not in states:
            states.append(state)
    return states


class StackSource(_Counting):
    """A stack through its client. `notified`: this process hears of the ledger's writes (serve's own console)."""

    can_act = True

    def __init__(self, client: Any, *, kind: str, poll_seconds: float = 1.0, notified: bool = False,
                 region: str = "") -> None:
        super().__init__()
        self.client = client
        self.kind = kind
        self.poll_seconds = poll_seconds
        self.notified = notified
        self.region = region
        self._specs: dict[str, Any] = {}
        self._listing: tuple[float, list[dict[str, str]]] = (0.0, [])
        self._versions: dict[str, int] = {}  # run id → writes heard of (notified only)
        self._changed = threading.Condition()

    def describe(self) -> str:
        return f"the stack at {self.client.endpoint_url}" if self.client.endpoint_url else "the deployed stack"

    # -------------------------------------------------------------------------------- change signal
    def item_listener(self, table: str, key: dict[str, Any], item: dict[str, Any] | None) -> None:
        """For `DurableAws.item_written`: runs inside moto's write lock, so it only bumps a counter."""
        pk = str(key.get("pk", {}).get("S", ""))
        if pk.startswith(RUN_PK_PREFIX):
            self.poke(pk[len(RUN_PK_PREFIX):])

    def poke(self, run_id: str) -> None:
        """The run's page must be read again (a ledger write, or an action's outcome to show)."""
        with self._changed:
            self._versions[run_id] = self._versions.get(run_id, 0) + 1
            self._changed.notify_all()

    def change_token(self, run_id: str) -> Hashable:
        if not self.notified:
            return None  # no signal from another process: the watcher reads once per interval
        return self._versions.get(run_id, 0)

    def wait_change(self, run_id: str, seen: Hashable, timeout: float) -> None:
        """Block until the run's write counter moves past `seen` (notified sources), at most `timeout`."""
        with self._changed:
            self._changed.wait_for(lambda: self._versions.get(run_id, 0) != seen, timeout)

    # -------------------------------------------------------------------------------- runs
    def runs(self) -> list[dict[str, str]]:
        at, rows = self._listing
        if time.monotonic() - at < 1.0:  # one listing per second, whoever asks (the RUNS index, newest first)
            return rows
        rows = [{"run_id": r.run_id, "workflow": r.workflow, "status": r.status.value, "started_at": r.started_at,
                 "ended_at": r.ended_at or ""} for r in self.client.list_runs(10_000)]
        self._listing = (time.monotonic(), rows)
        return rows

    def current_states(self, run_id: str) -> list[str]:
        return sorted({w.state for w in self.client.ledger.open_attempts(run_id)})

    def _spec(self, run_id: str) -> Any:
        if run_id not in self._specs:
            from npa_workflow.adapters.s3_store import S3Store
            from npa_workflow.engine.runs import RunStore

            try:
                self._specs[run_id] = RunStore(S3Store(self.client.s3), self.client.bucket).load(run_id).loaded
            except Exception:  # noqa: BLE001 - without the frozen spec the page shows the waves, no graph
                return None
        return self._specs[run_id]

    def read(self, run_id: str) -> RunData | None:
        from npa_workflow.ledger import RunRecord
        from npa_workflow.run_report import build_report, ledger_items

        self._count(run_id)
        items = ledger_items(self.client.ledger, run_id)
        runs = [RunRecord.from_item(i) for i in items if i.get("kind", {}).get("S") == "RUN"]
        if not runs:
            return None
        record = runs[0]
        loaded = self._spec(run_id)
        status = record.status.value
        if status == "RUNNING" and not self.client.endpoint_url and self.client.execution_status(record) == "SUCCEEDED":
            status = "SUCCEEDED"  # a cloud stack records no SUCCEEDED in the ledger
        if loaded is None:
            report = {"run_id": run_id, "workflow": record.workflow, "status": status,
                      "error": record.error.model_dump() if record.error else None, "waves": [], "decisions": [],
                      "watermarks": [], "execution_arn": record.execution_arn or ""}
        else:
            report = build_report(run_id=run_id, workflow=record.workflow, loaded=loaded, status=status,
                                  items=items, execution_arn=record.execution_arn or "")
        return RunData(report, loaded, self._console_link(record.execution_arn or ""))

    def _console_link(self, arn: str) -> str:
        if not arn or self.client.endpoint_url:
            return ""
        region = arn.split(":")[3] if arn.count(":") >= 4 else self.region
        return f"https://{region}.console.aws.amazon.com/states/home?region={region}#/v2/executions/details/{arn}"

    def log_sources(self, run_id: str) -> list[Any]:
        from npa_workflow.cli.logs import logs_home, stack_sources

        return stack_sources(self.client, run_id, logs_home())

    def cancel(self, run_id: str) -> None:
        self._act(lambda: self.client.cancel(run_id, timeout=120.0))

    def resume(self, run_id: str) -> None:
        self._act(lambda: self.client.resume(run_id))

    def _act(self, call: Callable[[], Any]) -> None:
        from npa_workflow.cli.stack import _stack_problem

        try:
            call()
        except Exception as exc:
            problem = _stack_problem(exc, self.client.endpoint_url)
            if problem is None:
                raise
            raise ActionRefused(str(problem)) from None

