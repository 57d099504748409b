"""`npa-workflow gc`: list (default) or delete (`--yes`) local runs idle for longer than `--older-than` days."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from npa_workflow.cli.common import JsonOpt
from npa_workflow.cli.output import print_json


def gc_command(
    older_than: Annotated[float, typer.Option("--older-than", min=0, metavar="DAYS",
                                              help="Prune runs nothing has written to for this many days.")] = 7.0,
    yes: Annotated[bool, typer.Option("--yes", help="Delete them. Without it, gc only lists what it would delete.")]
    = False,
    as_json: JsonOpt = False,
) -> None:
    """Prune old local runs: each run's folder under `<home>/runs/` (its ledger, S3 objects, report, logs) and the
    job records and logs of its jobs under `<home>/jobs/`. A run another process holds (running, being resumed)
    is never pruned, nor one with a job still running. Staged step code under `<home>/code/` as old, which no job
    left started in, goes too. Dry run unless --yes.
    Home: $NPA_WORKFLOW_HOME, else ./.npa-workflow."""
    from npa_workflow.local.gc import find_prunable, find_unused_code, prune, prune_code
    from npa_workflow.local.runtime import local_home

    home = local_home()
    runs = find_prunable(home, older_than * 86400)
    code = find_unused_code(home, older_than * 86400, runs)
    if yes:
        prune(runs)
        prune_code(code)
    if as_json:
        print_json({"home": str(home), "deleted": yes, "runs": [r.to_json() for r in runs],
                    "code": [c.to_json() for c in code]})
        return
    verb = "deleted" if yes else "would delete"
    for run in runs:
        sys.stdout.write(f"{verb} {run.run_id}: {run.status}, idle {run.idle_seconds / 86400:.1f} days, "
                         f"{run.bytes / 1e6:.1f} MB, {len(run.job_files)} job files\n")
    for staged in code:
        sys.stdout.write(f"{verb} staged code {staged.digest[:12]}: {staged.bytes / 1e6:.1f} MB, used by no job left\n")
    total = sum(r.bytes for r in runs) / 1e6
    sys.stdout.write(f"{len(runs)} run(s) idle for more than {older_than:g} days under {home / 'runs'} "
                     f"({total:.1f} MB){'' if yes else '; pass --yes to delete them'}\n")
