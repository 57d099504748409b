"""Options and spec loading shared by the commands."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from npa_workflow.cli.output import print_problems
from npa_workflow.errors import SpecError

if TYPE_CHECKING:  # the spec stack imports pydantic: loaded on first use, not for `--help`
    from npa_workflow.spec.validate import LoadedSpec

# Bounds of every number a user gives on the command line (typer says "x is not in the range 0<=x<=N").
# A Standard workflow execution lasts at most one year (AWS Step Functions quota), so no wave waits longer.
MAX_WAIT_SECONDS = 31_536_000
MAX_RETRIES = 20  # the run request's options.retries has the same bound (engine/inbox.py)
MAX_CONCURRENCY = 10_000

CatalogOpt = Annotated[
    Path | None,
    typer.Option("--catalog", help="Tool catalog YAML (default: $NPA_WORKFLOW_CATALOG, else tools.yaml by the spec)"),
]
VarOpt = Annotated[
    list[str] | None,
    typer.Option("--var", help="Override a config key: KEY=VALUE (repeatable; values are strings)"),
]
AllowUnknownKeysOpt = Annotated[
    bool,
    typer.Option("--allow-unknown-keys",
                 help="Accept keys the language does not know, with a warning (legacy specs); default: an error"),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table")]


def check_run_id_option(value: str | None) -> str | None:
    """`--run-id` of plan/render: the rule a run applies (protocol.run_ids), so a preview never shows job names
    and S3 prefixes no run could have."""
    from npa_workflow.protocol.run_ids import run_id_problem

    if value is not None and (problem := run_id_problem(value)):
        raise typer.BadParameter(problem, param_hint="--run-id")
    return value


RunIdOpt = Annotated[str | None, typer.Option("--run-id", callback=check_run_id_option,
                                              help="Run id (default: <workflow>-plan)")]
AssumeOpt = Annotated[
    str | None,
    typer.Option("--assume-decision",
                 help="The decision the preview assumes at every decision point: promote_checkpoint (promote) | "
                      "loop_back (default: config.plan_assume_decision, else loop_back when a state branches)"),
]
# A run follows the decisions its steps write; the assumption only stands in for one that is missing.
RunAssumeOpt = Annotated[
    str | None,
    typer.Option("--assume-decision",
                 help="Fallback only: the decision used when a decision artifact is missing when it is read; a "
                      "decision a step wrote always wins (to force a path, set the config the gate reads, e.g. "
                      "--var)"),
]
MaxConcurrencyOpt = Annotated[
    int, typer.Option("--max-concurrency", min=0, max=MAX_CONCURRENCY,
                      help="Cap on every group's concurrency (0 = no cap)")
]
RetriesOpt = Annotated[
    int, typer.Option("--retries", min=0, max=MAX_RETRIES, help="Retries of a failed job (Wave.Failed)")
]
InfraRecoveriesOpt = Annotated[
    int,
    typer.Option("--max-infrastructure-recoveries", min=0, max=MAX_RETRIES,
                 help="Relaunches after an infrastructure failure (no capacity, preemption, a lost job)"),
]
MaxWaitOpt = Annotated[
    int, typer.Option("--max-wait-seconds", min=0, max=MAX_WAIT_SECONDS,
                      help="Deadline of one wave; its job is then cancelled (0 = none)")
]

PassEnvOpt = Annotated[
    list[str] | None,
    typer.Option("--pass-env", metavar="NAME",
                 help="Also give every local step this variable of this environment (repeatable; steps otherwise "
                      "get only PATH, HOME, locale, proxies and the like: docs/faults.md)"),
]

ASSUMPTIONS = ("promote_checkpoint", "promote", "loop_back", "loop_back_to_inner_loop")


def parse_vars(values: list[str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in values or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise typer.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="--var")
        out[key.strip()] = value
    return out


def check_assumption(value: str | None) -> str | None:
    if value is not None and value not in ASSUMPTIONS:
        raise typer.BadParameter(f"must be one of {', '.join(ASSUMPTIONS)}", param_hint="--assume-decision")
    return value


def load_or_exit(spec: Path, catalog: Path | None, variables: list[str] | None, strict: bool = False,
                 allow_unknown_keys: bool = False) -> LoadedSpec:
    from npa_workflow.spec.load import load_spec

    overrides = parse_vars(variables)
    try:
        loaded = load_spec(spec, catalog=catalog, overrides=overrides, strict=strict,
                           allow_unknown_keys=allow_unknown_keys)
    except SpecError as exc:
        print_problems(exc.problems + exc.warnings)
        raise typer.Exit(1) from None
    if loaded.warnings:
        print_problems(loaded.warnings)
    return loaded


def apply_pass_env(names: list[str] | None) -> None:
    """`--pass-env NAME…`: recorded in `$NPA_WORKFLOW_PASS_ENV`, which the local executor reads (same process)."""
    import os

    from npa_workflow.local_jobs.job_environment import PASS_ENV, invalid_pass_env

    if not names:
        return
    bad = invalid_pass_env(names)
    if bad:
        raise typer.BadParameter(f"not a variable name: {', '.join(bad)} (letters, digits and _)",
                                 param_hint="--pass-env")
    current = [n for n in os.environ.get(PASS_ENV, "").split(",") if n]
    os.environ[PASS_ENV] = ",".join(dict.fromkeys([*current, *names]))
