#!/usr/bin/env bash
# Installs everything kafka-mirror needs on a fresh Debian/Ubuntu machine:
# Java 17 and Maven (apt), the Python package and its dependencies in .venv (pip), and the
# JVM artifacts (Kafka, MirrorMaker 2, Spark's Kafka connector, the interceptor) via Maven.
# Usage: scripts/setup.sh [--test]     (--test adds the test and lint tools)
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v java >/dev/null 2>&1 || need_apt+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null 2>&1 || need_apt+=(maven)
python3 -c 'import venv, ensurepip' 2>/dev/null || need_apt+=(python3-venv)
if [ "${1:-}" = "--test" ]; then
  # Kerberos tests: a throw-away MIT KDC run by the tests themselves (krb5kdc, kdb5_util,
  # kadmin.local), kinit (librdkafka runs it), Cyrus SASL's GSSAPI plugin (librdkafka's GSSAPI),
  # and the krb5 headers python-gssapi (kafka-python's GSSAPI, in .venv-ansible) is built against.
  # Metrics tests: a real Prometheus server (and promtool), started by the tests on loopback.
  # Dashboard schema test: npm (and node) for Grafana's schema tools (tests/engine/grafanaschema.py)
  command -v npm >/dev/null 2>&1 || need_apt+=(npm)
  for pkg in krb5-kdc krb5-admin-server krb5-user libsasl2-modules-gssapi-mit libkrb5-dev \
      prometheus; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed' || need_apt+=("$pkg")
  done
fi
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "installing with apt-get: ${need_apt[*]}"
  sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${need_apt[@]}"
  # The tests never use a system KDC or Prometheus: when this run installed krb5-kdc /
  # krb5-admin-server / prometheus and their packages started or enabled the services (Debian's
  # postinst does under systemd), stop and disable them. /etc/krb5.conf (written by Debian's
  # krb5-config) is left alone: the tests point KRB5_CONFIG / -Djava.security.krb5.conf at a
  # krb5.conf of their own.
  if [ -d /run/systemd/system ]; then
    for svc in krb5-kdc krb5-admin-server prometheus; do
      [[ " ${need_apt[*]} " == *" $svc "* ]] || continue
      if systemctl is-active --quiet "$svc" || systemctl is-enabled --quiet "$svc" 2>/dev/null; then
        echo "stopping and disabling $svc (started by its package; the tests run their own KDC)"
        $sudo_cmd systemctl disable --now --quiet "$svc" || true
      fi
    done
  fi
fi

python3 - <<'PY'
import sys
if sys.version_info < (3, 11):
    sys.exit(f"kafka-mirror needs Python >= 3.11 (pyspark 4), found {sys.version.split()[0]}")
PY

[ -x .venv/bin/python ] || python3 -m venv .venv
extras=""
[ "${1:-}" = "--test" ] && extras="[test]"
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
# the product, and the test harness beside it (local clusters, KDC, stock MM2, the demo job)
.venv/bin/python -m pip install -q -e ".${extras}" -e tests/harness
if [ "${1:-}" = "--test" ]; then
  # the dashboard schema test's npm tools, pinned by tests/engine/data/grafana-schema's lockfile,
  # and the schema made from them: into a cache outside the repository (printed)
  .venv/bin/python tests/engine/grafanaschema.py
fi

mvn -q -B -f jvm/pom.xml package -DskipTests
echo "setup done: .venv/bin/kafka-mirror is ready"
