#!/usr/bin/env bash
# Debian packages the tests need: rsync (the SkyPilot API server's consolidation mode uses it).
set -euo pipefail
missing=()
command -v rsync >/dev/null 2>&1 || missing+=(rsync)
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
