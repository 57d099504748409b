"""The CDK app. Run through the CLI (`node_modules/.bin/cdk synth|deploy`, see cdk.json) or as plain Python
(`.venv/bin/python infra/app.py`): either way it reads cdk.json's context (feature flags, defaults), so both
synthesize the same template. Context given on the command line (`-c key=value`) wins over cdk.json."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
# `infra` is imported as a package from the repository root; the engine comes from the venv's editable install,
# or straight from layers/engine on a checkout where only the infra dependencies are installed.
for _path in (REPO_ROOT / "layers" / "engine", REPO_ROOT):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

import aws_cdk as cdk  # noqa: E402

from infra.functions import LAYER_BUILD_FAILED  # noqa: E402
from infra.layer_lock import LockError  # noqa: E402
from infra.nag import apply_nag  # noqa: E402
from infra.settings import EngineSettings, SettingsError, stack_name  # noqa: E402
from infra.stack import NpaWorkflowStack  # noqa: E402
from npa_workflow.errors import SpecError  # noqa: E402

CDK_JSON = REPO_ROOT / "cdk.json"


def cdk_json_context(path: Path = CDK_JSON) -> dict[str, Any]:
    if not path.exists():
        return {}
    return dict(json.loads(path.read_text(encoding="utf-8")).get("context", {}))


def build_app(
    context: dict[str, Any] | None = None,
    *,
    outdir: str | None = None,
    validation: bool | None = None,
    **stack_kwargs: Any,
) -> tuple[cdk.App, NpaWorkflowStack]:
    """The app with the stack and cdk-nag. `context` overrides cdk.json (the CLI's own context overrides both)."""
    merged = {**cdk_json_context(), **(context or {})}
    app = cdk.App(context=merged, outdir=outdir, builtin_cloud_formation_validation=validation)
    settings = EngineSettings.from_context(app.node)
    # Environment-agnostic: the CLI deploys to the account and region of the caller's credentials.
    stack = NpaWorkflowStack(
        app,
        stack_name(app.node),
        settings=settings,
        description="npa-workflow: npa.workflow specs as Step Functions state machines running SkyPilot jobs",
        **stack_kwargs,
    )
    apply_nag(app, stack)
    return app, stack


def main() -> int:
    try:
        app, _ = build_app()
        app.synth()
    except (SettingsError, SpecError, LockError) as exc:
        # A wrong context value or an invalid spec in specs/: the message names the fix; a traceback would not.
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except RuntimeError as exc:
        # The layer's pip install failed (no network, no wheel for the platform): pip's own message says why.
        message = str(exc)
        if LAYER_BUILD_FAILED not in message:
            raise
        print("error: " + message[message.index(LAYER_BUILD_FAILED) :], file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
