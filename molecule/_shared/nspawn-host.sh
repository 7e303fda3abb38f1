#!/bin/bash
# systemd-nspawn test hosts for Molecule, on a machine WITHOUT systemd as PID 1 (no machined, no dbus needed).
#   nspawn-host.sh rootfs              build the shared Debian rootfs once (debootstrap; apt mirror only)
#   nspawn-host.sh up   NAME IP [USER] boot NAME (systemd = PID 1) with eth0=IP/24 on bridge $MOL_BRIDGE; wait for sshd.
#                                      USER (not root): an SSH login user with passwordless sudo, as Ansible's become needs
#   nspawn-host.sh down NAME           orderly poweroff + remove netns, overlay, cgroups
#   nspawn-host.sh mem  NAME           PSS of all processes of NAME, overlay disk use
#   nspawn-host.sh cleanup             after the last host: remove bridge + safety route
set -euo pipefail
MOL_HOME=${MOL_HOME:-/tmp/kafka-mirror-molecule}
ROOTFS=${MOL_ROOTFS:-$MOL_HOME/rootfs}
KEY=$MOL_HOME/id_ed25519
STATE=$MOL_HOME/hosts
BR=${MOL_BRIDGE:-kmbr0}
BR_CIDR=${MOL_BRIDGE_CIDR:-10.77.0.1/24}
SUITE=${MOL_SUITE:-bookworm}
# Debian mirror: the one apt on this machine already uses (first URIs line of its sources)
apt_mirror() { { grep -h -E '^(URIs:|deb )' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list /etc/apt/sources.list 2>/dev/null || true; } \
  | head -1 | sed -E 's/^URIs: *//; s/^deb (\[[^]]*\] )?//; s/ .*//'; }
MIRROR=${MOL_MIRROR:-$(apt_mirror)}
# krb5-user, libsasl2-modules-gssapi-mit: kinit + the SASL GSSAPI plugin for librdkafka (scenario kerberos)
INCLUDE=${MOL_INCLUDE:-systemd,systemd-sysv,dbus,openssh-server,python3,python3-apt,python3-venv,sudo,acl,iproute2,procps,supervisor,ca-certificates,netbase,curl,openjdk-17-jre-headless,krb5-user,libsasl2-modules-gssapi-mit}
[ -n "${MOL_INCLUDE_EXTRA:-}" ] && INCLUDE="$INCLUDE,$MOL_INCLUDE_EXTRA"

rootfs() {  # lock in a subshell so the fd is not inherited by the long-running nspawn processes
  mkdir -p $MOL_HOME
  ( flock 9; build_rootfs ) 9>$MOL_HOME/.rootfs.lock
}

