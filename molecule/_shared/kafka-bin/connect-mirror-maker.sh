#!/bin/bash
# Like Apache Kafka's bin/connect-mirror-maker.sh: its own heap and log4j2 defaults unless the caller sets them
# (this test distribution has no config/connect-log4j2.properties: a caller that relies on it gets no INFO logs).
base_dir=$(dirname "$0")
[ -z "$KAFKA_LOG4J_OPTS" ] && export KAFKA_LOG4J_OPTS="-Dlog4j2.configurationFile=$base_dir/../config/connect-log4j2.properties"
[ -z "$KAFKA_HEAP_OPTS" ] && export KAFKA_HEAP_OPTS="-Xms256M -Xmx2G"
exec "$base_dir/kafka-run-class.sh" org.apache.kafka.connect.mirror.MirrorMaker "$@"
