"""How the CLI shows problems, plans and waves."""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING, Any

from npa_workflow.errors import Problem

if TYPE_CHECKING:
    from rich.console import Console

    from npa_workflow.plan.model import Plan, WavePlan


class _LazyConsole:
    """A rich Console made on first use: importing rich costs more CPU (~40 ms) than validating a spec does,
    and `validate` prints no table."""

    def __init__(self) -> None:
        self._console: Console | None = None

    def __getattr__(self, name: str) -> Any:
        if self._console is None:
            from rich.console import Console

            self._console = Console(soft_wrap=True)
        return getattr(self._console, name)


stdout: Console = _LazyConsole()  # type: ignore[assignment]


def print_problems(problems: list[Problem]) -> None:
    # One plain line per problem, `<file>: <yaml.path>: <message>`, so editors and grep can use it.
    for p in problems:
        sys.stderr.write(p.format() + "\n")
    sys.stderr.flush()


def print_ok(text: str) -> None:
    """`✓ text`, the check mark green on a terminal (NO_COLOR honoured); the text is printed as is, never as markup."""
    colour = sys.stdout.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"
    mark = "\x1b[32m✓\x1b[0m" if colour else "✓"
    sys.stdout.write(f"{mark} {text}\n")
    sys.stdout.flush()


def print_json(doc: Any) -> None:
    sys.stdout.write(json.dumps(doc, indent=2, sort_keys=False) + "\n")
    sys.stdout.flush()


def _command(argv: list[str], shell: str) -> str:
    if argv:
        return " ".join(argv)
    return shell.strip().replace("\n", " ⏎ ")


def print_plan(plan: Plan) -> None:
    from rich.table import Table

    table = Table(title=f"{plan.workflow} — plan (run id {plan.run_id}, assume {plan.assume_decision or '-'})")
    for col in ("#", "state", "iter", "loop", "group", "resources", "command"):
        table.add_column(col, overflow="fold")
    for i, s in enumerate(plan.steps, 1):
        # iter: the step's loop round (a leaf loop's iteration, else its looped sequence's counter).
        rnd = s.iteration if s.iteration is not None else s.round
        table.add_row(str(i), s.state, "" if rnd is None else str(rnd), s.loop or s.loop_label, s.group,
                      s.resources, _command(s.argv, s.shell) or "(no command)")
    stdout.print(table)


def print_waves(waves: WavePlan) -> None:
    from rich.table import Table

    table = Table(title=f"{waves.workflow} — {len(waves.waves)} waves (assume {waves.assume_decision or '-'})")
    for col in ("wave", "kind", "name", "max", "batches", "steps"):
        table.add_column(col, overflow="fold")
    for w in waves.waves:
        steps = ", ".join(s.task_name for s in w.steps)
        table.add_row(str(w.index), w.kind, w.name, str(w.max_concurrency), str(len(w.batches)), steps)
    stdout.print(table)
