#!/usr/bin/env bash
# Install everything the tests need on a fresh machine, lint, then run every test.
#   bash scripts/test.sh            every test: real server, kernels, agents from npm, browser, a JupyterHub, in two
#                                   streams at once (below); each lists its 25 slowest
#   bash scripts/test.sh --fast     the tests marked unit or server: no browser, no third-party agents, no hub (about
#                                   5 minutes)
# Any other arguments go to pytest. Each test's marker (unit, server, browser, interop, hub) is given by
# tests/conftest.py.
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
# A failed test runs once more; each first failure is named on a "run again:" line at the end (tests/conftest.py): on a
# loaded 2-core machine a test can lose a race against its own precondition, and that is a test to fix, not a red
# CI. A test that fails twice fails the run.
set -- --reruns 1 --reruns-delay 2 "$@"
if [ "$fast" = 1 ]; then
  exec python -m pytest -m "not browser and not interop and not hub" "$@"
fi
# JupyterHub's proxy for tests/hub, from the npm registry into the interop agents' cache (once per machine); without
# it those tests skip, unless JUPYTER_ACP_INTEROP_REQUIRED=1
python -m tests.hub.proxy || echo "configurable-http-proxy could not be installed: tests/hub will skip" >&2
# Two streams at once, each serial in its usual order (a test meets the same neighbours as in a serial run): the
# browser, hub and third-party agent tests, which mostly wait on Chromium, JupyterHub and real agents, beside the unit
# and server tests. On CI's 2 cores one serial stream took 35 min; see the README's Tests section for the split's time.
# The first stream's output is printed after the second's (each lists its own slowest tests).
ui_log="$(mktemp)"
# A background job of a script ignores Ctrl-C; with job control on, this one does not, in a process group of its own:
# an interrupt (or a TERM) of the script is passed to it once, and the script waits for its clean-up (its servers).
set -m
python -m pytest --durations=25 -m "browser or interop or hub" "$@" >"$ui_log" 2>&1 &
ui=$!
set +m
trap 'kill -INT "$ui" 2>/dev/null; exit 130' INT
trap 'kill -INT "$ui" 2>/dev/null; exit 143' TERM
trap 'if [ -n "$ui" ]; then wait "$ui"; cat "$ui_log"; fi; rm -f "$ui_log"' EXIT
rc=0
python -m pytest --durations=25 -m "not browser and not interop and not hub" "$@" || rc=$?
ui_rc=0
wait "$ui" || ui_rc=$?
ui=""
echo "== the browser, hub and interop tests =="
cat "$ui_log"
# 5 is pytest's "no tests collected": a stream that arguments (a single file, say) left empty
[ "$rc" = 5 ] && rc=0
[ "$ui_rc" = 5 ] && ui_rc=0
[ "$rc" = 0 ] && rc=$ui_rc
exit "$rc"
