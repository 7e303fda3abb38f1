#!/usr/bin/env bash
# One command: set up (with test tools), lint, type-check and run the whole test suite
# (real Kafka clusters and Spark jobs, started and stopped by the tests themselves).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --test
.venv/bin/ruff check src tests/engine $([ -d bench ] && echo bench)
.venv/bin/mypy
mvn -q -B -f jvm/pom.xml test
exec .venv/bin/python -m pytest "$@"
