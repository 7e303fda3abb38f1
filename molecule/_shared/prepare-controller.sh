#!/bin/bash
# Controller-side artifacts for the Molecule scenarios (test hosts have no network):
#   - the release bundle of scripts/build-bundle.sh (kafka-mirror wheel, wheelhouse, GSSAPI client,
#     connector jars, JMX agent, SHA256SUMS): $MOL_HOME/artifacts/bundle
#   - Kafka jars from `mvn -f jvm/pom.xml package`
#   - a Kafka distribution tarball kafka_2.13-4.3.1.tgz assembled from those jars + bin scripts
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

# the release bundle, built by the documented command (scripts/build-bundle.sh): the scenarios
# install from it (kafka_mirror_bundle_dir in group_vars/all). Its wheels, connector jars and JMX
# agent also feed the stand-ins below. Unchanged, it is left as it is (a scenario beside may be
# reading it).
PYTHON=$PY "$REPO/scripts/build-bundle.sh" --out "$A/bundle"
B=$A/bundle/kafka-mirror-bundle-current
# the stand-ins below read the bundle's wheels and jars under their older names
for old in dist wheelhouse.req; do rm -rf "${A:?}/$old"; done
for link in wheelhouse:wheels connector-jars:connector-jars; do
  [ -L "$A/${link%%:*}" ] || rm -rf "${A:?}/${link%%:*}"
  ln -sfn "$B/${link#*:}" "$A/${link%%:*}"
done

# Kafka distribution tarball (same layout as the Apache release)
d=kafka_2.13-$KAFKA_VERSION
if [ ! -f "$A/$d.tgz" ] || [ -n "$(find "$REPO/jvm/kafka-dist/target/lib" "$HERE/kafka-bin" -newer "$A/$d.tgz" -print -quit)" ]; then
  t=$(mktemp -d); mkdir -p "$t/$d/libs" "$t/$d/bin" "$t/$d/config"
  cp "$REPO"/jvm/kafka-dist/target/lib/*.jar "$t/$d/libs/"
  cp "$HERE"/kafka-bin/*.sh "$t/$d/bin/"
  printf 'rootLogger.level=WARN\nrootLogger.appenderRef.stderr.ref=STDERR\nappender.stderr.type=Console\nappender.stderr.name=STDERR\nappender.stderr.target=SYSTEM_ERR\nappender.stderr.layout.type=PatternLayout\nappender.stderr.layout.pattern=[%%d] %%p %%m (%%c)%%n\n' > "$t/$d/config/tools-log4j2.properties"
  tar -C "$t" -czf "$A/$d.tgz" "$d"; rm -rf "$t"
fi

# the JMX exporter agent where the jmx step and the scenarios' older paths look for it
cmp -s "$B/jmx/jmx_prometheus_javaagent-$JMX_VERSION.jar" "$A/jmx_prometheus_javaagent-$JMX_VERSION.jar" \
  || cp -f "$B/jmx/jmx_prometheus_javaagent-$JMX_VERSION.jar" "$A/"

# what artifact-server.sh serves: stand-ins for the Apache download site (Kafka tarball, a Spark
# distribution assembled from the pyspark wheel) and a Maven repository of the connector jars
"$PY" "$HERE/http-artifacts.py" "$A" "$A/$d.tgz"

# the collection, as Ansible expects to find it
mkdir -p "$MOL_HOME/collections/ansible_collections/kafka"
ln -sfn "$REPO" "$MOL_HOME/collections/ansible_collections/kafka/mirror"
echo "artifacts ready in $A"
