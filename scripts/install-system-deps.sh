#!/usr/bin/env bash
# Debian packages the tests need, installed only when missing (safe to run any number of times):
#   rsync — a SkyPilot API server in consolidation mode (the contract tests' server) uses it;
#   graphviz — `dot`, which `npa-workflow graph --format png` and the graph tests run;
#   chromium — the headless browser the console's tests (tests/console) drive through Playwright.
set -euo pipefail
missing=()
command -v rsync >/dev/null 2>&1 || missing+=(rsync)
command -v dot >/dev/null 2>&1 || missing+=(graphviz)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-system-deps: missing ${missing[*]} and no apt-get here: install them with your package manager" >&2
  exit 1
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-system-deps: installed ${missing[*]}"
