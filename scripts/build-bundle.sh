#!/usr/bin/env bash
# Builds the release bundle: everything the Ansible collection installs on hosts without Internet,
# in one versioned directory with a sha256 manifest:
#   kafka-mirror-bundle-<version>/
#     wheels/          the kafka-mirror wheel and every runtime dependency (pyspark, confluent-kafka,
#                      cryptography, ...) as wheels for the hosts' Python (this script's Python:
#                      the same minor version and platform as the hosts, e.g. 3.11 on Debian 12)
#     wheels-gssapi/   confluent-kafka built with SASL GSSAPI (scripts/build-gssapi-client.sh), for
#                      sites whose clusters use Kerberos (the roles install it on those hosts only)
#     connector-jars/  Spark's Kafka connector and its dependencies (jvm/spark-connector)
#     jmx/             the Prometheus JMX exporter agent
#     SHA256SUMS       sha256 of every file above (sha256sum format); the roles check every file
#                      they copy against it (kafka.mirror.bundle) and refuse a bundle that differs
#     bundle.json      version, Python tag, contents
# Point the collection at it with one variable (docs/ansible.md, "Artifacts"):
#   kafka_mirror_bundle_dir: /path/to/kafka-mirror-bundle-<version>
#
# Usage: scripts/build-bundle.sh [--out DIR] [--version V] [--tar] [--no-gssapi]
#   --out DIR     where the bundle directory goes (default dist/); DIR/kafka-mirror-bundle-current
#                 links to the newest
#   --version V   the release's version (PEP 440), written into the wheel and the bundle's name
#                 (default: pyproject.toml's)
#   --tar         also write DIR/kafka-mirror-bundle-<version>.tar.gz
#   --no-gssapi   leave out wheels-gssapi/ (building it compiles librdkafka: minutes)
# PYTHON selects the Python the wheels are built for (default python3). Maven (jvm/ modules, the
# JMX agent) and pip reach their repositories as configured on this machine. Unchanged inputs are
# reused from build/bundle-cache (the wheelhouse: pyspark alone is about 430 MB).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
OUT=dist TAR=0 GSSAPI=1 VERSION=
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT=$2; shift 2 ;;
    --version) VERSION=$2; shift 2 ;;
    --tar) TAR=1; shift ;;
    --no-gssapi) GSSAPI=0; shift ;;
    *) echo "usage: $0 [--out DIR] [--version V] [--tar] [--no-gssapi]" >&2; exit 2 ;;
  esac
done
PY=${PYTHON:-python3}
JMX_VERSION=1.0.1
PROJECT_VERSION=$(grep -m1 -E '^version *= *"' pyproject.toml | sed -E 's/^version *= *"([^"]+)".*/\1/')
VERSION=${VERSION:-$PROJECT_VERSION}
PYTAG=$("$PY" -c 'import sys; print(f"cp{sys.version_info.major}{sys.version_info.minor}")')
CACHE=$REPO/build/bundle-cache
mkdir -p "$OUT" "$CACHE"
OUT=$(cd "$OUT" && pwd)
NAME=kafka-mirror-bundle-$VERSION
DEST=$OUT/$NAME
exec 9>"$CACHE/.lock"
flock 9

# the JVM modules (connector jars)
if [ ! -d jvm/spark-connector/target/lib ]; then
  mvn -q -f jvm/pom.xml package -DskipTests
fi

# the kafka-mirror wheel: rebuilt when what goes into it changed
key=$( (echo "$VERSION"; find -L pyproject.toml README.md src -type f ! -path '*/__pycache__/*' ! -path '*.egg-info/*' -print0 \
  | LC_ALL=C sort -z | xargs -0 sha256sum) | sha256sum | cut -d' ' -f1)
if [ "$(cat "$CACHE/dist/.key" 2>/dev/null)" != "$key" ] || ! compgen -G "$CACHE/dist/kafka_mirror-*.whl" >/dev/null; then
  rm -rf "$CACHE/dist" "$CACHE/source"; mkdir -p "$CACHE/dist" "$CACHE/source"
  # built from a copy carrying the release's version
  cp -rL pyproject.toml README.md src "$CACHE/source/"
  find "$CACHE/source" \( -name __pycache__ -o -name '*.egg-info' \) -prune -exec rm -rf {} +
  sed -i -E "0,/^version *= *\"[^\"]+\"/s//version = \"$VERSION\"/" "$CACHE/source/pyproject.toml"
  "$PY" -m pip wheel -q --no-deps -w "$CACHE/dist" "$CACHE/source"
  rm -rf "$CACHE/source"
  echo "$key" > "$CACHE/dist/.key"
