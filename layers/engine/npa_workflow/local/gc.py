"""Prune old local runs: `npa-workflow gc` (dry run unless `yes=True`).

A local run keeps, under the local home, `runs/<run-id>/` (meta, report, handler logs and `aws/`, its stack's
DynamoDB items and S3 objects: `embedded_aws.durable_aws`) and, per job of the run, `jobs/<job-id>.*` (the local
executor's record, log and exit files). A run is prunable when nothing has written to its folder for
`older_than_seconds`, no process holds it (`runs/<run-id>/aws/lock`, held by the runtime while the run goes) and
none of its jobs still runs (a job left running by `--no-cancel-on-timeout`, or one that outlived its launcher,
keeps its record: without it nothing could find or cancel the job): a finished run, or an interrupted one nobody
resumed. Its job files go with it; the job ids come from its ledger.
`serve`'s stack (`serve/`) is not pruned here: its runs are pruned with the stack folder itself.

Staged step code (`<home>/code/<digest>/`, `local_jobs.code_checkout`: one copy per content of a steps folder, so
one per edit a developer runs) goes when no job record left after the prune started in it and it is as old as
`older_than_seconds`: `find_unused_code`.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from npa_workflow.embedded_aws.durable_aws import RUN_STATE_DIR, held_elsewhere, run_ledger_items

__all__ = ["Prunable", "UnusedCode", "find_prunable", "find_unused_code", "prune", "prune_code"]


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


def _job_ids(run_dir: Path) -> set[str]:
    try:
        items = run_ledger_items(run_dir) or []
    except Exception:  # noqa: BLE001 - a damaged ledger: the run folder still goes, its job files stay
        items = []
    return {item["job_id"]["S"] for item in items if "S" in item.get("job_id", {})}


def _job_files(home: Path, job_ids: set[str]) -> list[Path]:
    from npa_workflow.local_jobs.executor import job_files

    return sorted(p for job_id in job_ids for p in job_files(home / "jobs", job_id))


def _running_jobs(home: Path, job_ids: set[str]) -> bool:
    """Whether a local job of these still runs (the executor's own reading: a record of a dead job is ended)."""
    local = sorted(j for j in job_ids if (home / "jobs" / f"{j}.json").is_file())
    if not local:
        return False
    from npa_workflow.local_jobs.executor import LocalExecutor

    return any(not info.is_terminal for info in LocalExecutor(home).statuses(local).values())


def find_prunable(home: Path, older_than_seconds: float, now: float | None = None) -> list[Prunable]:
    now = time.time() if now is None else now
    found = []
    for run_dir in sorted((home / "runs").glob("*/")):
        files = _files(run_dir)
        newest = max((p.stat().st_mtime for p in files), default=run_dir.stat().st_mtime)
        idle = now - newest
        if idle < older_than_seconds or held_elsewhere(run_dir / RUN_STATE_DIR):
            continue
        job_ids = _job_ids(run_dir)
        if _running_jobs(home, job_ids):
            continue
        found.append(Prunable(run_dir.name, run_dir, idle, _status(run_dir), sum(p.stat().st_size for p in files),
                              _job_files(home, job_ids)))
    return found


def prune(runs: list[Prunable]) -> None:
    for run in runs:
        if held_elsewhere(run.path / RUN_STATE_DIR):  # resumed since it was listed
            continue
        for path in run.job_files:
            path.unlink(missing_ok=True)
        shutil.rmtree(run.path, ignore_errors=True)


@dataclass(frozen=True)
class UnusedCode:
    digest: str
    path: Path
    bytes: int

    def to_json(self) -> dict[str, object]:
        return {"digest": self.digest, "path": str(self.path), "bytes": self.bytes}


def _job_folders(home: Path, leaving: set[Path]) -> set[Path]:
    """The folders the job records that stay (not in `leaving`) started their jobs in."""
    import json

    folders = set()
    for record in (home / "jobs").glob("*.json"):
        if record in leaving:
            continue
        try:
            cwd = json.loads(record.read_text(encoding="utf-8")).get("cwd")
        except (OSError, ValueError):
            continue  # a record being written, or damaged: it names no folder to keep
        if isinstance(cwd, str) and cwd:
            folders.add(Path(cwd))
    return folders


def find_unused_code(home: Path, older_than_seconds: float, pruned: list[Prunable],
                     now: float | None = None) -> list[UnusedCode]:
    """Checkouts of staged code no job keeps (once `pruned` is gone), staged at least `older_than_seconds` ago."""
    from npa_workflow.local_jobs.code_checkout import CHECKOUTS
    from npa_workflow.render.code import MANIFEST

    now = time.time() if now is None else now
    root = home / CHECKOUTS
    if not root.is_dir():
        return []
    used = _job_folders(home, {p for run in pruned for p in run.job_files})
    found = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        try:
            staged = (folder / MANIFEST).stat().st_mtime
        except OSError:
            continue  # not a complete checkout: another process may be writing it
        if now - staged < older_than_seconds or any(f == folder or folder in f.parents for f in used):
            continue
        found.append(UnusedCode(folder.name, folder, sum(p.stat().st_size for p in _files(folder))))
    return found


def prune_code(unused: list[UnusedCode]) -> None:
    for code in unused:
        shutil.rmtree(code.path, ignore_errors=True)
