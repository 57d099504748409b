"""Prune old local runs: `npa-workflow gc` (dry run unless `yes=True`).

A local run keeps, under the local home, `runs/<run-id>/` (meta, report, handler logs and `aws/`, its stack's
DynamoDB items and S3 objects: `local.durable_aws`) and, per job of the run, `jobs/<job-id>.*` (the local
executor's record, log and exit files). A run is prunable when nothing has written to its folder for
`older_than_seconds` and no process holds it (`runs/<run-id>/aws/lock`, held by the runtime while the run goes):
a finished run, or an interrupted one nobody resumed. Its job files go with it; the job ids come from its ledger.
`serve`'s stack (`serve/`) is not pruned here: its runs are pruned with the stack folder itself.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from npa_workflow.local.durable_aws import RUN_STATE_DIR, held_elsewhere, run_ledger_items

__all__ = ["Prunable", "find_prunable", "prune"]


@dataclass(frozen=True)
class Prunable:
    run_id: str
    path: Path
    idle_seconds: float
    status: str
    bytes: int
    job_files: list[Path] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        return {"run_id": self.run_id, "path": str(self.path), "idle_days": round(self.idle_seconds / 86400, 2),
                "status": self.status, "bytes": self.bytes, "job_files": len(self.job_files)}


def _files(path: Path) -> list[Path]:
    return [p for p in path.rglob("*") if p.is_file()]


def _status(run_dir: Path) -> str:
    import json

    try:
        executions = json.loads((run_dir / "meta.json").read_text(encoding="utf-8")).get("executions") or []
    except (OSError, ValueError):
        return "UNKNOWN"
    last = executions[-1] if executions else {}
    return str(last.get("status") or "INTERRUPTED")


def _job_files(home: Path, run_dir: Path) -> list[Path]:
    try:
        items = run_ledger_items(run_dir) or []
    except Exception:  # noqa: BLE001 - a damaged ledger: the run folder still goes, its job files stay
        items = []
    job_ids = {item["job_id"]["S"] for item in items if "S" in item.get("job_id", {})}
    return sorted(p for job_id in job_ids for p in (home / "jobs").glob(f"{job_id}.*"))


def find_prunable(home: Path, older_than_seconds: float, now: float | None = None) -> list[Prunable]:
    now = time.time() if now is None else now
    found = []
    for run_dir in sorted((home / "runs").glob("*/")):
        files = _files(run_dir)
        newest = max((p.stat().st_mtime for p in files), default=run_dir.stat().st_mtime)
        idle = now - newest
        if idle < older_than_seconds or held_elsewhere(run_dir / RUN_STATE_DIR):
            continue
        found.append(Prunable(run_dir.name, run_dir, idle, _status(run_dir), sum(p.stat().st_size for p in files),
                              _job_files(home, run_dir)))
    return found


def prune(runs: list[Prunable]) -> None:
    for run in runs:
        if held_elsewhere(run.path / RUN_STATE_DIR):  # resumed since it was listed
            continue
        for path in run.job_files:
            path.unlink(missing_ok=True)
        shutil.rmtree(run.path, ignore_errors=True)
