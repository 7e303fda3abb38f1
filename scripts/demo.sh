#!/usr/bin/env bash
# One command: set up, start two local Kafka clusters, produce sample data, mirror it with
# kafka-mirror (Spark local mode), verify source and destination match, and stop.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec .venv/bin/kafka-mirror-demo --workdir "${DEMO_WORKDIR:-demo-work}" "$@"
