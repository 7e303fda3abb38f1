#!/bin/bash
# Controller-side artifacts for the Molecule scenarios (test hosts have no network):
#   - the kafka-mirror wheel built from this repo, and a wheelhouse with its runtime deps
#   - Spark Kafka connector jars and Kafka jars from `mvn -f jvm/pom.xml package`
#   - a Kafka distribution tarball kafka_2.13-4.3.1.tgz assembled from those jars + bin scripts
#   - the Prometheus JMX exporter agent jar (through Maven)
# Output: $MOL_HOME/artifacts. Re-running rebuilds the wheel, reuses the rest.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
MOL_HOME=${MOL_HOME:-/tmp/kafka-mirror-molecule}
A=$MOL_HOME/artifacts
PY=${PYTHON:-python3}
KAFKA_VERSION=4.3.1
JMX_VERSION=${JMX_VERSION:-1.0.1}
mkdir -p "$A"

if [ ! -d "$REPO/jvm/kafka-dist/target/lib" ] || [ ! -d "$REPO/jvm/spark-connector/target/lib" ]; then
  mvn -q -f "$REPO/jvm/pom.xml" package -DskipTests
fi

# kafka-mirror wheel (always rebuilt) + runtime wheelhouse (cached)
rm -rf "$A/dist"; mkdir -p "$A/dist"
"$PY" -m pip wheel -q --no-deps -w "$A/dist" "$REPO"
if [ ! -f "$A/wheelhouse/.complete" ]; then
  mkdir -p "$A/wheelhouse"
  "$PY" -m pip wheel -q -w "$A/wheelhouse" "pyspark==4.2.0" "confluent-kafka==2.16.1"
  touch "$A/wheelhouse/.complete"
fi
cp -f "$A"/dist/*.whl "$A/wheelhouse/"
ls "$A"/wheelhouse/kafka_mirror-*.whl | sort | head -n -1 | xargs -r rm -f

# connector jars
rm -rf "$A/connector-jars"; mkdir -p "$A/connector-jars"
cp "$REPO"/jvm/spark-connector/target/lib/*.jar "$A/connector-jars/"

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
cp -f "$jar" "$A/"

# the collection, as Ansible expects to find it
mkdir -p "$MOL_HOME/collections/ansible_collections/kafka"
ln -sfn "$REPO" "$MOL_HOME/collections/ansible_collections/kafka/mirror"
echo "artifacts ready in $A"
