"""`npa-workflow plan --cost`: the options and the table of the per-run cost estimate (`npa_workflow.cost`), and
with `--monthly` the stack's fixed cost a month (its specs counted from `--stack`'s deployed catalog, else from the
specs folder)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from npa_workflow.cli.output import stdout

if TYPE_CHECKING:
    from npa_workflow.cost import CostEstimate, MonthlyCost

CostOpt = Annotated[
    bool,
    typer.Option("--cost", help="Estimate one run's compute, Step Functions and Lambda cost, for both decision "
                                "assumptions (prints the cost, not the plan)"),
]
AssumeMinutesOpt = Annotated[
    list[str] | None,
    typer.Option("--assume-minutes",
                 help="With --cost: how long each step runs, N minutes; STATE=N for one state (repeatable). "
                      "Gives the compute-hours and the run's duration (default: compute left out)"),
]
MonthlyOpt = Annotated[
    bool,
    typer.Option("--monthly", help="With --cost: also the stack's fixed cost a month (watch schedule, alarms per "
                                   "spec, secret), its specs counted from --stack, else from --specs"),
]
SpecsDirOpt = Annotated[
    Path | None,
    typer.Option("--specs", help="With --monthly: the stack's specs folder (default: the spec's own folder)"),
]
CostStackOpt = Annotated[
    str | None,
    typer.Option("--stack", help="With --monthly: a deployed stack; its specs are counted from its catalog"),
]
WatchIntervalOpt = Annotated[
    int,
    typer.Option("--watch-interval", min=1, max=60, help="With --cost: the stack's watch schedule, minutes "
                                                         "(its watchIntervalMinutes)"),
]
PricesOpt = Annotated[
    Path | None,
    typer.Option("--prices", help="With --cost: USD per hour, YAML {accelerators: {H100: 2.5}, vcpu_hour: 0.04}, "
                                  "over the default table"),
]


def parse_minutes(values: list[str] | None) -> tuple[float, dict[str, float]]:
    """`--assume-minutes 30 --assume-minutes train=120` → (30.0, {"train": 120.0})."""
    default = 0.0
    by_state: dict[str, float] = {}
    for item in values or []:
        state, sep, text = item.rpartition("=")
        try:
            minutes = float(text)
        except ValueError:
            raise typer.BadParameter(f"expected N or STATE=N minutes, got {item!r}",
                                     param_hint="--assume-minutes") from None
        if minutes < 0 or (sep and not state.strip()):
            raise typer.BadParameter(f"expected N or STATE=N minutes (N >= 0), got {item!r}",
                                     param_hint="--assume-minutes")
        if sep:
            by_state[state.strip()] = minutes
        else:
            default = minutes
    return default, by_state


def usd(value: float) -> str:
    return f"${value:.6f}" if value < 1 else f"${value:,.2f}"


def print_cost(estimate: CostEstimate) -> None:
    """One column per assumption, so the table stays narrow whatever the terminal."""
    from rich.table import Table

    runs = estimate.assumptions
    table = Table(title=f"{estimate.workflow} — estimated cost per run")
    table.add_column("", no_wrap=True)
    for a in runs:
        table.add_column(f"assume {a.assumption}", justify="right", no_wrap=True)

    def row(label: str, values: list[str], *, end_section: bool = False) -> None:
        table.add_row(label, *values, end_section=end_section)

    row("waves", [str(a.waves) for a in runs])
    row("jobs", [str(a.jobs) for a in runs])
    kinds = sorted({k for a in runs for k in a.compute.hours})
    if kinds:
        row("run minutes", [f"{a.compute.run_minutes:,.1f}" for a in runs])
        for kind in kinds:
            row(f"  {kind}-hours", [f"{a.compute.hours.get(kind, 0.0):,.2f}" for a in runs])
        row("compute", [usd(a.compute.usd) for a in runs], end_section=True)
    else:
        row("compute", ["not estimated" for _ in runs], end_section=True)
    row("state transitions", [f"{a.state_transitions:,}" for a in runs])
    row("history events (max)", [f"{estimate.history_events:,}" for _ in runs], end_section=True)
    row("Lambda invocations", [f"{a.total_invocations:,}" for a in runs])
    names = list(runs[0].lambda_invocations) if runs else []
    for i, name in enumerate(names):
        row(f"  {name}", [f"{a.lambda_invocations[name]:,}" for a in runs], end_section=i == len(names) - 1)
    labels = [(i.service, i.name) for i in runs[0].items] if runs else []
    for n, (service, name) in enumerate(labels):
        row(f"{service}: {name}", [usd(a.items[n].usd) for a in runs], end_section=n == len(labels) - 1)
    row("AWS", [usd(a.orchestration_usd) for a in runs])
    row("total", [usd(a.total_usd) for a in runs])
    stdout.print(table)
    stdout.print("  each AWS item assumes (quantities as under the first assumption):", highlight=False)
    for item in runs[0].items if runs else []:
        stdout.print(f"  • {item.service}: {item.name}: {item.quantity:,.6g} {item.unit} at "
                     f"{estimate.pricing.prices[item.price_key].text()} — {item.assumption}", highlight=False)
    for note in estimate.notes:
        stdout.print(f"  • {note}", highlight=False)


def print_monthly(monthly: MonthlyCost, pricing_text: dict[str, str]) -> None:
    """The stack's fixed cost a month: one line, then each item with its assumption."""
    stdout.print(f"stack fixed cost: {usd(monthly.usd)} a month ({monthly.specs} spec(s), {monthly.specs_source}; "
                 f"watch every {monthly.watch_interval_minutes} min)", highlight=False)
    for item in monthly.items:
        stdout.print(f"  • {item.service}: {item.name}: {item.quantity:,.6g} {item.unit} = {usd(item.usd)} at "
                     f"{pricing_text[item.price_key]} — {item.assumption}", highlight=False)


def stack_spec_count(stack: str, region: str | None) -> int:
    """How many specs the deployed stack runs: its catalog's machines (`catalog/machines.json`, written by the
    deploy). Raises StackError (one line) for a stack that cannot be read."""
    import json

    from npa_workflow.adapters.s3_store import S3Store
    from npa_workflow.engine.inbox import DEPLOYED_MACHINES_KEY
    from npa_workflow.stack_client import StackClient, StackError

    client = StackClient.cloud(stack=stack, region=region)
    body = S3Store(client.s3).get(f"s3://{client.bucket}/{DEPLOYED_MACHINES_KEY}")
    if body is None:
        raise StackError(f"stack {stack!r}: no s3://{client.bucket}/{DEPLOYED_MACHINES_KEY} (is it deployed?)")
    try:
        machines = json.loads(body).get("machines", {})
    except (ValueError, AttributeError):
        raise StackError(f"stack {stack!r}: {DEPLOYED_MACHINES_KEY} is not the deploy's JSON") from None
    return len(machines)
