#!/bin/bash
# Static checks of the kafka.mirror Ansible collection, from a fresh clone:
#   1. ansible-lint --profile production
#   2. ansible-test sanity --local on the built artifact (ansible-galaxy collection build), unpacked
#   3. galaxy-importer on the built artifact (without its own ansible-lint run: Galaxy reports that
#      run's findings as warnings only, and step 1 lints the same content with the production profile)
# The unit and module tests also run from the built artifact: what ships is what is tested.
# Creates .venv-ansible from requirements-ansible.txt when missing. Exits non-zero on any failure.
#   units:   pytest unit tests of module_utils and filters (tests/unit/plugins)
#   render:  the mirror role's topology as data (mirror_clusters + mirror_flows: active-active,
#            aggregation, the single-flow shorthand): mm2.properties rendered with the role's own template,
#            then read by the kafka-mirror engine (check-config and its Properties reader: exact flows,
#            per-cluster security, a password with \ " # = : ! $ { and non-ASCII byte for byte); the
#            preflight refuses broken topologies (tests/integration/topology.yml); inventories/fleet renders
#            each host's own flows (tests/integration/topology_fleet.yml). No cluster needed; the
#            engine is $KAFKA_MIRROR_CLI (default .venv/bin/kafka-mirror). Also run first by `modules`.
#   monitoring: the mirror role's monitoring entry point (file_sd targets, alert rules, Grafana dashboard and
#            provider) applied to a local directory: in check mode on nothing (writes nothing), for real,
#            again (no change), in check mode again (no change); then promtool check config on a
#            prometheus.yml that reads the target and rule files (tests/integration/monitoring*.yml).
#            Needs promtool (Debian package prometheus). Also run by `render`.
#   jmx:     the mirror role's JMX exporter settings (bind address, basic authentication, HTTPS) rendered
#            with its own template and -javaagent argument (tests/integration/jmx_exporter.yml), then a
#            small JVM with the real jmx_prometheus_javaagent 1.0.1 on 127.0.0.1: HTTPS with the right
#            credentials answers, a wrong password gets 401, plain HTTP and 127.0.0.2 get nothing; then
#            kafka.mirror.rolling_restart waits for it over HTTPS with basic authentication
#            (tests/integration/jmx_exporter.py; needs a JDK: java, javac, keytool). Also run by `render`.
#   modules: the modules against two real single-node Kafka clusters on 127.0.0.1 (needs the jars of
#            `mvn -f jvm/pom.xml package`; tests/integration/modules.yml), then against a third one with
#            SASL_PLAINTEXT (PLAIN, SCRAM-SHA-512, OAUTHBEARER) and SSL listeners (tests/integration/modules_secured.yml,
#            run with -vvv; fails when a password shows up in the output), then the kerberos step
#   flows:   kafka.mirror.preflight (disk headroom) and kafka.mirror.topics for hosts with mirror_flows
#            (active-active, aggregation, a flow shared by two hosts, a disabled flow) against three
#            single-node clusters on 127.0.0.1 of its own (ports $FLOWS_PORTS, default 29392 29492 29592),
#            after the single-flow shorthand's tests/integration/flows_per_host.yml on two of them:
#            --check plans and creates nothing, then each flow's topics are created once, then a second
#            run changes nothing (tests/integration/flows_topology.yml); also run by `modules`, on its clusters
#   awx:     kafka.mirror.awx_configure and the AWX entry points (playbooks/awx/) pass
#            ansible-playbook --syntax-check with awx.awx resolved, and execution-environment.yml passes
#            ansible-builder's own validation (`ansible-builder create`: writes the build context, builds
#            nothing; no container engine here). The data files are checked by the units step
#            (tests/unit/awx). No controller is contacted.
#   kerberos: the modules over SASL GSSAPI against a real MIT KDC and a Kerberized broker, both started
#            by tests/integration/kerberos_cluster.py (tests/integration/modules_kerberos.yml, -vvv; fails
#            when key material of a keytab shows up). Installs the GSSAPI confluent-kafka wheel
#            (scripts/build-gssapi-client.sh) and the gssapi package into the venv first.
# Usage: scripts/ansible-checks.sh [lint|sanity|importer|units|awx|render|monitoring|jmx|modules|flows|kerberos ...]   (default: lint sanity importer units awx)
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
VENV=${ANSIBLE_VENV:-$REPO/.venv-ansible}
STEPS=("$@")
[ ${#STEPS[@]} -eq 0 ] && STEPS=(lint sanity importer units awx)

# shellcheck source=scripts/ansible-venv.sh
. "$REPO/scripts/ansible-venv.sh"
ansible_venv "$VENV" "$REPO"
export PATH="$VENV/bin:$PATH"
WORK=$(mktemp -d /tmp/kafka-mirror-ansible-checks.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
failed=()

# The collection as it ships: `ansible-galaxy collection build` from the repository (galaxy.yml's
# build_ignore decides what ships), built once per run; every step below tests this artifact.
ARTIFACT=''
build_artifact() {
  [ -n "$ARTIFACT" ] && return 0
  (cd "$REPO" && ansible-galaxy collection build --force --output-path "$WORK/dist" >/dev/null)
  ARTIFACT=$(ls "$WORK"/dist/kafka-mirror-*.tar.gz)
  echo "built $(basename "$ARTIFACT") ($(du -h "$ARTIFACT" | cut -f1), $(tar -tzf "$ARTIFACT" | grep -vc '/$') files)"
}

# The built artifact unpacked at DEST (an ansible_collections/kafka/mirror directory).
copy_collection() {
  local dest=$1
  build_artifact
  mkdir -p "$dest"
  tar -C "$dest" -xzf "$ARTIFACT"
}

# awx.awx, which kafka.mirror.awx_configure uses (an optional dependency: docs/awx.md), for lint, the
# importer and the syntax check. Galaxy is not reachable from the test machines; the `ansible`
# community package on PyPI ships awx.awx (ansible 12.3.0: awx.awx 24.6.1), so only that collection
# is taken from its wheel (checked against the sha256 below) into a cache directory, once.
AWX_ANSIBLE_VERSION=12.3.0
AWX_ANSIBLE_WHEEL=ansible-$AWX_ANSIBLE_VERSION-py3-none-any.whl
AWX_ANSIBLE_WHEEL_SHA256=cd156f82fa87f7a899212b0efa9f7ca3a24d609212de9f78428a572eb01e5414
AWX_COLLECTIONS=${KAFKA_MIRROR_CACHE:-$HOME/.cache/kafka-mirror}/awx-collections
awx_collection() {
  local dl=$WORK/awx-download
  # one install at a time (the test command runs two of these scripts side by side)
  mkdir -p "$(dirname "$AWX_COLLECTIONS")"
  exec 8>"$AWX_COLLECTIONS.lock"
  flock 8
  if [ ! -f "$AWX_COLLECTIONS/ansible_collections/awx/awx/MANIFEST.json" ]; then
    echo "== awx.awx from PyPI's ansible package ($AWX_ANSIBLE_WHEEL) into $AWX_COLLECTIONS"
    mkdir -p "$dl"
    pip download -q --no-deps -d "$dl" "ansible==$AWX_ANSIBLE_VERSION" || return 1
    [ "$(sha256sum "$dl/$AWX_ANSIBLE_WHEEL" | cut -d' ' -f1)" = "$AWX_ANSIBLE_WHEEL_SHA256" ] \
      || { echo "sha256 mismatch: $dl/$AWX_ANSIBLE_WHEEL"; return 1; }
    rm -rf "$AWX_COLLECTIONS.part" && mkdir -p "$AWX_COLLECTIONS.part"
    python - "$dl/$AWX_ANSIBLE_WHEEL" "$AWX_COLLECTIONS.part" <<'PY'
import sys
import zipfile
with zipfile.ZipFile(sys.argv[1]) as whl:
    whl.extractall(sys.argv[2], [n for n in whl.namelist() if n.startswith('ansible_collections/awx/awx/')])
PY
    rm -rf "$AWX_COLLECTIONS" && mv "$AWX_COLLECTIONS.part" "$AWX_COLLECTIONS" && rm -rf "$dl"
  fi
  exec 8>&-
  export ANSIBLE_COLLECTIONS_PATH=$AWX_COLLECTIONS
}

run_lint() {
  echo "== ansible-lint --profile production"
  awx_collection || return 1
  (cd "$REPO" && ansible-lint --profile production --format=pep8 \
     --exclude .ansible --exclude .venv --exclude "$(basename "$VENV")" --exclude src --exclude jvm \
     --exclude bench --exclude tests/output --exclude molecule/_shared/kafka-bin)
}

run_sanity() {
  echo "== ansible-test sanity --local"
  local coll=$WORK/sanity/ansible_collections/kafka/mirror
  copy_collection "$coll"
  (cd "$coll" && git init -q && git add -A && git -c user.email=ci@localhost -c user.name=ci commit -qm sanity)
  # ansible-test bootstraps pip from a host that is not reachable here: a stand-in that uses ensurepip.
  local cache=$HOME/.ansible/test/cache
  mkdir -p "$cache"
  for v in 24_2; do
    [ -f "$cache/get_pip_$v.py" ] || cat > "$cache/get_pip_$v.py" <<'EOF'
"""Stand-in for get-pip.py: bootstrap pip with ensurepip, then install the requested packages."""
import ensurepip
import os
import subprocess
import sys

ensurepip.bootstrap(upgrade=True)
env = dict(os.environ)
env.pop('PIP_CONFIG_FILE', None)
args = [a for a in sys.argv[1:] if a not in ('--no-setuptools', '--no-wheel')]
sys.exit(subprocess.call([sys.executable, '-m', 'pip', 'install'] + args, env=env))
EOF
  done
  local pyver
  pyver=$(python -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  (cd "$coll" && ansible-test sanity --local --python "$pyver" --color no)
}

run_importer() {
  echo "== ansible-galaxy collection build + galaxy-importer"
  build_artifact
  awx_collection || return 1
  local tarball=$ARTIFACT
  cat > "$WORK/galaxy-importer.cfg" <<'EOF'
[galaxy-importer]
LOG_LEVEL_MAIN = INFO
RUN_ANSIBLE_TEST = False
RUN_ANSIBLE_LINT = False
ANSIBLE_LOCAL_TMP = /tmp/kafka-mirror-importer-tmp
EOF
  (cd "$WORK" && GALAXY_IMPORTER_CONFIG=$WORK/galaxy-importer.cfg python -m galaxy_importer.main "$tarball") | tee "$WORK/importer.log"
  if grep -qE '^(ERROR|CRITICAL)|ImporterError' "$WORK/importer.log"; then return 1; fi
}

run_units() {
  echo "== unit tests"
  local root=$WORK/units
  copy_collection "$root/ansible_collections/kafka/mirror"
  (cd "$root" && PYTHONPATH=$root python -m pytest -q -p no:cacheprovider -W ignore::DeprecationWarning \
     ansible_collections/kafka/mirror/tests/unit/plugins ansible_collections/kafka/mirror/tests/unit/awx)
}

run_awx() {
  echo "== AWX: syntax check of kafka.mirror.awx_configure and playbooks/awx/, ansible-builder create"
  local root=$WORK/awx pb
  awx_collection || return 1
  copy_collection "$root/ansible_collections/kafka/mirror"
  for pb in awx_configure.yml awx_keytabs.yml awx/site.yml awx/preflight.yml awx/topics.yml awx/rolling_restart.yml; do
    ANSIBLE_COLLECTIONS_PATH=$root:$AWX_COLLECTIONS ansible-playbook --syntax-check -i localhost, \
      "$root/ansible_collections/kafka/mirror/playbooks/$pb" >"$WORK/awx-syntax.log" 2>&1 \
      || { cat "$WORK/awx-syntax.log"; echo "syntax check failed: playbooks/$pb"; return 1; }
    echo "syntax ok: playbooks/$pb"
  done
  # execution-environment.yml: ansible-builder's schema and file checks, then the build context it
  # writes (the artifact and, when built, the GSSAPI wheel of scripts/build-gssapi-client.sh)
  python -c 'import ansible_builder' 2>/dev/null || pip install -q "$(grep -E '^ansible-builder' "$REPO/requirements-ansible.txt")" || return 1
  local ee=$WORK/ee
  mkdir -p "$ee/build/collection" "$ee/build/wheels"
  cp "$REPO/execution-environment.yml" "$ee/" && cp -r "$REPO/meta" "$ee/" && cp "$ARTIFACT" "$ee/build/collection/"
  cp "$REPO"/build/wheels/confluent_kafka-*+gssapi-cp311-*.whl "$ee/build/wheels/" 2>/dev/null \
    || echo "note: no GSSAPI wheel in build/wheels (scripts/build-gssapi-client.sh): the context lacks it"
  ansible-builder create -f "$ee/execution-environment.yml" -c "$ee/context" >"$WORK/ee.log" 2>&1 \
    || { cat "$WORK/ee.log"; echo "ansible-builder create failed"; return 1; }
  grep -q 'pip install .*gssapi-wheels/confluent_kafka' "$ee/context/Dockerfile" \
    && grep -q 'ansible-galaxy collection install' "$ee/context/Dockerfile" \
    && grep -qx confluent-kafka "$ee/context/_build/exclude-requirements.txt" \
    && ls "$ee"/context/_build/collections/kafka-mirror-*.tar.gz >/dev/null \
    || { cat "$ee/context/Dockerfile"; echo "unexpected build context"; return 1; }
  echo "ansible-builder create: ok ($(find "$ee/context/_build" -type f | wc -l) files in the context)"
}

run_render() {
  echo "== mirror role topology rendered and read by the engine"
  local root=$WORK/render cli=${KAFKA_MIRROR_CLI:-$REPO/.venv/bin/kafka-mirror}
  [ -x "$cli" ] || { echo "no kafka-mirror engine at $cli (pip install -e . into .venv, or set KAFKA_MIRROR_CLI)"; return 1; }
  copy_collection "$root/ansible_collections/kafka/mirror"
  ANSIBLE_COLLECTIONS_PATH=$root ansible-playbook -i localhost, -c local -e ansible_python_interpreter="$(command -v python)" \
    -e topology_cli="$cli" -e topology_collection_dir="$root/ansible_collections/kafka/mirror" \
    "$REPO/tests/integration/topology.yml" >"$WORK/render.log" 2>&1 \
    || { tail -80 "$WORK/render.log"; echo "topology.yml failed (full output: $WORK/render.log)"; return 1; }
  grep -E '^(PLAY \[|localhost +:)' "$WORK/render.log"
  # the documented fleet inventory: each host's own flows and clusters (rendering only: no bundle
  # needed, a wheel name stands for it)
  ANSIBLE_COLLECTIONS_PATH=$root ansible-playbook -i "$REPO/inventories/fleet/hosts.yml" -c local -e ansible_python_interpreter="$(command -v python)" \
    -e kafka_mirror_bundle_dir= -e mirror_wheel=kafka_mirror-0.1.0-py3-none-any.whl -e mirror_jmx_exporter_jar_src=jmx_prometheus_javaagent-1.0.1.jar \
    -e topology_cli="$cli" -e topology_collection_dir="$root/ansible_collections/kafka/mirror" \
    -e vault_mirror_dc2_password=dc2-secret -e vault_mirror_dc3_password=dc3 \
    "$REPO/tests/integration/topology_fleet.yml" >"$WORK/render-fleet.log" 2>&1 \
    || { tail -80 "$WORK/render-fleet.log"; echo "topology_fleet.yml failed (full output: $WORK/render-fleet.log)"; return 1; }
  grep -E '^(PLAY \[|mirror0[0-9.a-z]+ +:)' "$WORK/render-fleet.log"
  run_monitoring || return 1
  run_jmx
}

run_jmx() {
  echo "== mirror role JMX exporter: bind address, basic authentication, HTTPS against the real agent"
  local root=$WORK/jmx-collection
  copy_collection "$root/ansible_collections/kafka/mirror"
  python "$REPO/tests/integration/jmx_exporter.py" "$root" "$WORK/jmx"
}

run_monitoring() {
  echo "== mirror role monitoring content (file_sd, rules, dashboard) applied locally, checked by promtool"
  local root=$WORK/monitoring-collection dir=$WORK/monitoring n=0 mode want changed log
  command -v promtool >/dev/null || { echo "promtool not found (Debian package prometheus)"; return 1; }
  copy_collection "$root/ansible_collections/kafka/mirror"
  # check mode on nothing, for real, again, check mode again: expected changed counts
  for mode in check:changed apply:changed apply:0 check:0; do
    n=$((n + 1)); want=${mode#*:}; log=$WORK/monitoring-$n.log
    ANSIBLE_COLLECTIONS_PATH=$root ansible-playbook -i "$REPO/tests/integration/monitoring_inventory.yml" \
      -e ansible_python_interpreter="$(command -v python)" -e monitoring_dir="$dir" \
      $([ "${mode%%:*}" = check ] && echo --check) "$REPO/tests/integration/monitoring.yml" >"$log" 2>&1 \
      || { tail -60 "$log"; echo "monitoring.yml (${mode%%:*}) failed (full output: $log)"; return 1; }
    changed=$(sed -nE 's/^localhost +: ok=[0-9]+ +changed=([0-9]+).*/\1/p' "$log")
    echo "run $n (${mode%%:*}): changed=$changed"
    if [ "$want" = changed ]; then
      [ "${changed:-0}" -gt 0 ] || { tail -40 "$log"; echo "expected changes"; return 1; }
    else
      [ "$changed" = 0 ] || { grep -B3 -E '^changed: ' "$log" | tail -40; echo "expected no change"; return 1; }
    fi
    if [ $n -eq 1 ] && [ -e "$dir" ]; then echo "check mode wrote into $dir"; find "$dir" | head; return 1; fi
  done
  grep -q 'RUNNING HANDLER \[kafka.mirror.mirror : Reload Prometheus\]' "$WORK/monitoring-2.log" \
    || { echo "the changed rules did not notify Reload Prometheus"; return 1; }
  ANSIBLE_COLLECTIONS_PATH=$root ansible-playbook -i "$REPO/tests/integration/monitoring_inventory.yml" \
    -e ansible_python_interpreter="$(command -v python)" -e monitoring_dir="$dir" \
    -e monitoring_collection_dir="$root/ansible_collections/kafka/mirror" \
    "$REPO/tests/integration/monitoring_verify.yml" >"$WORK/monitoring-verify.log" 2>&1 \
    || { tail -60 "$WORK/monitoring-verify.log"; echo "monitoring_verify.yml failed"; return 1; }
  grep -E '^(PLAY \[|localhost +:)' "$WORK/monitoring-verify.log"
}

run_modules() {
  echo "== modules against real clusters"
  local root=$WORK/modules rc=0
  run_render || return 1
  copy_collection "$root/ansible_collections/kafka/mirror"
  # A third cluster with SASL_PLAINTEXT (PLAIN, SCRAM-SHA-512), SSL and OAUTHBEARER listeners (the
  # latter's JWTs from a Keycloak it starts: about a minute more the first time on a machine, while
  # Keycloak's distribution is fetched and built into the cache) and random passwords, for
  # modules_secured.yml below. It is started first, as its start (Keycloak's: 66 s in a CI run) is
  # mostly waiting: it comes up while the plays against the plain clusters run (its ports are
  # random ones of the harness, which leaves out the fixed ports of the clusters here).
  local secured_pid='' vars=$WORK/secured-vars.json play_log=$WORK/modules-secured.log
  rm -f "$vars"
  python "$REPO/tests/integration/secured_cluster.py" "$WORK/secured" "$vars" >"$WORK/secured-cluster.log" 2>&1 &
  secured_pid=$!
  export MOL_HOME=$WORK/clusters
  bash "$REPO/molecule/_shared/kafka-test-cluster.sh" start checks-src 127.0.0.1 29092 || rc=1
  [ $rc -ne 0 ] || bash "$REPO/molecule/_shared/kafka-test-cluster.sh" start checks-dst 127.0.0.1 29192 || rc=1
  if [ $rc -eq 0 ]; then
    python "$REPO/tests/integration/seed.py" 29092 && \
    ANSIBLE_COLLECTIONS_PATH=$root ansible-playbook -i localhost, -c local -e ansible_python_interpreter="$(command -v python)" \
      -e src_port=29092 -e dst_port=29192 "$REPO/tests/integration/modules.yml" || rc=1
    # the topics playbook for three hosts: each host's own flow, once per distinct flow
    [ $rc -eq 0 ] && { ANSIBLE_COLLECTIONS_PATH=$root ansible-playbook -i "$REPO/tests/integration/flows_inventory.yml" \
      -e ansible_python_interpreter="$(command -v python)" -e src_port=29092 -e dst_port=29192 \
      "$REPO/tests/integration/flows_per_host.yml" || rc=1; }
    # hosts with mirror_flows: these two clusters and a third one
    if [ $rc -eq 0 ]; then
      if bash "$REPO/molecule/_shared/kafka-test-cluster.sh" start checks-c 127.0.0.1 29292; then
        run_flows_topology "$root" 29092 29192 29292 || rc=1
      else
        rc=1
      fi
      bash "$REPO/molecule/_shared/kafka-test-cluster.sh" stop checks-c || true
    fi
  fi
  # the secured cluster started above
  if [ $rc -eq 0 ]; then
    for _ in $(seq 480); do
      [ -f "$vars" ] && break
      kill -0 "$secured_pid" 2>/dev/null || break
      sleep 0.5
    done
    cat "$WORK/secured-cluster.log"
    [ -f "$vars" ] || { echo "secured cluster did not start"; tail -30 "$WORK"/secured/secured.log 2>/dev/null; rc=1; }
  fi
  if [ $rc -eq 0 ]; then
    # -vvv: module arguments and results are in the output, which must not hold any password
    if ANSIBLE_COLLECTIONS_PATH=$root ansible-playbook -vvv -i localhost, -c local -e ansible_python_interpreter="$(command -v python)" \
         -e src_port=29092 -e dst_port=29192 -e "@$vars" "$REPO/tests/integration/modules_secured.yml" >"$play_log" 2>&1; then
      grep -E '^(TASK \[|localhost +:)' "$play_log" || true
    else
      tail -150 "$play_log"; echo "modules_secured.yml failed (full -vvv output: $play_log)"; rc=1
    fi
    local leaked
    leaked=$(python - "$vars" "$play_log" <<'PY'
import json
import sys
secrets = json.load(open(sys.argv[1]))
text = open(sys.argv[2], errors='replace').read()
print(' '.join(k for k in ('plain_password', 'scram_password', 'wrong_password', 'oauth_client_secret') if secrets[k] in text))
PY
)
    if [ -n "$leaked" ]; then echo "SECRET LEAK: $leaked found in the -vvv output"; rc=1; else echo "no password in the -vvv output ($(wc -l <"$play_log") lines)"; fi
  fi
  if [ -n "$secured_pid" ]; then kill -TERM "$secured_pid" 2>/dev/null || true; wait "$secured_pid" 2>/dev/null || true; fi
  bash "$REPO/molecule/_shared/kafka-test-cluster.sh" stop checks-src || true
  bash "$REPO/molecule/_shared/kafka-test-cluster.sh" stop checks-dst || true
  run_kerberos || rc=1
  return $rc
}

# tests/integration/flows_topology.yml against the running clusters xa, xb, xc (ports $2 $3 $4), with
# the collection under $1: --check first (plan), then apply, then again (no change).
run_flows_topology() {
  local root=$1 phase log
  for phase in plan apply again; do
    log=$WORK/flows-$phase.log
    local check=(); [ "$phase" = plan ] && check=(--check)
    if ANSIBLE_COLLECTIONS_PATH=$root ansible-playbook -i "$REPO/tests/integration/flows_topology_inventory.yml" \
         -e ansible_python_interpreter="$(command -v python)" -e xa_port="$2" -e xb_port="$3" -e xc_port="$4" \
         -e flows_phase=$phase "${check[@]}" "$REPO/tests/integration/flows_topology.yml" >"$log" 2>&1; then
      echo "flows_topology.yml $phase${check[*]:+ (--check)}: ok"
      grep -E '^(mirror-[a-z]+|localhost) +:' "$log"
    else
      tail -80 "$log"; echo "flows_topology.yml $phase failed (full output: $log)"; return 1
    fi
  done
}

run_flows() {
  echo "== topics and disk headroom per flow (mirror_flows) against three real clusters"
  local root=$WORK/flows rc=0 ports name i=0
  read -r -a ports <<<"${FLOWS_PORTS:-29392 29492 29592}"
  copy_collection "$root/ansible_collections/kafka/mirror"
  export MOL_HOME=$WORK/clusters
  for name in flows-xa flows-xb flows-xc; do
    bash "$REPO/molecule/_shared/kafka-test-cluster.sh" start "$name" 127.0.0.1 "${ports[$i]}" || { rc=1; break; }
    i=$((i + 1))
  done
  # the single-flow shorthand as before (tests/integration/flows_per_host.yml), then hosts with mirror_flows
  if [ $rc -eq 0 ]; then
    python "$REPO/tests/integration/seed.py" "${ports[0]}" >/dev/null && \
    ANSIBLE_COLLECTIONS_PATH=$root ansible-playbook -i "$REPO/tests/integration/flows_inventory.yml" \
      -e ansible_python_interpreter="$(command -v python)" -e src_port="${ports[0]}" -e dst_port="${ports[1]}" \
      "$REPO/tests/integration/flows_per_host.yml" >"$WORK/flows-single.log" 2>&1 \
      && { echo "flows_per_host.yml (single-flow variables): ok"; grep -E '^mirror-[a-z]+ +:' "$WORK/flows-single.log"; } \
      || { tail -60 "$WORK/flows-single.log"; echo "flows_per_host.yml failed"; rc=1; }
  fi
  [ $rc -eq 0 ] && { run_flows_topology "$root" "${ports[@]}" || rc=1; }
  for name in flows-xa flows-xb flows-xc; do bash "$REPO/molecule/_shared/kafka-test-cluster.sh" stop "$name" || true; done
  return $rc
}

run_kerberos() {
  echo "== modules over Kerberos (SASL GSSAPI), real KDC"
  local root=$WORK/kerberos rc=0 pid='' vars=$WORK/kerberos-vars.json keys=$WORK/kerberos-keys.json
  local play_log=$WORK/modules-kerberos.log
  # mirror_topics: a confluent-kafka with GSSAPI (PyPI's has none); disk_headroom: python-gssapi
  "$REPO/scripts/build-gssapi-client.sh" --install "$VENV" | tail -n 2 || return 1
  python -c 'import gssapi' 2>/dev/null || pip install -q "$(grep -E '^gssapi' "$REPO/requirements-ansible.txt")" || return 1
  copy_collection "$root/ansible_collections/kafka/mirror"
  python "$REPO/tests/integration/kerberos_cluster.py" "$WORK/kerberos-cluster" "$vars" "$keys" >"$WORK/kerberos-cluster.log" 2>&1 &
  pid=$!
  for _ in $(seq 240); do
    [ -f "$vars" ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.5
  done
  cat "$WORK/kerberos-cluster.log"
  [ -f "$vars" ] || { echo "Kerberized cluster did not start"; tail -30 "$WORK"/kerberos-cluster/kerberized.log 2>/dev/null; rc=1; }
  if [ $rc -eq 0 ]; then
    if ANSIBLE_COLLECTIONS_PATH=$root ansible-playbook -vvv -i localhost, -c local -e ansible_python_interpreter="$(command -v python)" \
         -e "@$vars" "$REPO/tests/integration/modules_kerberos.yml" >"$play_log" 2>&1; then
      grep -E '^(TASK \[|localhost +:)' "$play_log" || true
    else
      tail -150 "$play_log"; echo "modules_kerberos.yml failed (full -vvv output: $play_log)"; rc=1
    fi
    local leaked
    leaked=$(python - "$keys" "$play_log" <<'PY'
import json
import sys
keys = json.load(open(sys.argv[1]))
text = open(sys.argv[2], errors='replace').read().lower()
print(sum(1 for k in keys if k.lower() in text))
PY
)
    if [ "$leaked" != 0 ]; then echo "SECRET LEAK: $leaked keytab keys found in the -vvv output"; rc=1
    else echo "no keytab key in the -vvv output ($(wc -l <"$play_log") lines)"; fi
  fi
  if [ -n "$pid" ]; then kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  return $rc
}

for step in "${STEPS[@]}"; do
  start=$SECONDS
  if "run_$step"; then echo "== $step: ok ($((SECONDS - start)) s)"; else echo "== $step: FAILED ($((SECONDS - start)) s)"; failed+=("$step"); fi
done
if [ ${#failed[@]} -gt 0 ]; then echo "FAILED: ${failed[*]}"; exit 1; fi
echo "all ansible checks passed"
