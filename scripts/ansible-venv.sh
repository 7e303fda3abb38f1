# Sourced by scripts/ansible-checks.sh and scripts/ansible-molecule.sh: the controller's Ansible
# tooling in $VENV (requirements-ansible.txt), on a fresh machine too. python-gssapi (kafka-python's
# SASL GSSAPI, for disk_headroom over Kerberos) has no Linux wheel: pip builds it against the MIT
# krb5 headers, so libkrb5-dev and a C compiler are installed first (apt-get, only what is missing;
# sudo when not root).
ansible_venv() {
  local venv=$1 repo=$2 py=${PYTHON:-python3}
  local want stamp=$venv/.requirements-ansible.sha256
  want=$(sha256sum "$repo/requirements-ansible.txt" | cut -d' ' -f1)
  if [ -x "$venv/bin/ansible-test" ] && [ -x "$venv/bin/ansible-lint" ] && [ -x "$venv/bin/molecule" ]; then
    [ "$(cat "$stamp" 2>/dev/null)" = "$want" ] && return 0
    # an existing venv of an older requirements-ansible.txt: brought to this one
    echo "== updating $venv (requirements-ansible.txt changed)"
    "$venv/bin/pip" install -q -r "$repo/requirements-ansible.txt" && echo "$want" >"$stamp"
    return
  fi
  local missing=() p
  for p in libkrb5-dev gcc; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  "$py" -c 'import venv, ensurepip' 2>/dev/null || missing+=(python3-venv)
  if [ ${#missing[@]} -gt 0 ]; then
    echo "installing with apt-get: ${missing[*]}"
    local sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
  echo "== creating $venv"
  "$py" -m venv "$venv"
  "$venv/bin/pip" install -q --upgrade pip
  "$venv/bin/pip" install -q -r "$repo/requirements-ansible.txt"
  echo "$want" >"$stamp"
}
