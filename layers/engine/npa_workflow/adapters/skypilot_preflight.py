"""Before the first launch: is the SkyPilot API server there, healthy, and does it take our credentials?

Without this, an unreachable `--skypilot-endpoint` surfaced only through the launch transaction's own
retries (2 attempts x 8 retries: 96.5 s and 15 retry lines). The preflight makes one `GET /api/health`
with short timeouts and no retries, then one authenticated call (`/api/status` of no request), and fails
in seconds with one message that says what to do. The launch's retries stay for after the server was
seen healthy (a transient 503 mid-run).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from npa_workflow.adapters.skypilot_api import (
    ENV_TOKEN,
    SkyPilotApi,
    SkyPilotAuthError,
    SkyPilotError,
    SkyPilotUnavailable,
)
from npa_workflow.protocol import environment

PREFLIGHT_CONNECT_SECONDS = 3.0
PREFLIGHT_READ_SECONDS = 10.0


class PreflightFailed(Exception):
    """One line for the user: what failed at the SkyPilot API server and what to do."""


def preflight(endpoint: str | None, environ: Mapping[str, str] | None = None) -> str:
    """Check the server at `endpoint` (default `$SKYPILOT_API_SERVER_ENDPOINT`); returns its version line."""
    env = dict(os.environ if environ is None else environ)
    if endpoint:
        env[environment.SKYPILOT_ENDPOINT] = endpoint
    has_token = bool((env.get(ENV_TOKEN) or "").strip()
                     or (env.get(environment.SKYPILOT_TOKEN_SECRET_ARN) or "").strip())
    try:
        api = SkyPilotApi.from_environment(env, connect_timeout=PREFLIGHT_CONNECT_SECONDS,
                                           read_timeout=PREFLIGHT_READ_SECONDS, retry_deadline=0.0,
                                           request_timeout=PREFLIGHT_READ_SECONDS)
    except ValueError as exc:
        raise PreflightFailed(f"--skypilot-endpoint: {exc} (fix: give the server's URL, e.g. http://host:46580)") \
            from None
    except SkyPilotError as exc:
        raise PreflightFailed(f"{exc}") from None
    where = api.endpoint
    no_token = "" if has_token else f" (fix: set ${ENV_TOKEN} to a service-account token of that server)"
    try:
        health = api.health()
        api.request_status(["npa-workflow-preflight"])  # authenticated: a server that checks tokens says 401
    except SkyPilotAuthError as exc:
        fix = no_token or f" (fix: ${ENV_TOKEN} is set but the server refused it: create a new token)"
        raise PreflightFailed(f"SkyPilot API server at {where} refused the credentials: {exc}{fix}") from None
    except SkyPilotUnavailable as exc:
        raise PreflightFailed(
            f"SkyPilot API server at {where} is not reachable: {exc} (fix: start it (`sky api start`), or "
            "check --skypilot-endpoint and the network)"
        ) from None
    except SkyPilotError as exc:
        raise PreflightFailed(f"SkyPilot API server at {where} answered unexpectedly: {exc} (fix: check that "
                              "--skypilot-endpoint is a SkyPilot API server of a supported version)") from None
    if not health.healthy:
        raise PreflightFailed(f"SkyPilot API server at {where} is not healthy (status {health.status!r}) "
                              "(fix: wait for it to finish starting, or restart it)")
    return f"SkyPilot API server {health.version or '?'} (api {health.api_version or '?'}) at {where}"
