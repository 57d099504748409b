"""The handlers' structured logs go to the run's log file while the embedded stack runs, whatever stream their
loggers were made with."""

from __future__ import annotations

import importlib
import logging
from pathlib import Path

from npa_workflow.local.runtime import handler_logs_to
from npa_workflow.protocol import functions as function_table


def _stream_handler(name: str) -> logging.StreamHandler:
    module = importlib.import_module(f"functions.{name}.handler")
    handler = module.logger.registered_handler
    assert isinstance(handler, logging.StreamHandler)
    return handler


def test_a_logger_made_while_stdout_was_a_stream_since_closed_still_logs_to_the_file(tmp_path: Path) -> None:
    # A handler module first imported under another stdout (a test's captured one, an embedding host's) keeps
    # that stream; once it is closed, StreamHandler.setStream's flush of it raised and the start failed.
    name = function_table.NAMES[0]
    handler = _stream_handler(name)
    gone = (tmp_path / "stdout-then").open("w", encoding="utf-8")
    gone.close()  # a closed file's flush raises (a closed StringIO's does not)
    original = handler.stream
    handler.stream = gone
    try:
        with handler_logs_to(tmp_path / "lambdas.log"):
            importlib.import_module(f"functions.{name}.handler").logger.info("to the file")
        assert handler.stream is gone  # put back as it was found
    finally:
        handler.stream = original
    assert "to the file" in (tmp_path / "lambdas.log").read_text(encoding="utf-8")
