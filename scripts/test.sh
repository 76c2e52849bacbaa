#!/usr/bin/env bash
# Install everything the tests need on a fresh machine, then run every test.
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install --quiet --disable-pip-version-check -e ".[test]"
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null
  else
    echo "chromium is missing: browser tests will be skipped (sudo apt-get install chromium)" >&2
  fi
fi
exec python -m pytest "$@"
