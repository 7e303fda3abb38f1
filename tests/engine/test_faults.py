"""Faults under continuous produce, on clusters of their own: a broker restart of the destination
or of the source while the mirror runs. The mirror must ride through it by itself (no exit, no
operator), lose nothing and keep order; duplicates are counted (bound: the batches cut short).
The figures go to docs/reliability.md.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, Producer, TopicPartition
from mirror_process import (
    MirrorProcess,
    end_offsets,
    first_occurrences,
    read_partitions,
    running,
    wait_for,
)

from kafka_mirror.localcluster import LocalKafkaCluster

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

TOTAL = 12_000
PARTITIONS = 3
OUTAGE_SECONDS = 15.0


@pytest.fixture(scope="module")
def fault_clusters(tmp_path_factory: pytest.TempPathFactory
                   ) -> Iterator[tuple[LocalKafkaCluster, LocalKafkaCluster]]:
    home = tmp_path_factory.mktemp("faults")
    pair = (LocalKafkaCluster("fsrc", home, heap="384m"),
            LocalKafkaCluster("fdst", home, heap="384m"))
    with running(pair):
        yield pair


def _producer_thread(cluster: LocalKafkaCluster, topic: str, done: threading.Event
                     ) -> threading.Thread:
    def produce() -> None:
        producer = Producer(cluster.client_config(**{
            "enable.idempotence": "true", "acks": "all", "message.timeout.ms": "300000"}))
        for i in range(TOTAL):
            producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(),
                             partition=i % PARTITIONS)
            if i % 500 == 499:
                producer.flush(300)
                time.sleep(0.4)
        producer.flush(300)
        done.set()

    thread = threading.Thread(target=produce, daemon=True)
    thread.start()
    return thread


class _LagGroup:
    """The mirror's committed positions (its lag group), read with one long-lived admin client
    (librdkafka admin clients must outlive their requests)."""

    def __init__(self, cluster: LocalKafkaCluster, group: str, topic: str) -> None:
        self.admin = cluster.admin()
        self.request = ConsumerGroupTopicPartitions(
            group, [TopicPartition(topic, p) for p in range(PARTITIONS)])

    def total(self) -> int:
        try:
            (future,) = self.admin.list_consumer_group_offsets(
                [self.request], request_timeout=10).values()
            return sum(max(0, tp.offset) for tp in future.result(timeout=15).topic_partitions)
        except Exception:
            return -1


# KAFKA_MIRROR_FAULTS picks the faults (default: both broker restarts)
FAULTS = os.environ.get("KAFKA_MIRROR_FAULTS", "destination,source").split(",")


@pytest.mark.parametrize("restarted", FAULTS)
def test_broker_restart_mid_stream_loses_nothing(
    fault_clusters: tuple[LocalKafkaCluster, LocalKafkaCluster], restarted: str,
    tmp_path: Path,
) -> None:
    source, destination = fault_clusters
    topic = f"faults-{restarted}"
    source.create_topic(topic, PARTITIONS)
    config = tmp_path / "mm2.properties"
    config.write_text(
        "clusters = fsrc, fdst\n"
        f"fsrc.bootstrap.servers = {source.bootstrap}\n"
        f"fdst.bootstrap.servers = {destination.bootstrap}\n"
        "fsrc->fdst.enabled = true\n"
        f"topics = {topic}\n"
        "replication.factor = 1\n"
        "offset-syncs.topic.replication.factor = 1\n"
        "checkpoints.topic.replication.factor = 1\n"
        "heartbeats.topic.replication.factor = 1\n"
        "emit.heartbeats.enabled = false\n"
        "sync.topic.acls.enabled = false\n"
        "refresh.topics.interval.seconds = 3\n"
        "mirror.max.records.per.batch = 1000\n"
        "mirror.lag.commit.interval.ms = 1000\n"
        "spark.driver.memory = 768m\nspark.master = local[2]\n",
        encoding="utf-8",
    )
    done = threading.Event()
    writer = _producer_thread(source, topic, done)
    mirror = MirrorProcess(["run", str(config), "--state-dir", str(tmp_path / "state")],
                           tmp_path / "mirror.log").start()
    broker = destination if restarted == "destination" else source
    # progress is read on the cluster that stays up (librdkafka's admin client asserts when a
    # request is pending on a broker that restarts): the lag group on the source, or the
    # target's end offsets
    if restarted == "destination":
        lag = _LagGroup(source, "kafka-mirror.fsrc_to_fdst", topic)
        copied = lag.total
    else:
        def copied() -> int:
            return sum(end_offsets(destination, f"fsrc.{topic}").values())
    try:
        wait_for(lambda: copied() >= 3000, 240, "mirroring under way",
                 mirror)
        broker.stop()
        time.sleep(OUTAGE_SECONDS)
        assert mirror.proc is not None and mirror.proc.poll() is None, mirror.output()[-3000:]
        broker.start(90.0)
        back = time.monotonic()
        writer.join(600)
        assert done.is_set()
        try:
            wait_for(lambda: copied() >= TOTAL, 300,
                     "everything mirrored after the restart", mirror)
        except AssertionError as exc:
            ends = end_offsets(destination, f"fsrc.{topic}")
            raise AssertionError(f"target end offsets {ends}, progress "
                                 f"{copied()}: {exc}") from None
        resumed = time.monotonic() - back
        code, _ = mirror.terminate()
        assert code == 0, mirror.output()[-3000:]
    finally:
        mirror.cleanup()
    src = read_partitions(source, topic)
    dst = read_partitions(destination, f"fsrc.{topic}")
    duplicates = 0
    for partition, records in src.items():
        assert first_occurrences(dst[partition]) == records, f"partition {partition}"
        duplicates += len(dst[partition]) - len(records)
    assert sum(len(r) for r in src.values()) == TOTAL
    print(f"{restarted} broker restart ({OUTAGE_SECONDS:.0f} s down): 0 lost, order kept, "
          f"{duplicates} duplicates, caught up {resumed:.0f} s after the broker was back")
