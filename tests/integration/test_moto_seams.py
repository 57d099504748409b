"""What the embedded AWS replaces of moto, botocore and werkzeug (`scripts/list_moto_seams.py`): only parts of the
packages pinned for it, and all of it put back when the stack closes, but for the two start-up savings documented
to last for the process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from npa_workflow.embedded_aws.patched_versions import PATCHED_VERSIONS

ROOT = Path(__file__).resolve().parents[2]


def test_the_stack_replaces_parts_of_pinned_packages_only_and_puts_them_back() -> None:
    listed = subprocess.run([sys.executable, str(ROOT / "scripts" / "list_moto_seams.py"), "--json"],
                            capture_output=True, text=True, timeout=120, cwd=ROOT, check=True)
    seams = json.loads(listed.stdout.strip().splitlines()[-1])
    running, closed = seams["running"], seams["closed"]
    assert {seam.split(".", 1)[0] for seam in running} == set(PATCHED_VERSIONS)  # each of the three, none other
    # the scan sees each kind of patch: a method (in_process_calls), a module-level name wrapped by functools
    # (speed-up 2), a module swapped for a copy (pause_aware_waits), a function replaced where moto imported it (9)
    assert {"botocore.endpoint.Endpoint._send", "moto.stepfunctions.parser.asl.utils.json_path.parse",
            "moto.stepfunctions.parser.asl.component.state.exec.execute_state.threading",
            "moto.core.responses.method_names_from_class"} <= set(running)
    # embedded_aws.moto_server: `_lazy_url_builders` and `_skip_batch_models` last for the process, by design
    assert closed == ["moto.batch (replaced)", "werkzeug.routing.rules.Rule._compile_builder"]
