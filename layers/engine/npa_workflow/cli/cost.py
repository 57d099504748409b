"""`npa-workflow plan --cost`: the options and the table of the per-run cost estimate (`npa_workflow.cost`)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from npa_workflow.cli.output import stdout
from npa_workflow.cost import CostEstimate

CostOpt = Annotated[
    bool,
    typer.Option("--cost", help="Estimate one run's Step Functions and Lambda cost, for both decision assumptions"),
]
AssumeMinutesOpt = Annotated[
    float,
    typer.Option("--assume-minutes", min=0,
                 help="With --cost: assumed run duration, for the watch schedule's invocations (default 0: left out)"),
]


def usd(value: float) -> str:
    return f"${value:.6f}" if value < 1 else f"${value:,.2f}"


def print_cost(estimate: CostEstimate) -> None:
    """One column per assumption, so the table stays narrow whatever the terminal."""
    runs = estimate.assumptions
    table = Table(title=f"{estimate.workflow} — estimated AWS cost per run")
    table.add_column("", no_wrap=True)
    for a in runs:
        table.add_column(f"assume {a.assumption}", justify="right", no_wrap=True)

    def row(label: str, values: list[str], *, end_section: bool = False) -> None:
        table.add_row(label, *values, end_section=end_section)

    row("waves", [str(a.waves) for a in runs])
    row("jobs", [str(a.jobs) for a in runs])
    row("state transitions", [f"{a.state_transitions:,}" for a in runs], end_section=True)
    row("Lambda invocations", [f"{a.total_invocations:,}" for a in runs])
    names = list(runs[0].lambda_invocations) if runs else []
    for i, name in enumerate(names):
        row(f"  {name}", [f"{a.lambda_invocations[name]:,}" for a in runs], end_section=i == len(names) - 1)
    row("Step Functions", [usd(a.step_functions_usd) for a in runs])
    row("Lambda", [usd(a.lambda_usd) for a in runs])
    row("total", [usd(a.total_usd) for a in runs])
    stdout.print(table)
    for note in estimate.notes:
        stdout.print(f"  • {note}", highlight=False)
