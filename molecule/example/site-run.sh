#!/bin/bash
# site-run.sh LOG INVENTORY OVERLAY VARS KRB5_CONF HOSTS [ARG...]   (INVENTORY: the inventory's hosts.yml)
# `ansible-playbook -i INVENTORY kafka.mirror.site [ARG...]` as a user runs it at their site, with what
# the site gives on top: OVERLAY (a second inventory source: the hosts' addresses and SSH login), VARS
# (extra vars: the bundle path, the vault's passwords), KRB5_CONF as KRB5_CONFIG (the modules on the
# controller), and the clusters' names (the lines of HOSTS) in /etc/hosts, bind-mounted in a mount
# namespace of this command only. A clean environment: nothing of Molecule's reaches the run. Its
# output goes to LOG; the last 60 lines are printed; the exit status is ansible-playbook's.
set -u
log=$1 inventory=$2 overlay=$3 vars=$4 krb5=$5 hosts=$6
shift 6
mol_home=${MOL_HOME:-/tmp/kafka-mirror-molecule}
rc=0
env -i PATH="$PATH" HOME="$HOME" LANG=C.UTF-8 \
  ANSIBLE_COLLECTIONS_PATH="$mol_home/collections" ANSIBLE_HOST_KEY_CHECKING=False ANSIBLE_FORCE_COLOR=0 \
  KRB5_CONFIG="$krb5" \
  unshare --mount --propagation private sh -c '
    cat /etc/hosts "$0" > "$1" && mount --bind "$1" /etc/hosts && shift && exec "$@"' \
    "$hosts" "$log.etc-hosts" \
    ansible-playbook -i "$inventory" -i "$overlay" -e "@$vars" kafka.mirror.site "$@" > "$log" 2>&1 || rc=$?
tail -n 60 "$log"
exit $rc
