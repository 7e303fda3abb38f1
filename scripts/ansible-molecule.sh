#!/bin/bash
# Molecule scenarios of the kafka.mirror collection on real systemd hosts (systemd-nspawn), from a
# fresh clone. Needs root (network namespaces, bridge, overlay mounts), Java + Maven (jars),
# debootstrap + systemd-container (installed from the Debian mirror apt already uses, on first use).
# Usage: scripts/ansible-molecule.sh [default] [supervisord] [spark_cluster] [kerberos] [fleet] [example]
#   Without names: the CI form (the test command's set), default and kerberos: the kafka_mirror
#   engine on systemd and stock MirrorMaker 2 on systemd and supervisord (default), Kerberos with
#   both engines (kerberos without its idempotence run). KAFKA_MIRROR_FULL=1 makes it the full
#   form: all six with every step, adding supervisord (the
#   kafka_mirror engine under supervisord), spark_cluster (a standalone cluster of 2 workers),
#   fleet (3 hosts, topology as data, several instances per host, rolling restart) and example
#   (inventories/example converged as shipped: its 3 hosts, its 3-node GSSAPI and SCRAM clusters).
# Two runs of this script may be side by side when their scenarios share no host address and no
# controller-side cluster (scripts/test.sh runs kerberos beside default): the bridge, its blackhole
# route, the rootfs and the controller's artifacts are shared under locks, and the bridge goes with
# the last host.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
VENV=${ANSIBLE_VENV:-$REPO/.venv-ansible}
SCENARIOS=("$@")
if [ ${#SCENARIOS[@]} -eq 0 ]; then
  case ${KAFKA_MIRROR_FULL:-0} in
    ""|0) SCENARIOS=(default kerberos) ;;
    *) SCENARIOS=(default supervisord spark_cluster kerberos fleet example) ;;
  esac
fi
[ "$(id -u)" -eq 0 ] || { echo "molecule scenarios need root (network namespaces, nspawn)"; exit 2; }

# shellcheck source=scripts/ansible-venv.sh
. "$REPO/scripts/ansible-venv.sh"
ansible_venv "$VENV" "$REPO"
export PATH="$VENV/bin:$PATH"
export MOL_HOME=${MOL_HOME:-/tmp/kafka-mirror-molecule}
export ANSIBLE_FORCE_COLOR=0 PY_COLORS=0

cd "$REPO"
# the molecule hosts have no network: artifacts + rootfs are prepared on the controller
bash molecule/_shared/prepare-controller.sh
bash molecule/_shared/nspawn-host.sh rootfs

# The CI form's kerberos scenario skips its idempotence run (140 s of the 2-core CI machine's time;
# the default scenario's second site run covers the tasks both share, and the Kerberos tasks'
# second run is in the full form: kerberos and fleet): destroy, converge (which creates and
# prepares first), verify, destroy. The CI form's default scenario skips Molecule's idempotence run
# too (156 s in CI): its rolling apply is that second run, on the converged hosts, and fails on any
# changed task but the one its change touches and the restart's own. In the CI form the rolling
# apply has no deferred step and no revert (a site run each), and the default scenario no test of
# kafka.mirror.rolling_restart of its own (the rolling apply restarts km-default through the same
# tasks); the full form runs them. The full form runs every scenario's whole sequence.
# Each step's start is stamped with the seconds since the scenario began (where CI time goes).
stamp_steps() {
  local start=$SECONDS line
  while IFS= read -r line; do
    case $line in
      *"] Executing"*|*"] Executed:"*) printf '[%s s] %s\n' "$((SECONDS - start))" "$line" ;;
      *) printf '%s\n' "$line" ;;
    esac
  done
}
scenario_steps() {
  local s=$1 step
  if [ "$s" = kerberos ] && [ "${KAFKA_MIRROR_FULL:-0}" = 0 ]; then
    for step in destroy converge verify destroy; do
      molecule "$step" -s "$s" || return 1
    done
  elif [ "$s" = default ] && [ "${KAFKA_MIRROR_FULL:-0}" = 0 ]; then
    # without Molecule's idempotence run: the rolling apply is a second site run on the converged
    # hosts that must change nothing but the task its change touches and the restart's own
    # (molecule/_shared/tests/test_rolling_apply.py); the full form keeps it
    for step in destroy converge side-effect verify cleanup destroy; do
      molecule "$step" -s "$s" || return 1
    done
  else
    molecule test -s "$s"
  fi
}
scenario_test() {
  scenario_steps "$1" 2>&1 | stamp_steps
}

failed=()
for s in "${SCENARIOS[@]}"; do
  start=$SECONDS
  if scenario_test "$s"; then
    echo "== molecule $s: passed ($((SECONDS - start)) s)"
  else
    echo "== molecule $s: FAILED ($((SECONDS - start)) s)"
    failed+=("$s")
    molecule destroy -s "$s" || true
  fi
done
bash molecule/_shared/nspawn-host.sh cleanup || true
echo "$(( ${#SCENARIOS[@]} - ${#failed[@]} )) passed, ${#failed[@]} failed"
[ ${#failed[@]} -eq 0 ]
