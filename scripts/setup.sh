#!/usr/bin/env bash
# Installs the npa-workflow CLI with its embedded local AWS into .venv (no AWS account needed).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install --quiet --disable-pip-version-check -e '.[local]'
