#!/usr/bin/env bash
# One command: set up (with test tools), then run every test of the project:
#   1. the engine: lint, type-check, JVM unit tests, pytest against real Kafka clusters and Spark
#   2. the Ansible collection: ansible-lint (production), ansible-test sanity, galaxy-importer,
#      unit tests, and its modules against real Kafka clusters
#   3. Molecule scenarios on real systemd hosts (needs root; skipped, with a notice, otherwise)
# Parts 2 and 3 run one after the other beside part 1's pytest run; their log follows pytest's.
# Extra arguments go to pytest. KAFKA_MIRROR_TESTS=engine runs part 1 only. Long suites (fault
# injection, Molecule) run in a short CI form; KAFKA_MIRROR_FULL=1 runs their full forms.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --test
# Kerberos tests need a confluent-kafka whose librdkafka has GSSAPI (PyPI's has not): build and use it
scripts/build-gssapi-client.sh --install .venv
.venv/bin/ruff check src tests/engine tests/harness $([ -d bench ] && echo bench)
.venv/bin/mypy
mvn -q -B -f jvm/pom.xml test
# the Kerberos tests must run here, not skip (the GSSAPI client was installed above); the 25
# slowest tests are listed at the end (where CI time goes). The tests run in
# KAFKA_MIRROR_TEST_WORKERS pytest-xdist workers (default 2: most of a test's time is spent
# waiting on brokers, Spark and mirrors; each worker has its own pair of clusters; the fault
# tests stay on one worker). Should a test process crash (a native library), its core's
# backtrace is printed.
# The collection's part (Ansible checks, then Molecule as root) runs beside the engine's pytest:
# the engine's tests mostly wait on brokers, Spark and mirrors (about 0.8 of the 2 cores busy), and
# neither part shares ports, addresses or files with the other. Its output goes to a log that is
# printed once the engine's tests are done.
ansible_part() {
  local part_rc=0
  scripts/ansible-checks.sh lint sanity importer units awx modules || part_rc=1
  if [ "$(id -u)" -eq 0 ]; then
    scripts/ansible-molecule.sh || part_rc=1
  else
    echo "NOTICE: Molecule scenarios skipped: they need root (network namespaces, systemd-nspawn)"
  fi
  return "$part_rc"
}
ansible_log=''
ansible_pid=''
if [ "${KAFKA_MIRROR_TESTS:-all}" != engine ]; then
  ansible_log=$(mktemp /tmp/kafka-mirror-ansible-part.XXXXXX)
  set -m  # its own process group: a test command that stops early ends the whole part
  ansible_part >"$ansible_log" 2>&1 &
  ansible_pid=$!
  set +m
  trap '[ -n "$ansible_pid" ] && kill -- -"$ansible_pid" 2>/dev/null; rm -f "$ansible_log"' EXIT
  trap 'exit 130' INT TERM
  echo "== the collection's checks and Molecule run beside the engine's tests (log: $ansible_log)"
fi
rm -f core core.[0-9]*
rc=0
workers=${KAFKA_MIRROR_TEST_WORKERS:-2}
xdist=()
[ "$workers" -gt 1 ] && xdist=(-n "$workers" --dist loadgroup)
start=$SECONDS
(ulimit -c unlimited 2>/dev/null || true
 KAFKA_MIRROR_REQUIRE_GSSAPI=1 exec .venv/bin/python -m pytest "${xdist[@]}" --durations=25 "$@") \
  || rc=$?
echo "== engine tests: $([ "$rc" -eq 0 ] && echo passed || echo FAILED) ($((SECONDS - start)) s)"
if [ "$rc" -ne 0 ]; then
  for core in core core.[0-9]*; do
    [ -f "$core" ] || continue
    if command -v gdb >/dev/null; then
      gdb -q -batch -iex "set auto-load safe-path /" -ex "info threads" \
        -ex "thread apply all bt 25" -ex "thread apply all py-bt" .venv/bin/python "$core" 2>&1 \
        | grep -v "^\[New LWP" | head -400 || true
    fi
    rm -f "$core"
  done
fi
[ -z "$ansible_pid" ] && exit "$rc"
arc=0
wait "$ansible_pid" || arc=$?
ansible_pid=''
echo "== the collection's checks and Molecule ($((SECONDS - start)) s since the engine's tests began):"
cat "$ansible_log"
[ "$arc" -eq 0 ] || echo "== the collection's part FAILED"
[ "$rc" -eq 0 ] && [ "$arc" -eq 0 ]
