"""`npa-workflow`: validate, plan, render and run npa.workflow/v0.0.1 specs.

Start-up is part of the interface (`bench/cli_startup.py`: `--help` and `validate` of a spec within 0.3 s):
`main()` builds only the command it is asked for, so `validate` imports neither the run, stack and log
commands nor rich, and typer builds the options of one command, not of all seventeen. Every module a command
needs beyond its options (the spec stack, the compiler, the AWS clients) is imported inside the command.
`app`, the whole command tree, is what `--help`, an unknown command and the tests get.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

import typer

# name -> (module, attribute): a command function, or a typer app for a group of subcommands. In `--help` order.
COMMANDS: dict[str, tuple[str, str]] = {
    "validate": ("npa_workflow.cli.spec_commands", "validate"),
    "plan": ("npa_workflow.cli.spec_commands", "plan"),
    "render": ("npa_workflow.cli.spec_commands", "render"),
    "compile": ("npa_workflow.cli.spec_commands", "compile"),
    "schema": ("npa_workflow.cli.spec_commands", "schema"),
    "run": ("npa_workflow.cli.run", "run_command"),
    "graph": ("npa_workflow.cli.graph", "graph_command"),
    "serve": ("npa_workflow.cli.stack", "serve_command"),
    "submit": ("npa_workflow.cli.stack", "submit_command"),
    "status": ("npa_workflow.cli.stack", "status_command"),
    "cancel": ("npa_workflow.cli.stack", "cancel_command"),
    "resume": ("npa_workflow.cli.stack", "resume_command"),
    "list": ("npa_workflow.cli.stack", "list_command"),
    "logs": ("npa_workflow.cli.logs", "logs_command"),
    "gc": ("npa_workflow.cli.gc", "gc_command"),
    "jobs": ("npa_workflow.cli.jobs", "jobs_app"),
    "console": ("npa_workflow.cli.console", "console_command"),
}


def _print_version(asked: bool) -> None:
    if asked:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"npa-workflow {version('npa-workflow')}")
        except PackageNotFoundError:  # a source tree on PYTHONPATH, not installed
            typer.echo("npa-workflow (not installed: no version recorded)")
        raise typer.Exit()


def _root(
    show_version: bool = typer.Option(False, "--version", is_eager=True, callback=_print_version,
                                      help="Print the installed version and exit."),
) -> None:
    # A callback keeps the app a group even when it holds a single command (typer would otherwise make that
    # command the whole program, and `npa-workflow validate x` would read "validate" as a spec path).
    pass


def build_app(names: list[str] | None = None) -> typer.Typer:
    """The CLI with the commands `names` (default: all of them)."""
    cli = typer.Typer(
        name="npa-workflow",
        help="Run npa.workflow/v0.0.1 specs as AWS Step Functions state machines — in the cloud or on one machine.",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        add_completion=False,
        # Plain help: an 80-column terminal shows every option name whole (rich's panels cut them), and it
        # prints without rendering rich tables at start-up.
        rich_markup_mode=None,
        context_settings={"help_option_names": ["-h", "--help"]},  # every command's help, as users type it
    )
    cli.callback()(_root)
    for name in names or COMMANDS:
        module, attribute = COMMANDS[name]
        target = getattr(importlib.import_module(module), attribute)
        if isinstance(target, typer.Typer):
            cli.add_typer(target, name=name)
        else:
            cli.command(name=name)(target)
    return cli


def __getattr__(name: str) -> Any:
    # `from npa_workflow.cli.app import app` (tests, embedding): the whole tree, built on first use.
    if name == "app":
        globals()["app"] = full = build_app()
        return full
    raise AttributeError(name)


def main() -> None:
    # pydantic looks up plugins through every installed package's entry points on its first model (~30 ms);
    # the CLI uses none, as the Lambda functions (infra/functions.py) do not.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    # The CLI is never a Lambda: Powertools Metrics' EMF lines (stdout, for CloudWatch) from the in-process
    # handlers of `run`/`serve` would only corrupt this process's own output (`run --json`).
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    from npa_workflow.adapters.aws_clients import forget_blank_regions

    forget_blank_regions()  # `AWS_REGION=""` is unset, not a region named ""
    command = sys.argv[1] if len(sys.argv) > 1 else ""
    try:
        build_app([command] if command in COMMANDS else None)()
    except Exception as exc:
        # A full disk, a read-only home, a damaged state file: what the disk did, in one line (no traceback).
        from npa_workflow.storage_errors import storage_problem_in

        problem = storage_problem_in(exc)
        if problem is None:
            raise
        sys.stderr.write(f"npa-workflow {command or ''}: error: {problem}\n".replace("  ", " "))
        sys.exit(1)
