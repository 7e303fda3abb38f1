#!/bin/bash
# Single-node KRaft Kafka clusters for the Molecule scenarios and the module tests, started from the
# jars that `mvn -f jvm/pom.xml package` puts in jvm/kafka-dist/target/lib. They listen on an address
# the test hosts can reach (the bridge address, 10.77.0.1 by default) or on 127.0.0.1.
#   kafka-test-cluster.sh start NAME HOST PORT   start (idempotent), wait until it answers
#   kafka-test-cluster.sh stop  NAME             SIGTERM, wait, remove its data
#   kafka-test-cluster.sh status NAME
#   kafka-test-cluster.sh scram-user NAME USER PASSWORD
#                                                set USER's SCRAM-SHA-512 password (created or rotated)
# Besides PLAINTEXT on PORT, each cluster has a SASL_PLAINTEXT listener with SCRAM-SHA-512 on PORT+2
# (users made by scram-user; no authorizer).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=${KAFKA_MIRROR_REPO:-$(cd "$HERE/../.." && pwd)}
LIB=${KAFKA_LIB:-$REPO/jvm/kafka-dist/target/lib}
MOL_HOME=${MOL_HOME:-/tmp/kafka-mirror-molecule}
BASE=$MOL_HOME/clusters
HEAP=${KAFKA_TEST_HEAP:--Xmx384m -Xms128m}

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

start() {
  local name=$1 host=$2 port=$3 d=$BASE/$1 cport=$(( $3 + 1000 )) sport=$(( $3 + 2 ))
  [ -d "$LIB" ] || { echo "missing $LIB: run mvn -q -f jvm/pom.xml package -DskipTests" >&2; exit 1; }
  if alive "$d/pid"; then echo "$name already running"; return 0; fi
  rm -rf "$d"; mkdir -p "$d/data"
  cat > "$d/server.properties" <<EOF
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@$host:$cport
listeners=PLAINTEXT://$host:$port,CONTROLLER://$host:$cport,SASL_PLAINTEXT://$host:$sport
advertised.listeners=PLAINTEXT://$host:$port,SASL_PLAINTEXT://$host:$sport
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT
inter.broker.listener.name=PLAINTEXT
listener.name.sasl_plaintext.sasl.enabled.mechanisms=SCRAM-SHA-512
listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
log.dirs=$d/data
num.partitions=1
default.replication.factor=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=false
# no no-op record in the metadata log every 500 ms (an idle broker: 1.75 CPU-s a minute, 1.03 without)
metadata.max.idle.interval.ms=0
EOF
  cat > "$d/log4j2.properties" <<'EOF'
rootLogger.level=WARN
rootLogger.appenderRef.stdout.ref=STDOUT
appender.stdout.type=Console
appender.stdout.name=STDOUT
appender.stdout.layout.type=PatternLayout
appender.stdout.layout.pattern=[%d] %p %m (%c)%n
logger.srv.name=kafka.server.KafkaRaftServer
logger.srv.level=INFO
EOF
  # C1 only: a test broker's cost is start-up and JIT compiling (tests/harness/kafka_mirror_testing/quick_jvms.py)
  # the class path as the test harness writes it (sorted jars), so that the class data archive the
  # test command built for it maps (kafka_mirror_testing/kafka_class_data.py)
  local cp jopts="$HEAP -XX:TieredStopAtLevel=1 -Dlog4j2.configurationFile=$d/log4j2.properties -Djava.awt.headless=true"
  cp=$(find "$LIB" -maxdepth 1 -type f -name '*.jar' | LC_ALL=C sort | paste -sd:)
  if [ -f "${KAFKA_MIRROR_TEST_KAFKA_CLASS_DATA:-}" ]; then
    jopts="$jopts -XX:SharedArchiveFile=$KAFKA_MIRROR_TEST_KAFKA_CLASS_DATA -Xshare:auto"
  fi
  # shellcheck disable=SC2086
  java $jopts -cp "$cp" kafka.tools.StorageTool format --cluster-id="$(python3 -c 'import base64,uuid;print(base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("="))')" \
    -c "$d/server.properties" >"$d/format.log" 2>&1 || { cat "$d/format.log"; exit 1; }
  # shellcheck disable=SC2086
  setsid java $jopts -cp "$cp" kafka.Kafka "$d/server.properties" </dev/null >"$d/server.log" 2>&1 &
  echo $! > "$d/pid"
  for _ in $(seq 600); do
    if timeout 1 bash -c "exec 3<>/dev/tcp/$host/$port" 2>/dev/null && grep -q 'Kafka Server started' "$d/server.log" 2>/dev/null; then
      echo "$name up on $host:$port"; return 0
    fi
    alive "$d/pid" || { echo "kafka $name died"; tail -30 "$d/server.log"; exit 1; }
    sleep 0.2
  done
  echo "timeout starting $name"; tail -30 "$d/server.log"; exit 1
}

stop() {
  local d=$BASE/$1
  if alive "$d/pid"; then
    local pid; pid=$(cat "$d/pid")
    kill -TERM "$pid"
    # a throw-away cluster whose data goes next: 10 s for a clean shutdown, then SIGKILL (a
    # broker whose clients vanished with their hosts may wait out its shutdown timeouts)
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      echo "$1 still running 10 s after SIGTERM: SIGKILL; last lines of its log:"
      tail -5 "$d/server.log" || true
      kill -KILL "$pid"
    fi
  fi
  rm -rf "$d"
  echo "$1 stopped"
}

status() { if alive "$BASE/$1/pid"; then echo running; else echo stopped; return 1; fi; }

scram_user() {  # NAME USER PASSWORD: through the cluster's PLAINTEXT listener (Kafka's ConfigCommand)
  local d=$BASE/$1 bootstrap cp
  alive "$d/pid" || { echo "kafka $1 is not running" >&2; exit 1; }
  bootstrap=$(sed -n 's|^advertised.listeners=PLAINTEXT://\([^,]*\),.*|\1|p' "$d/server.properties")
  cp=$(find "$LIB" -maxdepth 1 -type f -name '*.jar' | LC_ALL=C sort | paste -sd:)
  java -Xmx256m -XX:TieredStopAtLevel=1 -Dlog4j2.configurationFile="$d/log4j2.properties" -cp "$cp" \
    kafka.admin.ConfigCommand --bootstrap-server "$bootstrap" --alter --entity-type users --entity-name "$2" \
    --add-config "SCRAM-SHA-512=[iterations=4096,password=$3]" >/dev/null
  echo "SCRAM-SHA-512 password of $2 set on $1"
}

case "${1:-}" in
  scram-user) shift; scram_user "$@" ;;
  *) "$@" ;;
esac
