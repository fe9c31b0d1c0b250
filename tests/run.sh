#!/usr/bin/env bash
# The test command: set-up, static checks, then unit and integration tests on the real lab.
# Extra arguments go to pytest (e.g. bash tests/run.sh tests/unit -k config).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tests/setup.sh
source tests/python.sh
echo "== ruff"
"$PYTHON" -m ruff check .
"$PYTHON" -m ruff format --check .
echo "== mypy --strict"
"$PYTHON" -m mypy
echo "== lint-imports (the layers in pyproject.toml)"
"$PYTHON" -c 'import sys; from importlinter.cli import lint_imports_command as lint; sys.exit(lint())' \
  --no-cache
echo "== pytest"
exec "$PYTHON" -m pytest "$@"
