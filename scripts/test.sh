#!/usr/bin/env bash
# One command: set up (with test tools), then run every test of the project:
#   1. the engine: lint, type-check, JVM unit tests, pytest against real Kafka clusters and Spark
#   2. the Ansible collection: ansible-lint (production), ansible-test sanity, galaxy-importer,
#      unit tests, and its modules against real Kafka clusters
#   3. Molecule scenarios on real systemd hosts (needs root; skipped, with a notice, otherwise),
#      run side by side with 2
# Extra arguments go to pytest. KAFKA_MIRROR_TESTS=engine runs part 1 only. Long suites (fault
# injection, Molecule) run in a short CI form; KAFKA_MIRROR_FULL=1 runs their full forms.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --test
# Kerberos tests need a confluent-kafka whose librdkafka has GSSAPI (PyPI's has not): build and use it
scripts/build-gssapi-client.sh --install .venv
# The Ansible checks' and Molecule's tooling (.venv-ansible, with the GSSAPI client the Kerberos
# steps need) is prepared beside the steps below (pip alone keeps one CPU busy for about 30 s).
ansible_prep='' ansible_prep_log=''
if [ "${KAFKA_MIRROR_TESTS:-all}" != engine ]; then
  ansible_prep_log=$(mktemp /tmp/kafka-mirror-ansible-venv-log.XXXXXX)
  (. scripts/ansible-venv.sh
   ansible_venv .venv-ansible "$PWD"
   scripts/build-gssapi-client.sh --install .venv-ansible | tail -n 2
   .venv-ansible/bin/python -c 'import gssapi' 2>/dev/null \
     || .venv-ansible/bin/pip install -q "$(grep -E '^gssapi' requirements-ansible.txt)") \
    >"$ansible_prep_log" 2>&1 &
  ansible_prep=$!
fi
# The test mirrors' Spark driver class data archive (CLASS_DATA_DIR of tests/engine/mirror_process.py,
# kafka_mirror.engine.class_data), built once here before the tests (the benchmark's prime, at
# this script's priority): every test mirror and the benchmark's smoke run then map it. Without
# it, early test mirrors and the smoke run build one at the lowest CPU priority beside the other
# worker's tests, where it starves for minutes. It is built beside the static checks and the JVM
# unit tests below (alone it keeps about a third of the 2 CPUs busy). A failed build is not fatal:
# the mirrors start without it (and build one as before).
prime_log=$(mktemp /tmp/kafka-mirror-class-data-log.XXXXXX)
.venv/bin/python - >"$prime_log" 2>&1 <<'PY' &
import sys

sys.path[:0] = ["bench", "tests/engine", "tests/harness"]
from kafka_mirror_testing.quick_jvms import use_quick_start_jvms  # noqa: E402
from mirror_bench.class_data import prime  # noqa: E402
from mirror_process import CLASS_DATA_DIR  # noqa: E402

use_quick_start_jvms()  # as every test JVM
sys.exit(prime(CLASS_DATA_DIR, lowest_priority=False) == "failed")
PY
prime=$!
trap 'kill "$prime" $ansible_prep 2>/dev/null || true' EXIT
.venv/bin/ruff check src tests/engine tests/unit/kafka_mirror tests/harness $([ -d bench ] && echo bench)
# the layers of README's module map (the contract is in pyproject.toml)
.venv/bin/lint-imports
.venv/bin/mypy
mvn -q -B -f jvm/pom.xml test
if wait "$prime"; then :; else echo "note: no class data archive built; the test mirrors start without it"; fi
trap '[ -z "$ansible_prep" ] || kill "$ansible_prep" 2>/dev/null || true' EXIT
cat "$prime_log"
rm -f "$prime_log"
# the Kerberos tests must run here, not skip (the GSSAPI client was installed above); the 25
# slowest tests are listed at the end (where CI time goes). The tests run in
# KAFKA_MIRROR_TEST_WORKERS pytest-xdist workers (default 3 on the 2-core CI machine: with 2 the
# CPUs were 70-90 % busy, tests waiting on brokers, Spark and mirrors; with 3, 93-99 %, and the
# tests took 1,069 s instead of 1,346; each worker has its own pair of clusters; the fault tests
# stay on one worker). Should a test process crash (a native library), its core's backtrace is
# printed.
rm -f core core.[0-9]*
rc=0
workers=${KAFKA_MIRROR_TEST_WORKERS:-3}
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
[ "$rc" -eq 0 ] || exit "$rc"
[ "${KAFKA_MIRROR_TESTS:-all}" = engine ] && exit 0
trap - EXIT
if ! wait "$ansible_prep"; then cat "$ansible_prep_log"; echo "preparing .venv-ansible failed"; exit 1; fi
cat "$ansible_prep_log"
rm -f "$ansible_prep_log"
ANSIBLE_STEPS=(lint sanity importer units awx modules)
if [ "$(id -u)" -ne 0 ]; then
  scripts/ansible-checks.sh "${ANSIBLE_STEPS[@]}"
  echo "NOTICE: Molecule scenarios skipped: they need root (network namespaces, systemd-nspawn)"
  exit 0
fi
# The Ansible checks run beside Molecule: neither keeps the 2 CPUs busy alone (the modules step
# ~60 %: brokers starting, playbooks waiting on them), the checks' brokers are on 127.0.0.1 and the
# Molecule hosts in network namespaces of their own. What both use was prepared before the engine
# tests (.venv-ansible), so neither changes it while the other runs. The checks' output is printed
# when Molecule is done.
checks_log=$(mktemp /tmp/kafka-mirror-ansible-checks-log.XXXXXX)
scripts/ansible-checks.sh "${ANSIBLE_STEPS[@]}" >"$checks_log" 2>&1 &
checks=$!
molecule_rc=0
scripts/ansible-molecule.sh || molecule_rc=$?
checks_rc=0
wait "$checks" || checks_rc=$?
echo "== Ansible checks (${ANSIBLE_STEPS[*]}), run beside Molecule: exit $checks_rc"
cat "$checks_log"
rm -f "$checks_log"
[ "$checks_rc" -eq 0 ] && [ "$molecule_rc" -eq 0 ]
