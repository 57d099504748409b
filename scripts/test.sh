#!/usr/bin/env bash
# Installs everything the tests need on a fresh machine of this kind, then runs the whole suite.
# Extra arguments go to pytest (e.g. `./scripts/test.sh tests/unit -k planner`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-system-deps.sh
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install --quiet --disable-pip-version-check -e '.[dev]'
npm_config_update_notifier=false npm ci --no-audit --no-fund --loglevel=error
exec .venv/bin/python -m pytest "$@"