build_rootfs() {
  [ -f $KEY ] || ssh-keygen -q -t ed25519 -N '' -C moltest -f $KEY
  [ -x $ROOTFS/lib/systemd/systemd ] && return 0
  command -v debootstrap >/dev/null && command -v systemd-nspawn >/dev/null || {
    apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap systemd-container >/dev/null; }
  rm -rf $ROOTFS.tmp
  debootstrap --variant=minbase --include=$INCLUDE $SUITE $ROOTFS.tmp $MIRROR >$MOL_HOME/debootstrap.log 2>&1 \
    || { tail -20 $MOL_HOME/debootstrap.log; exit 1; }
  : > $ROOTFS.tmp/etc/machine-id          # each boot gets its own machine-id
  rm -f $ROOTFS.tmp/etc/hostname          # hostname comes from --machine / per-host overlay
  rm -f $ROOTFS.tmp/var/cache/apt/archives/*.deb
  mv $ROOTFS.tmp $ROOTFS
}

alive() { local st; st=$(ps -o stat= -p $1 2>/dev/null) || return 1; [[ $st != Z* ]]; }   # zombies count as dead

cg_dirs() {  # one cgroup per host in each hierarchy systemd uses
  if [ -f /sys/fs/cgroup/cgroup.controllers ]; then echo /sys/fs/cgroup/moltest/$1          # pure cgroup v2
  else echo /sys/fs/cgroup/systemd/moltest/$1; [ -d /sys/fs/cgroup/unified ] && echo /sys/fs/cgroup/unified/moltest/$1; fi
}

up() {
  local name=$1 ip=$2 user=${3:-root} d=$STATE/$1 veth=mv-${1:0:12} cgs
  rootfs
  if [ -e "$d/pid" ] && alive "$(cat $d/pid)"; then echo "$name already running"; return 0; fi
  mkdir -p $d/upper $d/work $d/root
  echo $ip > $d/ip
  # host-side bridge. ip_forward stays 0 and there is NO NAT: hosts reach only each other and the host.
  # The blackhole route (higher metric than the bridge's own route) guarantees that packets for the
  # test subnet never follow the default route off the machine, e.g. TCP retransmits after the bridge is gone.
  # The bridge and the route are shared by every host (and scenario run) of this MOL_HOME: created and
  # removed under one lock, after this host's state dir exists, so a concurrent down/cleanup keeps them.
  ( flock 9
    ip route replace blackhole $(subnet) metric 4242
    if ! ip link show $BR >/dev/null 2>&1; then
      ip link add $BR type bridge; ip addr add $BR_CIDR dev $BR; ip link set $BR up
    fi ) 9>$MOL_HOME/.net.lock
  ip link del $veth 2>/dev/null || true                 # stale pair from an earlier run
  ip netns del mol-$name 2>/dev/null || true
  ip netns add mol-$name
  ip -n mol-$name link set lo up
  ip link add $veth type veth peer name eth0 netns mol-$name
  ip link set $veth master $BR up
  ip -n mol-$name addr add $ip/24 dev eth0
  ip -n mol-$name link set eth0 up
  # copy-on-write root: shared read-only base + per-host upper dir on disk
  mount -t overlay overlay -o lowerdir=$ROOTFS,upperdir=$d/upper,workdir=$d/work $d/root
  echo $name > $d/root/etc/hostname
  printf '127.0.0.1 localhost\n127.0.1.1 %s\n' $name > $d/root/etc/hosts
  if [ "$user" = root ]; then
    install -d -m 700 $d/root/root/.ssh; install -m 600 $KEY.pub $d/root/root/.ssh/authorized_keys
  else   # the scenario's login user, with sudo for become; root accepts no SSH login
    rm -f $d/root/root/.ssh/authorized_keys
    chroot $d/root id -u "$user" >/dev/null 2>&1 || chroot $d/root useradd --create-home --shell /bin/bash "$user"
    install -d -m 700 -o "$(chroot $d/root id -u "$user")" -g "$(chroot $d/root id -g "$user")" $d/root/home/$user/.ssh
    install -m 600 -o "$(chroot $d/root id -u "$user")" -g "$(chroot $d/root id -g "$user")" $KEY.pub $d/root/home/$user/.ssh/authorized_keys
    echo "$user ALL=(ALL:ALL) NOPASSWD: ALL" > $d/root/etc/sudoers.d/molecule-$user; chmod 440 $d/root/etc/sudoers.d/molecule-$user
  fi
  cgs=$(cg_dirs $name); for c in $cgs; do mkdir -p $c; done
  # nspawn --keep-unit --register=no: no host systemd/dbus needed; it creates payload/ + supervisor/ under our cgroup
  if [ "${MOL_MODE:-nspawn}" = plain ]; then
    # fallback without systemd: netns + private mount/pid/uts/ipc namespaces + chroot; sshd and supervisord only
    setsid bash -c '
      for c in '"$(echo $cgs)"'; do echo $$ > $c/cgroup.procs; done
      exec ip netns exec mol-'$name' unshare --mount --pid --uts --ipc --fork --kill-child=SIGTERM --propagation private bash -c "
        R='$d/root'; hostname '$name'
        mount -t proc proc \$R/proc; mount -t sysfs -o ro sysfs \$R/sys
        mount -t tmpfs -o mode=755 tmpfs \$R/dev
        for n in null zero full random urandom tty; do touch \$R/dev/\$n; mount --bind /dev/\$n \$R/dev/\$n; done
        mkdir -p \$R/dev/pts \$R/dev/shm; mount -t devpts -o newinstance,ptmxmode=0666 devpts \$R/dev/pts
        ln -s pts/ptmx \$R/dev/ptmx; mount -t tmpfs tmpfs \$R/dev/shm; mount -t tmpfs tmpfs \$R/run
        mkdir -p \$R/run/sshd \$R/var/log/supervisor
        exec chroot \$R /bin/sh -c \"/usr/sbin/sshd && exec /usr/bin/supervisord -n -c /etc/supervisor/supervisord.conf\"
      "
    ' </dev/null >$d/console.log 2>&1 &
    echo $! > $d/pid
  else
  setsid bash -c '
    for c in '"$(echo $cgs)"'; do echo $$ > $c/cgroup.procs; done
    exec systemd-nspawn --quiet --boot --register=no --keep-unit --machine='$name' \
      -D '$d/root' --network-namespace-path=/run/netns/mol-'$name' --console=read-only '"${MOL_NSPAWN_EXTRA:-}"'
  ' </dev/null >$d/console.log 2>&1 &
  echo $! > $d/pid
  fi
  for i in $(seq 600); do   # wait for sshd, max 60 s
    if timeout 1 bash -c "exec 3<>/dev/tcp/$ip/22" 2>/dev/null; then
      # sshd answers; now wait until systemd inside reports the boot finished
      local leader state=no-systemd; leader=$(ps --ppid "$(cat $d/pid)" -o pid= | head -1 | tr -d ' ')
      [ "${MOL_MODE:-nspawn}" = plain ] || state=$(timeout 60 nsenter -t $leader -a systemctl is-system-running --wait 2>&1 || true)
      echo "$name up ($ip) after $((i/10)).$((i%10))s, systemd: $state"; return 0
    fi
    alive "$(cat $d/pid)" || { echo "host process for $name died:"; tail -20 $d/console.log; return 1; }
    sleep 0.1
  done
  echo "timeout waiting for sshd on $name"; tail -20 $d/console.log; return 1
}

down() {
  local name=$1 d=$STATE/$1 pid
  if [ -f $d/ip ]; then   # close ssh connections (Ansible ControlPersist masters etc.) while the network is still up
    local ip; ip=$(cat $d/ip)
    for s in ~/.ansible/cp/$ip-*; do if [ -S "$s" ]; then ssh -O exit -o ControlPath=$s x >/dev/null 2>&1 || rm -f "$s"; fi; done   # a dead master leaves a stale socket
    ss -K dst $ip >/dev/null 2>&1 || true
  fi
  if [ -f $d/pid ]; then
    pid=$(cat $d/pid)
    if alive $pid; then
      if [ "$(ps -o comm= -p $pid)" = unshare ]; then   # plain mode: unshare ignores SIGTERM, stop its child (PID 1 = supervisord)
        kill -TERM $(ps --ppid $pid -o pid=) 2>/dev/null || true
      else
        kill -TERM $pid                    # nspawn sends SIGRTMIN+3 to the container's systemd: clean poweroff
      fi
      for i in $(seq 300); do alive $pid || break; sleep 0.1; done
      alive $pid && kill -KILL $pid
    fi
  fi
  # whatever is still in the host's cgroups (e.g. plain mode): give it 10 s, then SIGKILL
  local left
  for i in $(seq 100); do
    left=$(for c in $(cg_dirs $name); do if [ -d $c ]; then find $c -name cgroup.procs -exec cat {} + 2>/dev/null || true; fi; done | sort -u)
    [ -z "$left" ] && break; sleep 0.1
  done
  [ -n "$left" ] && kill -KILL $left 2>/dev/null || true
  mountpoint -q $d/root 2>/dev/null && umount $d/root
  ip netns del mol-$name 2>/dev/null || true
  ip link del mv-${name:0:12} 2>/dev/null || true
  for c in $(cg_dirs $name); do if [ -d $c ]; then find $c -depth -type d -exec rmdir {} \; 2>/dev/null || true; fi; done
  rm -rf /run/systemd/nspawn/propagate/$name /run/systemd/nspawn/unix-export/$name $d
  ( flock 9; if [ -z "$(ls -A $STATE 2>/dev/null)" ]; then ip link del $BR 2>/dev/null || true; fi ) 9>$MOL_HOME/.net.lock
  echo "$name down"
}

subnet() { python3 -c "import ipaddress,sys; print(ipaddress.ip_interface(sys.argv[1]).network)" $BR_CIDR; }

cleanup() {  # after all hosts are down: drop bridge and the safety route
  mkdir -p $MOL_HOME; exec 9>$MOL_HOME/.net.lock; flock 9
  [ -n "$(ls -A $STATE 2>/dev/null)" ] && { echo "hosts still present: $(ls $STATE)"; return 1; }
  ip link del $BR 2>/dev/null || true
  ss -K dst $(subnet) >/dev/null 2>&1 || true
  ip route del blackhole $(subnet) metric 4242 2>/dev/null || true
  rmdir /sys/fs/cgroup/systemd/moltest /sys/fs/cgroup/unified/moltest /sys/fs/cgroup/moltest 2>/dev/null || true
  echo "cleaned up"
}

mem() {
  local name=$1 total=0 pids v
  pids=$(for c in $(cg_dirs $name); do find $c -name cgroup.procs -exec cat {} + 2>/dev/null || true; done | sort -u)
  for p in $pids; do v=$(awk '/^Pss:/{print $2}' /proc/$p/smaps_rollup 2>/dev/null || true); total=$((total+${v:-0})); done
  echo "$name: $(echo $pids | wc -w) procs, PSS $((total/1024)) MiB, overlay upper $(du -sm $STATE/$name/upper | cut -f1) MiB"
}

"$@"
