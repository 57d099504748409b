"""`npa-workflow console`: a web console on 127.0.0.1 for the local runs, a `serve` stack or a deployed stack.

The web stack (Starlette, uvicorn, Jinja2: the `local` extra) is imported inside the command, so the CLI's other
commands start as fast as before (`bench/cli_startup.py`).
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from npa_workflow.cli.stack import BucketOpt, EndpointOpt, RegionOpt, StackOpt


def _fail(message: str, code: int = 1) -> typer.Exit:
    sys.stderr.write(f"npa-workflow console: error: {message}\n")
    sys.stderr.flush()
    return typer.Exit(code)


def console_command(
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="Port on 127.0.0.1 (0: a free one)")] = 8765,
    endpoint: EndpointOpt = None, stack: StackOpt = None, bucket: BucketOpt = None, region: RegionOpt = None,
    poll: Annotated[float, typer.Option("--poll", min=0.2, max=60.0,
                                        help="A stack's runs are read once per this many seconds while watched "
                                             "(shared by every viewer)")] = 1.0,
    assume_minutes: Annotated[float, typer.Option("--assume-minutes", min=0.0,
                                                  help="The step duration `plan --cost` assumes, for the "
                                                       "estimate beside the compute used")] = 0.0,
) -> None:
    """Serve a web console of runs: graph, timeline, decisions, logs, cost; cancel and resume on a stack."""
    try:
        from npa_workflow.console.app import Console
        from npa_workflow.console.server import ConsoleBindError, ConsoleServer
        from npa_workflow.console.sources import LocalSource, StackSource
    except ImportError as exc:
        raise _fail(f"the console needs its web stack ({exc.name} is missing) (fix: pip install "
                    "'npa-workflow[local]')") from None
    if endpoint or stack or bucket:
        from npa_workflow.cli.stack import stack_client

        client = stack_client(endpoint, stack, bucket, region)  # a bad URL or stack: one line, exit 1
        if not client.ledger_table:
            raise _fail("--bucket alone names no ledger to read runs from (fix: --stack NAME or --endpoint URL)", 2)
        source = StackSource(client, kind="endpoint" if endpoint else "stack", poll_seconds=poll,
                             region=region or "")
    else:
        from npa_workflow.cli.logs import logs_home

        source = LocalSource(logs_home())
    try:
        server = ConsoleServer(Console(source, assume_minutes=assume_minutes), port)
    except ConsoleBindError as exc:
        raise _fail(str(exc)) from None
    sys.stdout.write(f"npa-workflow console: {server.url} ({source.describe()}; Ctrl-C stops it)\n")
    sys.stdout.flush()
    server.serve_forever()
