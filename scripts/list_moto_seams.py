"""Every attribute of moto, botocore and werkzeug the embedded AWS replaces, listed from a running stack.

    .venv/bin/python scripts/list_moto_seams.py [--json]

Starts the twin's embedded AWS in this (fresh) process as `run` and `serve` start it (`start_moto_server`, then
`local.runtime.enter_embedded_aws`, plus the execution-end hook a run adds), lists what
`embedded_aws.patched_versions.replaced_attributes()` finds while it lives and again once it is closed (what stays
replaced for the life of the process), and prints the counts per package. `--json`: {"running": [...],
"closed": [...]} only.
"""

from __future__ import annotations

import contextlib
import json
import sys
import tempfile
from pathlib import Path


def seams() -> dict[str, list[str]]:
    from npa_workflow.embedded_aws.execution_ends import execution_ends
    from npa_workflow.embedded_aws.moto_server import start_moto_server
    from npa_workflow.embedded_aws.patched_versions import replaced_attributes
    from npa_workflow.local.runtime import embedded_aws_env, enter_embedded_aws

    with tempfile.TemporaryDirectory() as home, contextlib.ExitStack() as stack:
        server = start_moto_server()
        enter_embedded_aws(stack, server, embedded_aws_env(server, Path(home), "local"), Path(home) / "lambdas.log",
                           Path(home) / "aws")
        stack.enter_context(execution_ends(lambda arn: None))
        running = replaced_attributes()
        stack.close()
        return {"running": running, "closed": replaced_attributes()}


def _private(seam: str) -> bool:
    return any(part.startswith("_") and not part.startswith("__") for part in seam.split(" ")[0].split("."))


def main(args: list[str]) -> int:
    found = seams()
    if "--json" in args:
        print(json.dumps(found))
        return 0
    for seam in found["running"]:
        print(seam + ("  (stays for the process)" if seam in found["closed"] else ""))
    counts = {name: sum(seam.startswith(name + ".") for seam in found["running"])
              for name in ("moto", "botocore", "werkzeug")}
    print(f"{len(found['running'])} replaced while the stack runs: "
          + ", ".join(f"{count} of {name}" for name, count in counts.items())
          + f" ({sum(_private(seam) for seam in found['running'])} private: a leading underscore)"
          + f"; {len(found['closed'])} stay replaced after it closes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
