#!/usr/bin/env bash
# One command: set up (with test tools), then run every test of the project:
#   1. the engine: lint, type-check, JVM unit tests, pytest against real Kafka clusters and Spark
#   2. the Ansible collection's static checks: ansible-lint (production), ansible-test sanity,
#      galaxy-importer, unit tests, AWX entry points; at the lowest CPU priority beside 1
#   3. the collection's modules against real Kafka clusters, and Molecule scenarios on real
#      systemd hosts (needs root; skipped, with a notice, otherwise) side by side
# Extra arguments go to pytest. KAFKA_MIRROR_TESTS=engine runs part 1 only. Long suites (fault
# injection, Molecule) run in a short CI form; KAFKA_MIRROR_FULL=1 runs their full forms.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --test
# Kerberos tests need a confluent-kafka whose librdkafka has GSSAPI (PyPI's has not): build and use it
scripts/build-gssapi-client.sh --install .venv
.venv/bin/ruff check src tests/engine tests/unit/kafka_mirror tests/harness $([ -d bench ] && echo bench)
# the layers of README's module map (the contract is in pyproject.toml)
.venv/bin/lint-imports
.venv/bin/mypy
mvn -q -B -f jvm/pom.xml test
# The test mirrors' Spark driver class data archive (CLASS_DATA_DIR of tests/engine/mirror_process.py,
# kafka_mirror.engine.class_data), built once here before the tests (the benchmark's prime, at
# this script's priority): every test mirror and the benchmark's smoke run then map it. Without
# it, early test mirrors and the smoke run build one at the lowest CPU priority beside the other
# worker's tests, where it starves for minutes. A failed build is not fatal: the mirrors start
# without it (and build one as before).
if .venv/bin/python - <<'PY'
import sys

sys.path[:0] = ["bench", "tests/engine", "tests/harness"]
from kafka_mirror_testing.quick_jvms import use_quick_start_jvms  # noqa: E402
from mirror_bench.class_data import prime  # noqa: E402
from mirror_process import CLASS_DATA_DIR  # noqa: E402

use_quick_start_jvms()  # as every test JVM
prime(CLASS_DATA_DIR, lowest_priority=False)
PY
then :; else echo "note: no class data archive built; the test mirrors start without it"; fi
# The Ansible collection's static checks (no cluster, no port: lint, sanity, importer, units, awx)
# run in the background at the lowest CPU priority while the engine tests run: those leave 5-25 %
# of the 2 CPUs idle (waiting on brokers, Spark and mirrors), which the checks take; the engine
# tests keep the CPUs they want. Their output is printed after the engine tests. The Ansible venv
# (with the GSSAPI client the kerberos step needs) is prepared first, so that nothing changes it
# while the checks and, later, Molecule and the module tests run.
ANSIBLE_STATIC=(lint sanity importer units awx)
static_pid=
if [ "${KAFKA_MIRROR_TESTS:-all}" != engine ]; then
  . scripts/ansible-venv.sh
  ansible_venv .venv-ansible "$PWD"
  scripts/build-gssapi-client.sh --install .venv-ansible | tail -n 2
  .venv-ansible/bin/python -c 'import gssapi' 2>/dev/null \
    || .venv-ansible/bin/pip install -q "$(grep -E '^gssapi' requirements-ansible.txt)"
  static_log=$(mktemp /tmp/kafka-mirror-ansible-static-log.XXXXXX)
  nice -n 19 scripts/ansible-checks.sh "${ANSIBLE_STATIC[@]}" >"$static_log" 2>&1 &
  static_pid=$!
fi
static_done() {  # wait for the static checks, print their output; their exit code
  local code=0
  wait "$static_pid" || code=$?
  echo "== Ansible static checks (${ANSIBLE_STATIC[*]}), run beside the engine tests: exit $code"
  cat "$static_log"
  rm -f "$static_log"
  return "$code"
}
# the Kerberos tests must run here, not skip (the GSSAPI client was installed above); the 25
# slowest tests are listed at the end (where CI time goes). The tests run in
# KAFKA_MIRROR_TEST_WORKERS pytest-xdist workers (default 2: most of a test's time is spent
# waiting on brokers, Spark and mirrors; each worker has its own pair of clusters; the fault
# tests stay on one worker). Should a test process crash (a native library), its core's
# backtrace is printed.
rm -f core core.[0-9]*
rc=0
workers=${KAFKA_MIRROR_TEST_WORKERS:-2}
xdist=()
[ "$workers" -gt 1 ] && xdist=(-n "$workers" --dist loadgroup)
(ulimit -c unlimited 2>/dev/null || true
 KAFKA_MIRROR_REQUIRE_GSSAPI=1 exec .venv/bin/python -m pytest "${xdist[@]}" --durations=25 "$@") \
  || rc=$?
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
if [ -z "$static_pid" ]; then exit "$rc"; fi
static_rc=0
static_done || static_rc=$?
[ "$rc" -eq 0 ] || exit "$rc"
[ "$static_rc" -eq 0 ] || exit "$static_rc"
if [ "$(id -u)" -ne 0 ]; then
  scripts/ansible-checks.sh modules
  echo "NOTICE: Molecule scenarios skipped: they need root (network namespaces, systemd-nspawn)"
  exit 0
fi
# The module tests run beside Molecule: neither keeps the 2 CPUs busy alone (the modules step
# ~60 %: brokers starting, playbooks waiting on them); their brokers are on 127.0.0.1 and the
# Molecule hosts in network namespaces of their own. Their output is printed when Molecule is done.
checks_log=$(mktemp /tmp/kafka-mirror-ansible-checks-log.XXXXXX)
scripts/ansible-checks.sh modules >"$checks_log" 2>&1 &
checks=$!
molecule_rc=0
scripts/ansible-molecule.sh || molecule_rc=$?
checks_rc=0
wait "$checks" || checks_rc=$?
echo "== Ansible module tests, run beside Molecule: exit $checks_rc"
cat "$checks_log"
rm -f "$checks_log"
[ "$checks_rc" -eq 0 ] && [ "$molecule_rc" -eq 0 ]
