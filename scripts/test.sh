#!/usr/bin/env bash
# Install everything the tests need on a fresh machine, lint, then run every test.
#   bash scripts/test.sh            every test: real server, kernels, agents from npm, browser
#   bash scripts/test.sh --fast     the unit subset: no browser, no third-party agents (about 5 minutes)
# Any other arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
fast=0
if [ "${1:-}" = "--fast" ]; then
  fast=1
  shift
fi
# pip writes the labextension through a link left by `jupyter labextension develop`: into a checkout that may be
# gone (pip fails) or into this one's sources (the next build fails on a second install.json). Install a copy.
ext="$(python -c 'import sys; print(sys.prefix)')/share/jupyter/labextensions/jupyter-acp-host"
if [ -L "$ext" ]; then
  echo "replacing the labextension link $ext -> $(readlink "$ext") with an installed copy" >&2
  rm "$ext"
fi
python -m pip install --quiet --disable-pip-version-check -e ".[test]"
if [ "$fast" = 0 ] && ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null
  else
    echo "chromium is missing: browser tests will be skipped (sudo apt-get install chromium)" >&2
  fi
fi
bash scripts/lint.sh
if [ "$fast" = 1 ]; then
  exec python -m pytest --ignore=tests/browser --ignore=tests/interop "$@"
fi
exec python -m pytest "$@"
