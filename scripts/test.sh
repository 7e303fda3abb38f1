#!/usr/bin/env bash
# One command: set up (with test tools), then run every test of the project:
#   1. the engine: lint, type-check, JVM unit tests, pytest against real Kafka clusters and Spark
#   2. the Ansible collection: ansible-lint (production), ansible-test sanity, galaxy-importer,
#      unit tests, and its modules against real Kafka clusters
#   3. Molecule scenarios on real systemd hosts (needs root; skipped, with a notice, otherwise)
# Extra arguments go to pytest. KAFKA_MIRROR_TESTS=engine runs part 1 only.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --test
# Kerberos tests need a confluent-kafka whose librdkafka has GSSAPI (PyPI's has not): build and use it
scripts/build-gssapi-client.sh --install .venv
.venv/bin/ruff check src tests/engine $([ -d bench ] && echo bench)
.venv/bin/mypy
mvn -q -B -f jvm/pom.xml test
# the Kerberos tests must run here, not skip (the GSSAPI client was installed above)
KAFKA_MIRROR_REQUIRE_GSSAPI=1 .venv/bin/python -m pytest "$@"
[ "${KAFKA_MIRROR_TESTS:-all}" = engine ] && exit 0
scripts/ansible-checks.sh lint sanity importer units modules
if [ "$(id -u)" -eq 0 ]; then
  scripts/ansible-molecule.sh
else
  echo "NOTICE: Molecule scenarios skipped: they need root (network namespaces, systemd-nspawn)"
fi
