#!/bin/bash
# Minimal stand-in for Apache Kafka's bin/kafka-run-class.sh (test distribution assembled from the
# Maven jars in jvm/kafka-dist/target/lib): java with libs/* on the class path.
base_dir=$(cd "$(dirname "$0")/.." && pwd)
: "${KAFKA_HEAP_OPTS:=-Xmx256m}"
: "${KAFKA_LOG4J_OPTS:=-Dlog4j2.configurationFile=$base_dir/config/tools-log4j2.properties}"
# shellcheck disable=SC2086
exec java $KAFKA_HEAP_OPTS $KAFKA_JVM_PERFORMANCE_OPTS $KAFKA_OPTS $KAFKA_LOG4J_OPTS -cp "$base_dir/libs/*" "$@"
