#!/usr/bin/env bash
# Run every benchmark in bench/ in turn; each writes bench/results/NAME.json.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
for script in bench/[a-z]*.py; do
    echo "=== ${script}"
    "$PY" "$script"
done
