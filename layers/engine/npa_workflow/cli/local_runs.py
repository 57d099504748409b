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
    from npa_workflow.local.durable_aws import RUN_STATE_DIR, held_elsewhere

    return "RUNNING" if held_elsewhere(run_dir / RUN_STATE_DIR) else "INTERRUPTED"


def no_report_yet(run_id: str) -> str:
    """Why a local run has no report, and how to go on: what `status` and `graph --run` say."""
    return (f"local run {run_id!r} has no report yet: it is running (its `run` shows it live) or its process was "
            f"killed (fix: `npa-workflow run SPEC --run-id {run_id} --resume` continues it)")


def local_runs(home: Path, limit: int) -> list[dict[str, str]]:
    """The local runs, newest first: run id, workflow, the latest execution's status, when the run started."""
    rows = []
    for meta_path in (home / "runs").glob("*/meta.json"):
        meta = _read_json(meta_path)
        if not isinstance(meta, dict):
            continue
        executions = [e for e in meta.get("executions") or [] if isinstance(e, dict)]
        latest = executions[-1] if executions else {}
        rows.append({"run_id": meta_path.parent.name, "workflow": str(meta.get("workflow", "")),
                     "status": str(latest.get("status") or _unended(meta_path.parent)),
                     "started_at": str(executions[0].get("started_at", "")) if executions else ""})
    rows.sort(key=lambda r: (r["started_at"], r["run_id"]), reverse=True)
    return rows[:limit]
