"""What `status` and `list` show without a stack: the runs `npa-workflow run` kept under the local home.

A local run keeps `<home>/runs/<run-id>/meta.json` (its spec, vars and executions, written as each execution
starts and ends) and, once an execution has ended, `report.json`: the report `run --json` printed, the same shape
`status --endpoint` builds from a stack. Nothing here starts the embedded AWS: these are two small files.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def local_run_dir(home: Path, run_id: str) -> Path | None:
    """The run's folder, if `run` kept one for this id (an id with a path in it names none)."""
    from npa_workflow.protocol.run_ids import run_id_problem

    if run_id_problem(run_id):
        return None
    run_dir = home / "runs" / run_id
    return run_dir if (run_dir / "meta.json").is_file() else None


def local_report(run_dir: Path) -> dict[str, Any] | None:
    """The report of the run's latest ended execution; None while none has ended (or it was killed first)."""
    report = _read_json(run_dir / "report.json")
    return report if isinstance(report, dict) and "waves" in report else None


def _unended(run_dir: Path) -> str:
    """An execution with no end recorded: RUNNING while a process holds the run's state (the runtime's lock),
    else INTERRUPTED (its process was killed: `run --resume` continues it), the word `gc` uses too."""
    from npa_workflow.embedded_aws.durable_aws import RUN_STATE_DIR, held_elsewhere

    return "RUNNING" if held_elsewhere(run_dir / RUN_STATE_DIR) else "INTERRUPTED"


def _ended(run_dir: Path) -> str:
    """The latest execution's status once it ended ("" before): the runtime writes it into meta.json when the
    execution ends, and report.json just after."""
    meta = _read_json(run_dir / "meta.json")
    executions = meta.get("executions") if isinstance(meta, dict) else None
    last = executions[-1] if executions and isinstance(executions[-1], dict) else {}
    return str(last.get("status") or "")


class LocalRunFollower:
    """What `status` shows of a local run: its report once its execution has ended, else (running, or its process
    killed) a report built from its ledger, read as `logs` reads it (SQLite in WAL mode: every committed write).
    The runtime's lock says whether a process still holds the run; it is probed at most every
    `lock_probe_seconds`, because a probe takes the lock for an instant and a `run --resume` starting in that
    instant would be refused."""

    def __init__(self, run_dir: Path, lock_probe_seconds: float = 5.0) -> None:
        self.run_dir = run_dir
        self.lock_probe_seconds = lock_probe_seconds
        self._probed_at = -lock_probe_seconds
        self._held = False
        self._loaded: Any = None

    def _still_held(self) -> bool:
        import time

        from npa_workflow.embedded_aws.durable_aws import RUN_STATE_DIR, held_elsewhere

        if time.monotonic() - self._probed_at >= self.lock_probe_seconds:
            self._held, self._probed_at = held_elsewhere(self.run_dir / RUN_STATE_DIR), time.monotonic()
        return self._held

    def report(self) -> dict[str, Any] | None:
        """The report now; None when the run kept neither a report nor a readable ledger and spec."""
        ended = _ended(self.run_dir)
        if ended and (done := local_report(self.run_dir)) is not None:
            return done
        from npa_workflow.cli.logs import local_run_spec
        from npa_workflow.embedded_aws.durable_aws import run_ledger_items
        from npa_workflow.run_report import build_report

        if self._loaded is None:
            self._loaded = local_run_spec(self.run_dir)
        items = run_ledger_items(self.run_dir)
        if items is None or self._loaded is None:
            return None
        status = ended or ("RUNNING" if self._still_held() else "INTERRUPTED")
        return build_report(run_id=self.run_dir.name, workflow=self._loaded.spec.name, loaded=self._loaded,
                            status=status, items=items, execution_arn="",
                            interrupted_reason="" if status != "INTERRUPTED" else
                            "its `npa-workflow run` ended before the run did (Ctrl-C or a kill): `run SPEC "
                            f"--run-id {self.run_dir.name} --resume` continues it")


def no_report_yet(run_id: str) -> str:
    """Why a local run has no report, and how to go on: what `status` and `graph --run` say."""
    return (f"local run {run_id!r} has no report yet: it is running (its `run` shows it live) or its process was "
            f"killed (fix: `npa-workflow run SPEC --run-id {run_id} --resume` continues it)")


def local_run_row(meta_path: Path) -> dict[str, str] | None:
    """One run's row of `list` (run id, workflow, the latest execution's status, when the run started and its
    latest execution ended) from its meta.json; None when that is unreadable."""
    meta = _read_json(meta_path)
    if not isinstance(meta, dict):
        return None
    executions = [e for e in meta.get("executions") or [] if isinstance(e, dict)]
    latest = executions[-1] if executions else {}
    return {"run_id": meta_path.parent.name, "workflow": str(meta.get("workflow", "")),
            "status": str(latest.get("status") or _unended(meta_path.parent)),
            "started_at": str(executions[0].get("started_at", "")) if executions else "",
            "ended_at": str(latest.get("ended_at") or "")}


def local_runs(home: Path, limit: int) -> list[dict[str, str]]:
    """The local runs, newest first: run id, workflow, the latest execution's status, when the run started."""
    rows = []
    for meta_path in (home / "runs").glob("*/meta.json"):
        row = local_run_row(meta_path)
        if row is not None:
            row.pop("ended_at")  # `list --json` keeps its four keys
            rows.append(row)
    rows.sort(key=lambda r: (r["started_at"], r["run_id"]), reverse=True)
    return rows[:limit]
