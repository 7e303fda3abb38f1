"""The mirror's metrics endpoint, scraped by a real Prometheus during a real mirroring run;
health endpoints and ``kafka-mirror status`` against the running mirror."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import NewPartitions
from localprometheus import LocalPrometheus
from mirror_process import CLI, MirrorProcess, end_offsets, mm2_properties

from kafka_mirror import jvm_artifacts
from kafka_mirror.engine.session import (
    LATENCY_PLUGIN,
    build_session,
    spark_conf,
    topic_latency_text,
)
from kafka_mirror_testing.localcluster import LOOPBACK, LocalKafkaCluster, free_port
from kafka_mirror_testing.records import Message, produce
from kafka_mirror_testing.waiting import wait_for

FLOW_NAME = "source->destination"
FLOW = f'flow="{FLOW_NAME}"'
REPO = Path(__file__).resolve().parents[2]
MONITORING = REPO / "roles" / "mirror" / "files" / "monitoring"
DASHBOARD = MONITORING / "kafka-mirror-dashboard.json"
RULES = MONITORING / "kafka-mirror.rules.yml"
# Every expression must give series during a run: what dashboards and alerts are built from.
QUERIES = {
    "records": f"sum(kafka_mirror_records_total{{{FLOW}}})",
    "record rate": f"sum(rate(kafka_mirror_records_total{{{FLOW}}}[30s]))",
    "byte rate": f"sum(rate(kafka_mirror_bytes_total{{{FLOW}}}[30s]))",
    "latency p99": "histogram_quantile(0.99, sum by (le, flow) "
                   f"(rate(kafka_mirror_replication_latency_seconds_bucket{{{FLOW}}}[1m])))",
    "latency avg": f"sum(rate(kafka_mirror_replication_latency_seconds_sum{{{FLOW}}}[1m])) / "
                   f"sum(rate(kafka_mirror_replication_latency_seconds_count{{{FLOW}}}[1m]))",
    "latency max": f"max(kafka_mirror_replication_latency_max_seconds{{{FLOW}}})",
    "topic latency p99": "histogram_quantile(0.99, sum by (le, flow, topic) (rate("
                         f"kafka_mirror_topic_replication_latency_seconds_bucket{{{FLOW}}}[1m])))",
    "lag": f"sum(kafka_mirror_lag_records{{{FLOW}}})",
    "batch p95": "histogram_quantile(0.95, sum by (le) "
                 f"(rate(kafka_mirror_batch_duration_seconds_bucket{{{FLOW}}}[1m])))",
    "last batch age": f"time() - max(kafka_mirror_last_batch_timestamp_seconds{{{FLOW}}})",
    "running": f"kafka_mirror_flow_state{{{FLOW},state=\"running\"}}",
    "partitions": f"sum(kafka_mirror_partitions{{{FLOW}}})",
    "topics": f"sum(kafka_mirror_topics{{{FLOW}}})",
    "up": 'up{job="kafka-mirror"}',
    "lag seconds": f"max(kafka_mirror_lag_seconds{{{FLOW}}})",
    "checkpoint age":
        f"time() - max(kafka_mirror_checkpoints_last_timestamp_seconds{{{FLOW}}})",
    "offset sync age":
        f"time() - max(kafka_mirror_offset_syncs_last_timestamp_seconds{{{FLOW}}})",
    "heartbeat age": f"time() - max(kafka_mirror_heartbeats_last_timestamp_seconds{{{FLOW}}})",
    "group sync age":
        f"time() - max(kafka_mirror_group_offsets_sync_last_timestamp_seconds{{{FLOW}}})",
    "groups checkpointed": f"sum(kafka_mirror_groups_checkpointed{{{FLOW}}})",
    "groups synced": f"sum(kafka_mirror_groups_synced{{{FLOW}}})",
    "topics created": f"sum(kafka_mirror_topics_created_total{{{FLOW}}})",
    "partitions added": f"sum(kafka_mirror_partitions_added_total{{{FLOW}}})",
    "config syncs": f"sum(kafka_mirror_topic_config_syncs_total{{{FLOW}}})",
    "active": f"kafka_mirror_flow_role{{{FLOW},role=\"active\"}}",
    "lease epoch": f"max(kafka_mirror_flow_lease_epoch{{{FLOW}}})",
    "lease age": f"max(kafka_mirror_flow_lease_age_seconds{{{FLOW}}})",
    "members live": f"max(kafka_mirror_flow_members{{{FLOW},state=\"live\"}})",
}
# every alert rule: those that must stay quiet while the mirror runs well
RULE_NAMES = ("KafkaMirrorDown", "KafkaMirrorFlowFailing", "KafkaMirrorLagGrowing",
              "KafkaMirrorReplicationLatencyHigh", "KafkaMirrorStalled",
              "KafkaMirrorLagSecondsHigh", "KafkaMirrorNoHeartbeat", "KafkaMirrorFlowNoWriter",
              "KafkaMirrorFlowManyWriters", "KafkaMirrorFlowNoStandby")
QUIET = ("KafkaMirrorDown", "KafkaMirrorFlowFailing", "KafkaMirrorStalled",
         "KafkaMirrorLagSecondsHigh", "KafkaMirrorNoHeartbeat", "KafkaMirrorFlowNoWriter",
         "KafkaMirrorFlowManyWriters", "KafkaMirrorFlowNoStandby")


def _promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.fail("promtool is not installed (Debian package prometheus; scripts/setup.sh "
                    "--test installs it)")
    return found


def dashboard_queries() -> dict[str, str]:
    """Every panel target's PromQL, with the dashboard's variables as Grafana fills them
    (``$flow`` = All)."""
    model = json.loads(DASHBOARD.read_text())
    out = {}
    for panel in model["panels"]:
        for target in panel["targets"]:
            expr = target["expr"].replace("$flow", ".*").replace("$__rate_interval", "30s")
            out[f"{panel['title']} / {target['legendFormat']}"] = expr
    return out


def test_dashboard_is_a_dashboard_model() -> None:
    model = json.loads(DASHBOARD.read_text())
    assert model["uid"] and model["title"] and isinstance(model["schemaVersion"], int)
    names = {v["name"] for v in model["templating"]["list"]}
    assert names == {"datasource", "flow"}
    ids = [p["id"] for p in model["panels"]]
    assert len(ids) == len(set(ids))
    for panel in model["panels"]:
        assert {"h", "w", "x", "y"} <= set(panel["gridPos"]), panel["title"]
        assert panel["datasource"]["uid"] == "${datasource}" and panel["targets"]
        refs = [t["refId"] for t in panel["targets"]]
        assert len(refs) == len(set(refs)), panel["title"]
    # every query names only metrics the mirror serves (or Prometheus' own up)
    served = {name for module in (REPO / "src" / "kafka_mirror" / "observability").glob("*.py")
              for name in re.findall(r"\b(kafka_mirror_[a-z_]+)", module.read_text())}
    for name, expr in dashboard_queries().items():
        for metric in re.findall(r"\b(kafka_mirror_[a-z_]+)", expr):
            base = re.sub(r"_(total|bucket|sum|count)$", "", metric)
            assert base in served or metric in served, f"{name}: {metric}"


def test_alert_rules_pass_promtool() -> None:
    promtool = _promtool()
    check = subprocess.run([promtool, "check", "rules", str(RULES)], capture_output=True,
                           text=True, check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    unit = subprocess.run([promtool, "test", "rules", "kafka-mirror.rules.test.yml"],
                          cwd=REPO / "tests" / "monitoring", capture_output=True, text=True,
                          check=False)
    assert unit.returncode == 0 and "SUCCESS" in unit.stdout, unit.stdout + unit.stderr


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except OSError:
        return 0, b""


@pytest.mark.spark
def test_executors_in_other_jvms_send_their_topic_latency_to_the_driver() -> None:
    """``local-cluster`` runs the executor in a JVM of its own, as on a cluster: what the
    interceptor records there reaches the driver through the plugin (every 2 s)."""
    conf = spark_conf({"spark.master": "local-cluster[1,1,1024]"}, {},
                      [jvm_artifacts.interceptor_jar()], latency_plugin=True)
    assert conf["spark.plugins"] == LATENCY_PLUGIN
    spark = build_session(conf)
    try:
        # a stop's interrupted checkpoint write is not logged as a warning with a stack trace
        shell = spark._jvm.org.apache.logging.log4j.LogManager.getLogger(
            "org.apache.hadoop.util.Shell")
        assert str(shell.getLevel()) == "ERROR"
        # the interceptor's call, made by tasks on the executor
        spark.range(0, 50, 1, 2).selectExpr(
            "reflect('io.kafkamirror.LatencyRegistry', 'record', 'a->b', 'b.t', id * 10)"
        ).collect()
        assert str(spark._jvm.io.kafkamirror.LatencyRegistry.snapshot()) == "{}"  # not here
        texts = [""]

        def arrived() -> bool:
            # the executor sends its registry every 2 s, also between its two tasks: wait for
            # the snapshot that holds all 50 records (the count is the second-to-last field)
            texts.append(topic_latency_text(spark))
            fields = texts[-1].rstrip("\n").split(",")
            return len(fields) > 2 and int(fields[-2]) >= 50

        wait_for(arrived, 30, "the executor's latency of all 50 records on the driver")
        # 0 ms, 10, 20, 30..50, 60..100, 110..250, 260..490; 50 records, 12250 ms
        assert texts[-1] == "a->b\tb.t\t1,1,1,3,5,15,24,0,0,0,0,0,0,0,0,50,12250\n"
        # the executor goes (as a cluster replaces executors): its counts stay, in one sum of
        # the removed executors' counts instead of an entry of its own
        registry = spark._jvm.io.kafkamirror.LatencyRegistry
        assert registry.executorsKept() == 1
        assert spark.sparkContext._jsc.sc().killExecutor("0")
        wait_for(lambda: registry.executorsKept() == 0, 60, "the removed executor retired")
        assert topic_latency_text(spark) == texts[-1]
    finally:
        spark.stop()


# real-time mode with batches longer than the test: what it reports comes from the drains
MODES = {"micro-batch": "mirror.mode = micro-batch\n",
         "realtime": "mirror.realtime.batch.duration.ms = 600000\n"
                     "spark.master = local[8]\n"}


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.parametrize("mode", sorted(MODES))
def test_prometheus_scrapes_a_running_mirror(
    source_cluster: LocalKafkaCluster, destination_cluster: LocalKafkaCluster,
    unique_topic: str, tmp_path: Path, mode: str,
) -> None:
    if LocalPrometheus.available() is None:
        pytest.fail("prometheus is not installed (scripts/setup.sh --test installs it)")
    topic = unique_topic
    source_cluster.create_topic(topic, 3)

    def write(count: int, partitions: int = 3) -> None:
        produce(source_cluster, topic, (
            Message(key=f"k{i}".encode(), value=b"v" * 100, partition=i % partitions)
            for i in range(count)))

    write(3000)
    # a consumer group on the source that read the first records: checkpointed, and synced
    # to the target (absent there)
    group = f"{topic}-readers"
    reader = Consumer(source_cluster.client_config(**{"group.id": group}))
    try:
        reader.commit(offsets=[TopicPartition(topic, p, 100) for p in range(3)],
                      asynchronous=False)
    finally:
        reader.close()
    port = free_port()
    config = tmp_path / "mm2.properties"
    config.write_text(mm2_properties(source_cluster, destination_cluster, (
        f"topics = {topic}\n"
        f"groups = {group}\n"
        # only the test's records: exact counts (heartbeats are emitted, not mirrored)
        "heartbeats.replication.enabled = false\n"
        "destination->source.emit.heartbeats.enabled = false\n"
        "emit.checkpoints.interval.seconds = 1\n"
        "emit.heartbeats.interval.seconds = 1\n"
        "sync.group.offsets.enabled = true\n"
        "sync.group.offsets.interval.seconds = 1\n"
        f"mirror.metrics.port = {port}\n"
        # a lag group (the flow's identity, and its lease's) of its own: other tests' mirrors of
        # source->destination on these clusters, killed, would be this flow's lost members
        f"mirror.lag.group.id = kafka-mirror.{topic}\n"
        f"mirror.metrics.bind.address = {LOOPBACK}\n" + MODES[mode]
    )))
    base = f"http://{LOOPBACK}:{port}"
    mirror = MirrorProcess(["run", str(config), "--state-dir", str(tmp_path / "state")],
                           tmp_path / "mirror.log").start()
    target = f"source.{topic}"
    try:
        with LocalPrometheus(tmp_path / "prometheus", [f"{LOOPBACK}:{port}"],
                             [RULES]) as prometheus:
            wait_for(lambda: _get(f"{base}/health/live")[0] == 200, 90, "the live endpoint",
                     mirror)
            wait_for(lambda: sum(end_offsets(destination_cluster, target).values()) >= 3000,
                     180, "3000 records mirrored", mirror)
            # a partition more on the source: added on the target, then a second round of
            # records (into it too) while Prometheus watches
            admin = source_cluster.admin()  # kept until the future is done
            for future in admin.create_partitions([NewPartitions(topic, 4)]).values():
                future.result(timeout=30)
            wait_for(lambda: prometheus.value(QUERIES["partitions"]) == 4, 60,
                     "the flow to mirror 4 partitions", mirror)
            write(600, partitions=4)
            wait_for(lambda: prometheus.value(QUERIES["records"]) == 3600, 90,
                     "Prometheus to see 3600 records mirrored", mirror)
            wait_for(lambda: _get(f"{base}/health/ready")[0] == 200, 90, "ready", mirror)
            wait_for(lambda: prometheus.value(QUERIES["groups synced"]) == 1, 30,
                     "the group's checkpoints and offsets on the target", mirror)
            # per topic: every record the target acknowledged, measured in the producer
            written = sum(end_offsets(destination_cluster, target).values())
            assert written == 3600
            per_topic = (f"kafka_mirror_topic_replication_latency_seconds_count{{{FLOW},"
                         f'topic="{target}"}}')
            wait_for(lambda: prometheus.value(f"sum({per_topic})") == written, 30,
                     "Prometheus to see the per-topic latency of every record", mirror)
            scraped = [line for line in _get(f"{base}/metrics")[1].decode().splitlines()
                       if line.startswith("kafka_mirror_topic_replication_latency_seconds_count")]
            assert len(scraped) == 1 and f'topic="{target}"' in scraped[0], scraped
            assert float(scraped[0].rsplit(" ", 1)[1]) == written
            # a few more scrapes, for the rate() windows
            scrapes = 'sum(count_over_time(up{job="kafka-mirror"}[1h]))'
            before = prometheus.value(scrapes) or 0
            wait_for(lambda: (prometheus.value(scrapes) or 0) >= before + 3, 30,
                     "three more scrapes of the mirror", mirror)
            values = {}
            for name, expr in QUERIES.items():
                result = prometheus.query(expr)
                assert result, f"{name}: {expr} gave no series"
                values[name] = float(result[0]["value"][1])
            for name, expr in dashboard_queries().items():
                assert prometheus.query(expr), f"dashboard panel {name}: {expr} gave no series"
            rules = prometheus.rules()
            assert sorted(r["name"] for r in rules) == sorted(RULE_NAMES)
            for rule in rules:  # evaluated against the real series without error
                assert rule["health"] == "ok" and not rule.get("lastError"), rule
            # the mirror is up and its flow runs; latency may be pending: the first records
            # waited for Spark to start
            quiet = {r["name"]: r["state"] for r in rules if r["name"] in QUIET}
            assert not [r for r in rules if r["name"] in QUIET and r["state"] != "inactive"], [
                (r["name"], r["state"], r.get("alerts")) for r in rules if r["name"] in QUIET]
            assert quiet == dict.fromkeys(QUIET, "inactive"), quiet
            assert values["records"] == 3600
            assert values["partitions"] == 4 and values["topics"] == 1
            # caught up: nothing waits; the control plane wrote within its intervals (1 s)
            assert values["lag seconds"] == 0
            assert values["heartbeat age"] < 5 and values["checkpoint age"] < 5
            assert values["group sync age"] < 5 and values["offset sync age"] < 120
            assert values["groups checkpointed"] == 1 and values["groups synced"] == 1
            assert values["topics created"] == 1 and values["partitions added"] == 1
            # the counter counts each sync the mirror logged (and is served while still 0)
            synced = f"{FLOW_NAME}: synced configs of topic "
            wait_for(lambda: prometheus.value(QUERIES["config syncs"])
                     == mirror.output().count(synced), 30,
                     "the config syncs counted as logged", mirror)
            assert values["running"] == 1 and values["up"] == 1
            assert values["lag"] == 0
            assert values["record rate"] > 0 and values["byte rate"] > 0
            # the records were produced at most a few minutes before they were mirrored
            assert 0 < values["latency avg"] < 300 and 0 < values["latency max"] < 300
            assert 0 < values["latency p99"] <= 300
            assert 0 < values["topic latency p99"] <= 300
            if mode == "micro-batch":  # no real-time batch ends within the test
                assert 0 <= values["batch p95"] < 60
            # kafka-mirror status reads the running mirror
            status = subprocess.run([*CLI, "status", str(config)], capture_output=True,
                                    text=True, timeout=60, check=False)
            assert status.returncode == 0, status.stdout + status.stderr
            assert "flow source->destination: running" in status.stdout
            # the only instance (either mode): it holds the lease (epoch 1), the only live member
            assert values["active"] == 1 and values["lease epoch"] == 1
            assert values["members live"] == 1 and values["lease age"] < 5
            assert re.search(r"role: active; lease epoch 1, held by this instance, renewed "
                             r"\d+ s ago; members: [^;,]+$", status.stdout, re.M), status.stdout
            assert "lag 0 records" in status.stdout and "3600 records" in status.stdout
            document = json.loads(subprocess.run(
                [*CLI, "status", "--url", f"{base}/status", "--json"], capture_output=True,
                text=True, timeout=60, check=True).stdout)
            assert document["ready"] and document["flows"]["source->destination"]["records"] \
                == 3600
        code, _ = mirror.terminate()
        assert code == 0, mirror.output()[-3000:]
    finally:
        mirror.cleanup()
    # stopped: nothing answers, and status says so
    assert _get(f"{base}/health/live")[0] == 0
    gone = subprocess.run([*CLI, "status", str(config)], capture_output=True, text=True,
                          timeout=60, check=False)
    assert gone.returncode == 1 and f"no mirror answers at {base}/status" in gone.stderr