fi
wheel=$(ls "$CACHE"/dist/kafka_mirror-*.whl)

# its runtime requirements, as the wheel declares them, as wheels: rebuilt when they changed
"$PY" - "$wheel" > "$CACHE/requirements.txt" <<'PY'
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
reqs = [line.split(":", 1)[1].strip() for line in z.read(meta).decode().splitlines()
        if line.startswith("Requires-Dist:") and "extra ==" not in line]
print("\n".join(sorted(reqs)))
PY
if ! cmp -s "$CACHE/requirements.txt" "$CACHE/wheelhouse/.complete" 2>/dev/null; then
  rm -rf "$CACHE/wheelhouse"; mkdir -p "$CACHE/wheelhouse"
  "$PY" -m pip wheel -q -w "$CACHE/wheelhouse" -r "$CACHE/requirements.txt"
  cp "$CACHE/requirements.txt" "$CACHE/wheelhouse/.complete"
fi

# the JMX exporter agent
jmx=$HOME/.m2/repository/io/prometheus/jmx/jmx_prometheus_javaagent/$JMX_VERSION/jmx_prometheus_javaagent-$JMX_VERSION.jar
[ -f "$jmx" ] || mvn -q org.apache.maven.plugins:maven-dependency-plugin:3.8.1:get \
  -Dartifact=io.prometheus.jmx:jmx_prometheus_javaagent:$JMX_VERSION -Dtransitive=false

# assemble (hard links where the file system allows: the wheelhouse is large)
tmp=$OUT/.$NAME.tmp
rm -rf "$tmp"; mkdir -p "$tmp/wheels" "$tmp/connector-jars" "$tmp/jmx"
link() { cp -l "$@" 2>/dev/null || cp "$@"; }
link "$wheel" "$tmp/wheels/"
find "$CACHE/wheelhouse" -maxdepth 1 -name '*.whl' ! -name 'kafka_mirror-*' -exec cp -l {} "$tmp/wheels/" \; 2>/dev/null \
  || find "$CACHE/wheelhouse" -maxdepth 1 -name '*.whl' ! -name 'kafka_mirror-*' -exec cp {} "$tmp/wheels/" \;
link jvm/spark-connector/target/lib/*.jar "$tmp/connector-jars/"
link "$jmx" "$tmp/jmx/"
if [ "$GSSAPI" = 1 ]; then
  PYTHON=$PY scripts/build-gssapi-client.sh >/dev/null
  mkdir -p "$tmp/wheels-gssapi"
  link build/wheels/confluent_kafka-*+gssapi-"$PYTAG"-*.whl "$tmp/wheels-gssapi/"
fi
(cd "$tmp" && find . -type f ! -name SHA256SUMS -printf '%P\n' | LC_ALL=C sort | xargs sha256sum > SHA256SUMS)
"$PY" - "$tmp" "$VERSION" "$PYTAG" <<'PY'
import json, pathlib, sys
root, version, pytag = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3]
contents = {d.name: sorted(f.name for f in d.iterdir()) for d in sorted(root.iterdir()) if d.is_dir()}
(root / "bundle.json").write_text(json.dumps(
    {"name": "kafka-mirror-bundle", "version": version, "python": pytag, "contents": contents}, indent=2) + "\n")
PY
if cmp -s "$tmp/SHA256SUMS" "$DEST/SHA256SUMS" 2>/dev/null && cmp -s "$tmp/bundle.json" "$DEST/bundle.json"; then
  rm -rf "$tmp"   # the same bundle: left as it is (a deployment may be reading it)
else
  rm -rf "$DEST"; mv "$tmp" "$DEST"
fi
ln -sfn "$NAME" "$OUT/kafka-mirror-bundle-current"
if [ "$TAR" = 1 ]; then
  tar -C "$OUT" -czf "$OUT/$NAME.tar.gz" "$NAME"
  echo "bundle archive: $OUT/$NAME.tar.gz"
fi
echo "bundle: $DEST ($(du -sh "$DEST" | cut -f1), $(wc -l < "$DEST/SHA256SUMS") files)"
echo "use it with: kafka_mirror_bundle_dir: $DEST"
