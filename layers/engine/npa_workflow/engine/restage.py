"""A run resumed with other step code: the frozen run points at the new code, and the ledger says so.

A run's code is frozen with it (`RunOptions.code_uri`/`code_digest`, `render.code`), so a failed run resumed as
it is re-runs the same code. Resuming with fixed code is a re-stage: the fixed folder is staged (its own digest),
the frozen run is pointed at it (`RunStore.restage`: only the code changes, the spec and vars stay), and the RUN
item records the change (`code_changes`: when, from which digest to which), which the run's report shows. Waves
launched from then on start in the new code; the succeeded waves replayed by the resume keep what the old code
wrote.
"""

from __future__ import annotations

from npa_workflow.engine.errors import RunNotFound
from npa_workflow.engine.ports import Ledger
from npa_workflow.engine.runs import RunStore


def restage(runs: RunStore, ledger: Ledger, run_id: str, code_uri: str, code_digest: str,
            rewrite: bool = True) -> tuple[str, str] | None:
    """Point run `run_id` at the staged code (`rewrite=False`: the caller freezes the run again itself, as a
    local `run --resume` does) and record the change; (old digest, new digest), or None when the code is the same.
    """
    try:
        before = runs.options(run_id)
    except RunNotFound:
        return None  # nothing was frozen (a run killed before it started): nothing changed
    if before.code_digest == code_digest and before.code_uri == code_uri:
        return None
    if rewrite:
        runs.restage(run_id, code_uri, code_digest)
    ledger.record_code_change(run_id, before.code_digest, code_digest, code_uri)
    return before.code_digest, code_digest


def code_change_notices(changes: list[dict[str, str]]) -> list[str]:
    """The report's lines for the RUN item's `code_changes`."""
    return [f"step code re-staged at {c.get('at', '?')}: {_short(c.get('from', ''))} -> {_short(c.get('to', ''))}; "
            "waves launched after it run the new code" for c in changes]


def _short(digest: str) -> str:
    return digest[:12] if digest else "(unstaged folder)"
