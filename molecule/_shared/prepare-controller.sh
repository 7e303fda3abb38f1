#!/bin/bash
# Controller-side artifacts for the Molecule scenarios (test hosts have no network):
#   - the kafka-mirror wheel built from this repo, and a wheelhouse with its runtime deps
#   - Spark Kafka connector jars and Kafka jars from `mvn -f jvm/pom.xml package`
#   - a Kafka distribution tarball kafka_2.13-4.3.1.tgz assembled from those jars + bin scripts
#   - the Prometheus JMX exporter agent jar (through Maven)
#   - $MOL_HOME/artifacts/http, served by artifact-server.sh (http-artifacts.py)
# Output: $MOL_HOME/artifacts. Re-running reuses what is there (the wheel while its sources are unchanged).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
MOL_HOME=${MOL_HOME:-/tmp/kafka-mirror-molecule}
A=$MOL_HOME/artifacts
PY=${PYTHON:-python3}
KAFKA_VERSION=4.3.1
JMX_VERSION=${JMX_VERSION:-1.0.1}
mkdir -p "$A"
# Scenarios run side by side (the test command runs kerberos beside default): one run of this script
# at a time, and what a running scenario's hosts may be reading is replaced only when it changed
exec 9>"$MOL_HOME/.prepare-controller.lock"
flock 9

if [ ! -d "$REPO/jvm/kafka-dist/target/lib" ] || [ ! -d "$REPO/jvm/spark-connector/target/lib" ]; then
  mvn -q -f "$REPO/jvm/pom.xml" package -DskipTests
fi

# kafka-mirror wheel + runtime wheelhouse: the wheel's own requirements (cached, rebuilt when they
# change, e.g. a new confluent-kafka pin in pyproject.toml). The wheel is rebuilt when what goes
# into it (pyproject.toml, README.md, src/) changed: every scenario's create step runs this script
# again, and a build (in pip's isolated build environment) took 67 s on the loaded 2-core machine.
wheel_key=$(cd "$REPO" && find pyproject.toml README.md src -type f ! -path '*/__pycache__/*' \
  ! -path '*.egg-info/*' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)
if [ "$(cat "$A/dist/.key" 2>/dev/null)" != "$wheel_key" ] || ! compgen -G "$A/dist/kafka_mirror-*.whl" >/dev/null; then
  rm -rf "$A/dist"; mkdir -p "$A/dist"
  "$PY" -m pip wheel -q --no-deps -w "$A/dist" "$REPO"
  echo "$wheel_key" > "$A/dist/.key"
fi
"$PY" - "$A"/dist/kafka_mirror-*.whl > "$A/wheelhouse.req" <<'PY'
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
reqs = [line.split(":", 1)[1].strip() for line in z.read(meta).decode().splitlines()
        if line.startswith("Requires-Dist:") and "extra ==" not in line]
print("\n".join(sorted(reqs)))
PY
if ! cmp -s "$A/wheelhouse.req" "$A/wheelhouse/.complete"; then
  rm -rf "$A/wheelhouse"; mkdir -p "$A/wheelhouse"
  "$PY" -m pip wheel -q -w "$A/wheelhouse" -r "$A/wheelhouse.req"
  cp "$A/wheelhouse.req" "$A/wheelhouse/.complete"
fi
for whl in "$A"/dist/*.whl; do
  cmp -s "$whl" "$A/wheelhouse/$(basename "$whl")" || cp -f "$whl" "$A/wheelhouse/"
done
ls "$A"/wheelhouse/kafka_mirror-*.whl | sort | head -n -1 | xargs -r rm -f

# connector jars
if ! diff -rq "$REPO/jvm/spark-connector/target/lib" "$A/connector-jars" >/dev/null 2>&1; then
  rm -rf "$A/connector-jars"; mkdir -p "$A/connector-jars"
  cp "$REPO"/jvm/spark-connector/target/lib/*.jar "$A/connector-jars/"
fi

# Kafka distribution tarball (same layout as the Apache release)
d=kafka_2.13-$KAFKA_VERSION
if [ ! -f "$A/$d.tgz" ] || [ -n "$(find "$REPO/jvm/kafka-dist/target/lib" "$HERE/kafka-bin" -newer "$A/$d.tgz" -print -quit)" ]; then
  t=$(mktemp -d); mkdir -p "$t/$d/libs" "$t/$d/bin" "$t/$d/config"
  cp "$REPO"/jvm/kafka-dist/target/lib/*.jar "$t/$d/libs/"
  cp "$HERE"/kafka-bin/*.sh "$t/$d/bin/"
  printf 'rootLogger.level=WARN\nrootLogger.appenderRef.stderr.ref=STDERR\nappender.stderr.type=Console\nappender.stderr.name=STDERR\nappender.stderr.target=SYSTEM_ERR\nappender.stderr.layout.type=PatternLayout\nappender.stderr.layout.pattern=[%%d] %%p %%m (%%c)%%n\n' > "$t/$d/config/tools-log4j2.properties"
  tar -C "$t" -czf "$A/$d.tgz" "$d"; rm -rf "$t"
fi

# JMX exporter agent
jar=$HOME/.m2/repository/io/prometheus/jmx/jmx_prometheus_javaagent/$JMX_VERSION/jmx_prometheus_javaagent-$JMX_VERSION.jar
[ -f "$jar" ] || mvn -q org.apache.maven.plugins:maven-dependency-plugin:3.8.1:get -Dartifact=io.prometheus.jmx:jmx_prometheus_javaagent:$JMX_VERSION -Dtransitive=false
cmp -s "$jar" "$A/$(basename "$jar")" || cp -f "$jar" "$A/"

# what artifact-server.sh serves: stand-ins for the Apache download site (Kafka tarball, a Spark
# distribution assembled from the pyspark wheel) and a Maven repository of the connector jars
"$PY" "$HERE/http-artifacts.py" "$A" "$A/$d.tgz"

# the collection, as Ansible expects to find it
mkdir -p "$MOL_HOME/collections/ansible_collections/kafka"
ln -sfn "$REPO" "$MOL_HOME/collections/ansible_collections/kafka/mirror"
echo "artifacts ready in $A"
