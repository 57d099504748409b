"""The environment a local job starts from: a small allow-list of this process's variables, never all of it.

A job gets exactly: the variables below that are set here (what a program needs to run at all: a PATH, a
home, a locale, a terminal, proxies and CA bundles to reach the network), the names passed with
`--pass-env NAME` (kept in `$NPA_WORKFLOW_PASS_ENV`, comma-separated, so the in-process Lambdas see them),
then what the engine lays over it: the spec's and catalog's `env`, the run's `--secret-env` values and
the runtime's own variables (the embedded AWS endpoint, region and dummy credentials, the run/state/attempt
ids). Anything else in the shell that started `npa-workflow` (tokens, cloud credentials, other secrets)
stays out of the job. docs/faults.md lists the same names.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

PASS_ENV = "NPA_WORKFLOW_PASS_ENV"
ALLOWED = (
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TMPDIR", "TEMP", "TMP", "TZ", "TERM", "COLORTERM",
    "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "LC_NUMERIC", "LC_TIME", "LC_COLLATE",
    "http_proxy", "https_proxy", "no_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY",
    "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
)
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def pass_env_names(environ: Mapping[str, str] | None = None) -> list[str]:
    environ = os.environ if environ is None else environ
    names = [n.strip() for n in environ.get(PASS_ENV, "").split(",")]
    return [n for n in names if n and _NAME.match(n)]


def invalid_pass_env(names: list[str]) -> list[str]:
    return [n for n in names if not _NAME.match(n)]


def base_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The allow-listed and `--pass-env` variables of `environ` (default: this process's)."""
    environ = os.environ if environ is None else environ
    names = [*ALLOWED, *pass_env_names(environ)]
    return {n: environ[n] for n in names if n in environ}
