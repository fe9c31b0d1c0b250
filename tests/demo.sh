#!/usr/bin/env bash
# The demo command: set-up, then galera-checker's daemon fails a real Galera writer over.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tests/setup.sh
source tests/python.sh
exec "$PYTHON" -m tests.lab.demo
