"""A CLI process whose Lambda handler of one function is held at its entry: a test's moment, made an event.

A test that interrupts a run "during the decide" cannot poll for it: the decide Lambda of a fast run lasts a few
milliseconds and the run (with its embedded server) may be gone before a poll sees it. Started with
`held_cli(...)`, the CLI process wraps `functions.<function>.handler.handler` before it starts: the first call
(for `state`, if given) writes its event to `marker` and then waits for ever, so the run stays at that moment
until the test signals the process. The handler is the real one, called in the real process (moto's Lambda
adapter imports the module per invocation and finds the wrapper); nothing else of the run changes.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from e2e_support import interruptible

HOLD_ENV = "NPA_TEST_HOLD"  # "<function>" or "<function>:<state>"
MARKER_ENV = "NPA_TEST_HOLD_MARKER"  # the file the held call writes its event to


def install() -> None:
    function, _, state = os.environ[HOLD_ENV].partition(":")
    marker = Path(os.environ[MARKER_ENV])
    module = importlib.import_module(f"functions.{function}.handler")
    real = module.handler
    held = threading.Event()  # never set: the test ends this process

    def handler(event: dict[str, Any], context: Any) -> Any:
        if not state or event.get("state") == state:
            tmp = marker.with_suffix(".tmp")
            tmp.write_text(json.dumps(event))
            tmp.replace(marker)  # whole, or not there
            held.wait()
        return real(event, context)

    module.handler = handler


def held_cli(*args: str, function: str, marker: Path, home: Path, cwd: Path | None = None,
             state: str = "") -> subprocess.Popen[str]:
    """`npa-workflow <args>` with `function`'s handler held at its first call (for `state`)."""
    env = {**os.environ, "NPA_WORKFLOW_HOME": str(home), HOLD_ENV: f"{function}:{state}" if state else function,
           MARKER_ENV: str(marker)}
    env.pop("AWS_ENDPOINT_URL", None)
    program = (f"import sys; sys.path.insert(0, {str(Path(__file__).resolve().parent)!r}); "
               "import held_handler; held_handler.install(); from npa_workflow.cli.app import main; main()")
    return subprocess.Popen([sys.executable, "-c", program, *args], cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=interruptible)
