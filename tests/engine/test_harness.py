"""The local Kafka harness itself: real KRaft clusters and stock MirrorMaker 2."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from kafka_mirror_testing.localcluster import LocalKafkaCluster
from kafka_mirror_testing.quick_jvms import (
    FLAGS_ENV,
    KAFKA_CLASS_DATA_ENV,
    SPARK_SUBMIT_OPTS,
    class_data_flags,
    use_quick_start_jvms,
)
from kafka_mirror_testing.records import Message, produce
from kafka_mirror_testing.stock_mm2 import StockMirrorMaker2, mm2_properties
from kafka_mirror_testing.waiting import wait_for

LINGER = {"linger.ms": "5"}

pytestmark = pytest.mark.kafka


def _consume(
    cluster: LocalKafkaCluster, partitions: list[TopicPartition], count: int, timeout: float
) -> list[Any]:
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": "harness-test",
            "enable.auto.commit": "false",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.assign(partitions)
    out: list[Any] = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            out.append(msg)
    finally:
        consumer.close()
    return out


def _wait_for_topic(admin: AdminClient, topic: str, timeout: float) -> int:
    """The topic's partition count, once it exists."""

    def there() -> bool:
        meta = admin.list_topics(timeout=5)
        return topic in meta.topics and meta.topics[topic].error is None

    wait_for(there, timeout, f"topic {topic}", interval=0.5)
    return len(admin.list_topics(topic, timeout=5).topics[topic].partitions)


def test_clusters_start(
    source_cluster: LocalKafkaCluster, destination_cluster: LocalKafkaCluster
) -> None:
    assert source_cluster.alive() and destination_cluster.alive()
    assert source_cluster.bootstrap != destination_cluster.bootstrap
    for cluster in (source_cluster, destination_cluster):
        assert cluster.bootstrap.startswith("127.0.0.1:")
        assert cluster.pid is not None and Path(f"/proc/{cluster.pid}").exists()
        meta = cluster.admin().list_topics(timeout=10)
        assert len(meta.brokers) == 1
        assert cluster.log_path.is_file()


def test_produce_consume_roundtrip(source_cluster: LocalKafkaCluster, unique_topic: str) -> None:
    source_cluster.create_topic(unique_topic, partitions=3)
    meta = source_cluster.admin().list_topics(unique_topic, timeout=10)
    assert len(meta.topics[unique_topic].partitions) == 3

    headers = [("h1", b"v1"), ("h2", b""), ("h1", b"again")]
    produce(
        source_cluster,
        unique_topic,
        [
            Message(
                key=b"the-key",
                value=b"the-value",
                partition=2,
                headers=headers,
                timestamp=1_700_000_000_123,
            ),
            Message(key=b"tomb", value=None, partition=2),
        ],
        **LINGER,
    )

    msgs = _consume(source_cluster, [TopicPartition(unique_topic, 2, 0)], count=2, timeout=30)
    assert len(msgs) == 2
    first, tomb = msgs
    assert first.topic() == unique_topic
    assert first.partition() == 2
    assert first.offset() == 0
    assert first.key() == b"the-key"
    assert first.value() == b"the-value"
    assert first.headers() == headers
    _ts_type, ts = first.timestamp()
    assert ts == 1_700_000_000_123
    assert tomb.key() == b"tomb" and tomb.value() is None


def test_stock_mm2_mirrors_topic(
    source_cluster: LocalKafkaCluster,
    destination_cluster: LocalKafkaCluster,
    unique_topic: str,
    tmp_path: Path,
) -> None:
    topic = f"mm2-{unique_topic}"
    source_cluster.create_topic(topic, partitions=2)
    n = 200
    produce(
        source_cluster,
        topic,
        [
            Message(
                key=f"k{i}".encode(),
                value=f"v{i}".encode(),
                partition=i % 2,
                headers=[("idx", str(i).encode())],
                timestamp=1_700_000_000_000 + i,
            )
            for i in range(n)
        ],
        **LINGER,
    )

    props = mm2_properties(source_cluster.bootstrap, destination_cluster.bootstrap, topics=topic)
    with StockMirrorMaker2(props, tmp_path / "mm2", heap="512m") as mm2:
        assert mm2.pid is not None and Path(f"/proc/{mm2.pid}/status").exists()
        remote = f"source.{topic}"
        partitions = _wait_for_topic(destination_cluster.admin(), remote, timeout=60)
        assert partitions == 2
        msgs = _consume(
            destination_cluster,
            [TopicPartition(remote, p, 0) for p in range(partitions)],
            count=n,
            timeout=60,
        )
    assert len(msgs) == n
    by_key = {m.key(): m for m in msgs}
    assert len(by_key) == n
    for i in range(n):
        m = by_key[f"k{i}".encode()]
        assert m.value() == f"v{i}".encode()
        assert m.partition() == i % 2
        assert m.headers() == [("idx", str(i).encode())]
        assert m.timestamp()[1] == 1_700_000_000_000 + i


SPARK_ROUNDTRIP = r"""
import json, sys
from pyspark.sql import SparkSession, functions as F
from kafka_mirror.jvm_artifacts import spark_connector_jars

bootstrap, src, dst = sys.argv[1:4]
spark = (
    SparkSession.builder.master("local[1]")
    .config("spark.jars", ",".join(str(j) for j in spark_connector_jars()))
    .config("spark.driver.memory", "512m")
    .config("spark.driver.host", "127.0.0.1")
    .config("spark.driver.bindAddress", "127.0.0.1")
    .config("spark.ui.enabled", "false")
    .getOrCreate()
)
df = (
    spark.read.format("kafka")
    .option("kafka.bootstrap.servers", bootstrap)
    .option("subscribe", src)
    .option("includeHeaders", "true")
    .load()
)
ts_ms = (F.unix_micros("timestamp") / 1000).cast("long").cast("string")
marker = F.struct(
    F.lit("kafka-mirror.timestamp").alias("key"), F.encode(ts_ms, "US-ASCII").alias("value")
)
out = df.select(
    "key", "value", F.concat(F.coalesce("headers", F.array()), F.array(marker)).alias("headers")
)
(
    out.write.format("kafka")
    .option("kafka.bootstrap.servers", bootstrap)
    .option("kafka.interceptor.classes", "io.kafkamirror.TimestampRestoringInterceptor")
    .option("topic", dst)
    .save()
)
spark.stop()
"""


