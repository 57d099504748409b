#!/usr/bin/env bash
# Installs the npa-workflow CLI with its embedded local AWS into .venv (no AWS account needed).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install --quiet --disable-pip-version-check -e '.[local]'
# The package's bytecode, written now: where the environment forbids writing it at import
# (PYTHONDONTWRITEBYTECODE), every CLI start would compile the sources again (~40 ms of a `validate`).
.venv/bin/python -m compileall -q layers/engine/npa_workflow >/dev/null
