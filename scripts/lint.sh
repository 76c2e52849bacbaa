#!/usr/bin/env bash
# Lint: ruff (rules and format), the import contract (imports point one way), mypy (types), eslint + prettier on the sidebar.
# Run by scripts/test.sh before the tests; needs the test extra installed and the labextension's node_modules.
set -euo pipefail
cd "$(dirname "$0")/.."
ruff check jupyter_acp tests bench
ruff format --check jupyter_acp tests bench
lint-imports
mypy
(cd labextension && jlpm lint)
