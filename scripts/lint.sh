#!/usr/bin/env bash
# The checks, listed once: scripts/test.sh (and so .ci/run) runs them all, pre-commit runs each by its name
# (.pre-commit-config.yaml: one hook per name, tests/test_checks.py holds the two lists equal).
#   bash scripts/lint.sh                 every check, in this order
#   bash scripts/lint.sh mypy ruff       the named ones
#   bash scripts/lint.sh --fix ruff      ruff and format fix what they can instead of only reporting it
# Needs the test extra installed and the labextension's node_modules.
set -euo pipefail
cd "$(dirname "$0")/.."
CHECKS=(ruff format imports mypy labextension)
fix=0
if [ "${1:-}" = "--fix" ]; then
  fix=1
  shift
fi
check() {
  case "$1" in
    ruff) # the rules
      if [ "$fix" = 1 ]; then ruff check --fix jupyter_acp tests bench scripts; else ruff check jupyter_acp tests bench scripts; fi ;;
    format) # one layout
      if [ "$fix" = 1 ]; then ruff format jupyter_acp tests bench scripts; else ruff format --check jupyter_acp tests bench scripts; fi ;;
    imports) # the import contract: imports point one way
      lint-imports ;;
    mypy) # types, with the strict modules and their named exceptions in pyproject.toml
      mypy ;;
    labextension) # eslint + prettier on the sidebar
      (cd labextension && jlpm lint) ;;
    *)
      echo "lint.sh: no check named '$1' (the checks: ${CHECKS[*]})" >&2
      return 2 ;;
  esac
}
if [ "$#" = 0 ]; then
  set -- "${CHECKS[@]}"
fi
for name in "$@"; do
  check "$name"
done
