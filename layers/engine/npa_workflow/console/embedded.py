"""`serve`'s own console: in the serve process, told of every ledger write by the durable layer."""

from __future__ import annotations

import contextlib
from typing import Any


def serve_console(stack: contextlib.ExitStack, endpoint_url: str, durable: Any, port: int | None) -> str:
    """Start the console against this serve's stack for the life of `stack`; returns its URL."""
    from npa_workflow.console.app import Console
    from npa_workflow.console.server import ConsoleBindError, ConsoleServer
    from npa_workflow.console.sources import StackSource
    from npa_workflow.local.runtime import LocalRunError
    from npa_workflow.stack_client import StackClient

    source = StackSource(StackClient.local(endpoint_url), kind="serve", notified=True, poll_seconds=1.0)
    stack.enter_context(durable.item_written(source.item_listener))
    try:
        server = ConsoleServer(Console(source), port).start()
    except ConsoleBindError as exc:
        raise LocalRunError(f"the console: {exc}") from None
    stack.callback(server.stop)
    return server.url