@pytest.mark.spark
def test_spark_connector_jars_and_interceptor(
    source_cluster: LocalKafkaCluster, unique_topic: str, tmp_path: Path
) -> None:
    """pyspark + jvm/spark-connector jars read and write Kafka; the interceptor restores the
    source timestamp from the trailing marker header and strips it."""
    src, dst = f"{unique_topic}-in", f"{unique_topic}-out"
    source_cluster.create_topic(src)
    source_cluster.create_topic(dst)
    produce(
        source_cluster,
        src,
        [
            Message(
                key=b"k1",
                value=b"v1",
                headers=[("kafka-mirror.timestamp", b"user"), ("a", b"1")],
                timestamp=1_700_000_000_123,
            ),
            Message(key=None, value=None, timestamp=1_700_000_000_456),
        ],
        **LINGER,
    )
    env = {
        **os.environ,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
    }
    proc = subprocess.run(
        [sys.executable, "-c", SPARK_ROUNDTRIP, source_cluster.bootstrap, src, dst],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]

    msgs = _consume(source_cluster, [TopicPartition(dst, 0, 0)], count=2, timeout=30)
    assert len(msgs) == 2
    first, tomb = msgs
    assert first.key() == b"k1" and first.value() == b"v1"
    assert first.headers() == [("kafka-mirror.timestamp", b"user"), ("a", b"1")]
    assert first.timestamp()[1] == 1_700_000_000_123
    assert tomb.key() is None and tomb.value() is None
    assert not tomb.headers()
    assert tomb.timestamp()[1] == 1_700_000_000_456


def test_listener_binds_give_an_extra_listener_its_address_and_port(tmp_path: Path) -> None:
    """An extra listener can bind another address (e.g. a bridge test hosts reach) on a fixed
    port; PLAINTEXT and CONTROLLER stay on free ports of 127.0.0.1."""
    cluster = LocalKafkaCluster(
        "binds",
        tmp_path,
        extra_listeners={"GSSAPI": "SASL_PLAINTEXT"},
        advertised_hosts={"GSSAPI": "10.0.0.1"},
        listener_binds={"gssapi": ("10.0.0.1", 19999)},
    )
    cluster._pick_ports()
    props = cluster.server_properties()
    listeners = dict(item.split("://") for item in props["listeners"].split(","))
    assert listeners["GSSAPI"] == "10.0.0.1:19999"
    assert listeners["PLAINTEXT"].startswith("127.0.0.1:")
    assert listeners["CONTROLLER"].startswith("127.0.0.1:")
    assert len({listeners[k].rsplit(":", 1)[1] for k in listeners}) == 3
    assert "GSSAPI://10.0.0.1:19999" in props["advertised.listeners"].split(",")
    assert cluster.bootstrap_for("GSSAPI") == "10.0.0.1:19999"
    with pytest.raises(ValueError, match="listener_binds names unknown listeners"):
        LocalKafkaCluster("bad", tmp_path, listener_binds={"PLAINTEXT": ("10.0.0.1", 0)})


def test_the_product_wheel_holds_no_test_harness(tmp_path: Path) -> None:
    """What ships (the wheel the collection installs on hosts) is product code only: the
    harness is a distribution of its own (tests/harness), installed beside it for development."""
    import zipfile

    repo = Path(__file__).resolve().parents[2]
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path),
                    str(repo)], check=True, timeout=300)
    (wheel,) = tmp_path.glob("kafka_mirror-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "kafka_mirror/cli/main.py" in names
    assert not [n for n in names if "testing" in n or n.startswith("tests/")], names


def test_quick_start_jvms_reach_spark_once_and_an_explicit_choice_is_kept() -> None:
    env = {SPARK_SUBMIT_OPTS: "-Dx=1"}
    use_quick_start_jvms(env)
    use_quick_start_jvms(env)  # a child process of a test does it again
    assert env == {FLAGS_ENV: "-XX:TieredStopAtLevel=1",
                   SPARK_SUBMIT_OPTS: "-Dx=1 -XX:TieredStopAtLevel=1"}
    off = {FLAGS_ENV: ""}  # run the test JVMs with the JVM's defaults
    use_quick_start_jvms(off)
    assert off == {FLAGS_ENV: ""}


def test_the_suites_brokers_map_the_class_data_archive_of_kafkas_class_path(
    source_cluster: LocalKafkaCluster, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    archive = os.environ.get(KAFKA_CLASS_DATA_ENV, "")
    assert archive and Path(archive).is_file(), "conftest's prime named no archive"
    assert source_cluster.pid is not None
    # the JVM mapped it (-Xshare:auto would have gone on without it)
    assert archive in Path(f"/proc/{source_cluster.pid}/maps").read_text()
    assert class_data_flags() == [f"-XX:SharedArchiveFile={archive}", "-Xshare:auto"]
    monkeypatch.setenv(KAFKA_CLASS_DATA_ENV, str(tmp_path / "gone.jsa"))
    assert class_data_flags() == []
    monkeypatch.delenv(KAFKA_CLASS_DATA_ENV)
    assert class_data_flags() == []
