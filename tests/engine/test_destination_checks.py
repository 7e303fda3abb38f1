"""Faults found before records flow: destination topics that would change or refuse records
(``LogAppendTime``, a smaller ``max.message.bytes``) and source records deleted before they were
mirrored (``mirror.fail.on.data.loss``). Real clusters; the end-to-end cases run the CLI."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource
from mirror_process import MirrorProcess, end_offsets, mm2_properties, read_partitions

from kafka_mirror.config.mm2 import mm2_from_text
from kafka_mirror.control.topics import TopicSync
from kafka_mirror.kafka.admin import ClusterAdmin
from kafka_mirror_testing.localcluster import LocalKafkaCluster
from kafka_mirror_testing.records import Message, produce
from kafka_mirror_testing.waiting import wait_for

pytestmark = [pytest.mark.kafka]

MIB = 1024 * 1024


def _topic_configs(cluster: LocalKafkaCluster, topic: str) -> dict[str, str]:
    admin = cluster.admin()  # must outlive its futures
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    (future,) = admin.describe_configs([resource]).values()
    return {name: entry.value for name, entry in future.result().items()}


def _visible(cluster: LocalKafkaCluster, *topics: str) -> None:
    """Wait until the cluster's metadata lists the topics (just created by the test)."""
    admin = cluster.admin()
    wait_for(lambda: set(topics) <= set(admin.list_topics(timeout=10).topics), 30,
             f"topics {topics} listed")


def _topic_sync(source: LocalKafkaCluster, destination: LocalKafkaCluster, prefix: str,
                extra: str = "", clock: Callable[[], float] = time.monotonic) -> TopicSync:
    config = mm2_from_text(mm2_properties(source, destination, f"topics = {prefix}-.*\n" + extra))
    flow = config.flows[0]
    return TopicSync(flow, ClusterAdmin(flow.source), ClusterAdmin(flow.target), clock=clock)


def _counted(count: int, partition: int = 0,
             first_timestamp: int = 1_600_000_000_000) -> Iterator[Message]:
    for i in range(count):
        yield Message(key=f"k{i}".encode(), value=f"v{i}".encode(), partition=partition,
                      timestamp=first_timestamp + i)


def test_log_append_time_and_small_limit_reported_when_configs_not_synced(
    source_cluster: LocalKafkaCluster, destination_cluster: LocalKafkaCluster,
    unique_topic: str, caplog: pytest.LogCaptureFixture,
) -> None:
    prefix = unique_topic
    source_cluster.create_topic(f"{prefix}-create", 1, config={"max.message.bytes": str(2 * MIB)})
    source_cluster.create_topic(f"{prefix}-append", 1,
                                config={"message.timestamp.type": "LogAppendTime"})
    source_cluster.create_topic(f"{prefix}-new", 1, config={"max.message.bytes": str(2 * MIB),
                                                            "retention.ms": "-1"})
    for name in ("create", "append"):
        destination_cluster.create_topic(f"source.{prefix}-{name}", 1,
                                         config={"message.timestamp.type": "LogAppendTime"})
    _visible(destination_cluster, f"source.{prefix}-create", f"source.{prefix}-append")
    sync = _topic_sync(source_cluster, destination_cluster, prefix,
                       "sync.topic.configs.enabled = false\n")
    with caplog.at_level(logging.WARNING, logger="kafka_mirror.control.topics"):
        sync.sync()
        sync.sync()  # reported once
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    create = [w for w in warnings if f"'source.{prefix}-create' has" in w]
    assert create == [
        f"source->destination: destination topic 'source.{prefix}-create' has "
        "message.timestamp.type=LogAppendTime, the destination broker overwrites every mirrored "
        f"record's timestamp with its own append time (source topic '{prefix}-create' keeps "
        "the producers' timestamps); topic configs are not synced "
        "(sync.topic.configs.enabled=false): set message.timestamp.type=CreateTime on it"
    ]
    append = [w for w in warnings if f"'source.{prefix}-append' has" in w]
    assert len(append) == 1
    assert f"as has source topic '{prefix}-append': the records' timestamps are the source " \
           "broker's append times, and the destination broker replaces them" in append[0]
    limit = [w for w in warnings if f"'source.{prefix}-create' accepts" in w]
    assert len(limit) == 1
    assert f"up to 1048588 bytes (max.message.bytes), source topic '{prefix}-create' up to " \
           f"{2 * MIB}: a larger record would stop the flow" in limit[0]
    assert not [w for w in warnings if f"source.{prefix}-new" in w]
    # nothing changed on existing topics; a created topic has the source's own configs (as
    # MirrorMaker 2 creates them, synced or not)
    assert _topic_configs(destination_cluster, f"source.{prefix}-create")[
        "message.timestamp.type"] == "LogAppendTime"
    created = _topic_configs(destination_cluster, f"source.{prefix}-new")
    assert created["max.message.bytes"] == str(2 * MIB)
    assert created["retention.ms"] == "-1"
    assert created["message.timestamp.type"] == "CreateTime"


def test_log_append_time_and_small_limit_fixed_when_configs_synced(
    source_cluster: LocalKafkaCluster, destination_cluster: LocalKafkaCluster,
    unique_topic: str, caplog: pytest.LogCaptureFixture,
) -> None:
    prefix = unique_topic
    source_cluster.create_topic(f"{prefix}-a", 1, config={"max.message.bytes": str(2 * MIB)})
    destination_cluster.create_topic(f"source.{prefix}-a", 1,
                                     config={"message.timestamp.type": "LogAppendTime"})
    _visible(destination_cluster, f"source.{prefix}-a")
    sync = _topic_sync(source_cluster, destination_cluster, prefix)
    with caplog.at_level(logging.INFO, logger="kafka_mirror.control.topics"):
        sync.sync()
    configs = _topic_configs(destination_cluster, f"source.{prefix}-a")
    assert configs["message.timestamp.type"] == "CreateTime"
    assert configs["max.message.bytes"] == str(2 * MIB)
    messages = [r.getMessage() for r in caplog.records]
    assert any(f"'source.{prefix}-a' has message.timestamp.type=LogAppendTime" in m
               and m.endswith("; set message.timestamp.type=CreateTime") for m in messages)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_configs_synced_again_every_sync_interval_new_topics_at_once(
    source_cluster: LocalKafkaCluster, destination_cluster: LocalKafkaCluster,
    unique_topic: str,
) -> None:
    """As MirrorMaker 2 does, existing topics' configs are described and synced every
    ``sync.topic.configs.interval.seconds``, not at every topic refresh (at 2,000 partitions the
    describing took most of an idle mirror's control-plane CPU); a new topic is created with its
    configs at the refresh that finds it."""
    prefix = unique_topic
    source_cluster.create_topic(f"{prefix}-a", 1, config={"retention.ms": "86400000"})
    _visible(source_cluster, f"{prefix}-a")
    now = [0.0]
    sync = _topic_sync(source_cluster, destination_cluster, prefix,
                       "sync.topic.configs.interval.seconds = 600\n", clock=lambda: now[0])
    sync.sync()
    assert _topic_configs(destination_cluster, f"source.{prefix}-a")["retention.ms"] == "86400000"
    admin = source_cluster.admin()  # must outlive its futures
    resource = ConfigResource(ConfigResource.Type.TOPIC, f"{prefix}-a", incremental_configs=[
        ConfigEntry("retention.ms", "172800000", incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result()
    wait_for(lambda: _topic_configs(source_cluster, f"{prefix}-a")["retention.ms"]
             == "172800000", 30, "the source topic's new retention in effect")
    source_cluster.create_topic(f"{prefix}-b", 1, config={"retention.ms": "3600000"})
    _visible(source_cluster, f"{prefix}-b")
    now[0] = 599.0
    sync.sync()
    assert _topic_configs(destination_cluster, f"source.{prefix}-a")["retention.ms"] == "86400000"
    assert _topic_configs(destination_cluster, f"source.{prefix}-b")["retention.ms"] == "3600000"
    now[0] = 600.0
    sync.sync()
    assert _topic_configs(destination_cluster, f"source.{prefix}-a")["retention.ms"] == "172800000"


@pytest.mark.spark
def test_large_record_and_log_append_destination_mirrored_as_they_are(
    source_cluster: LocalKafkaCluster, destination_cluster: LocalKafkaCluster,
    unique_topic: str, tmp_path: Path,
) -> None:
    """A 1.5 MiB record of a topic that allows 2 MiB (the producer's default limit is 1 MiB),
    and source timestamps kept on a destination topic that had LogAppendTime."""
    prefix = unique_topic
    source_cluster.create_topic(f"{prefix}-big", 1, config={"max.message.bytes": str(2 * MIB)})
    source_cluster.create_topic(f"{prefix}-ts", 1)
    destination_cluster.create_topic(f"source.{prefix}-ts", 1,
                                     config={"message.timestamp.type": "LogAppendTime"})
    produce(source_cluster, f"{prefix}-big", [
        Message(key=b"small", value=b"s", timestamp=1_600_000_000_000),
        Message(key=b"big", value=b"x" * (3 * MIB // 2), timestamp=1_600_000_000_001),
        Message(key=b"after", value=b"a", timestamp=1_600_000_000_002),
    ], **{"message.max.bytes": str(3 * MIB)})
    produce(source_cluster, f"{prefix}-ts", _counted(50))

    config = tmp_path / "mm2.properties"
    config.write_text(mm2_properties(source_cluster, destination_cluster,
                                     f"topics = {prefix}-.*\n"))
    mirror = MirrorProcess(["run", str(config), "--state-dir", str(tmp_path / "state")],
                           tmp_path / "mirror.log").start()
    try:
        wait_for(lambda: end_offsets(destination_cluster, f"source.{prefix}-big").get(0) == 3
                 and end_offsets(destination_cluster, f"source.{prefix}-ts").get(0) == 50,
                 240, "both topics mirrored", mirror)
        for topic in ("big", "ts"):
            source = read_partitions(source_cluster, f"{prefix}-{topic}")
            target = read_partitions(destination_cluster, f"source.{prefix}-{topic}")
            assert target == source, f"{topic} differs"  # timestamps included
        assert "set message.timestamp.type=CreateTime" in mirror.output()
        code, _ = mirror.terminate()
        assert code == 0, mirror.output()[-3000:]
    finally:
        mirror.cleanup()


def _delete_records(cluster: LocalKafkaCluster, topic: str, partition: int,
                    before: int) -> None:
    admin: Any = cluster.admin()
    (future,) = admin.delete_records([TopicPartition(topic, partition, before)]).values()
    assert future.result(timeout=30).low_watermark == before


@pytest.mark.spark
@pytest.mark.parametrize("first_batch", ["committed", "cut"])
def test_records_deleted_before_they_were_mirrored_are_named(
    source_cluster: LocalKafkaCluster, destination_cluster: LocalKafkaCluster,
    unique_topic: str, tmp_path: Path, first_batch: str,
) -> None:
    """Stop the mirror, let the source delete records it has not mirrored, start it again:
    with mirror.fail.on.data.loss=true (the default) the flow stops naming the partition and
    offsets; with false they are named and skipped. ``cut``: the stop came after the first
    batch was written but before Spark committed it (what a SIGTERM at that moment leaves), so
    the partitions resume from what the batch writer recorded, not from a committed batch."""
    topic = unique_topic
    source_cluster.create_topic(topic, 2)
    produce(source_cluster, topic, _counted(600, partition=0))
    produce(source_cluster, topic, _counted(100, partition=1))
    config = tmp_path / "mm2.properties"
    config.write_text(mm2_properties(source_cluster, destination_cluster, f"topics = {topic}\n"))
    args = ["run", str(config), "--state-dir", str(tmp_path / "state")]
    mirror = MirrorProcess(args, tmp_path / "first.log").start()
    try:
        wait_for(lambda: end_offsets(destination_cluster, f"source.{topic}") == {0: 600, 1: 100},
                 240, "first run mirrored", mirror)
        code, _ = mirror.terminate()
        assert code == 0, mirror.output()[-3000:]
    finally:
        mirror.cleanup()
    if first_batch == "cut":
        for commit in (tmp_path / "state").glob("*/gen-*/commits/*"):
            commit.unlink()

    before = read_partitions(source_cluster, topic)
    produce(source_cluster, topic, _counted(600, partition=0, first_timestamp=1_600_000_100_000))
    _delete_records(source_cluster, topic, 0, 1000)  # 600-999 never mirrored

    mirror = MirrorProcess(args, tmp_path / "second.log").start()
    try:
        code = mirror.wait_exit(240)
        output = mirror.output()
        assert code == 1, output[-3000:]
        assert (
            f"records were deleted on cluster 'source' (retention or deleted records) before "
            f"they were mirrored: {topic}-0: offsets 600-999 deleted before they were mirrored; "
            "mirror.fail.on.data.loss=true stops the flow (set it to false to skip them)"
        ) in output
        assert f"{topic}-1:" not in output
    finally:
        mirror.cleanup()
    assert end_offsets(destination_cluster, f"source.{topic}") == {0: 600, 1: 100}

    config.write_text(mm2_properties(source_cluster, destination_cluster,
                                     f"topics = {topic}\nmirror.fail.on.data.loss = false\n"))
    mirror = MirrorProcess(args, tmp_path / "third.log").start()
    try:
        wait_for(lambda: end_offsets(destination_cluster, f"source.{topic}") == {0: 800, 1: 100},
                 240, "the rest mirrored", mirror)
        assert (
            "skipping records deleted on cluster 'source' before they were mirrored "
            f"(mirror.fail.on.data.loss=false): {topic}-0: offsets 600-999 deleted before they "
            "were mirrored"
        ) in mirror.output()
        target = read_partitions(destination_cluster, f"source.{topic}")
        assert target[0][:600] == before[0]
        assert [(key, value, ts) for key, value, _, ts in target[0][600:]] == [
            (f"k{i}".encode(), f"v{i}".encode(), 1_600_000_100_000 + i) for i in range(400, 600)
        ]
        assert target[1] == before[1]
        code, _ = mirror.terminate()
        assert code == 0, mirror.output()[-3000:]
    finally:
        mirror.cleanup()


@pytest.mark.parametrize(
    ("extra", "largest", "expected"),
    [
        ("", 2 * MIB, str(2 * MIB + 1024)),  # the largest source batch, plus the header
        ("", 1_048_588, "1049612"),  # the broker default: just above the producer default
        ("", 500_000, None),  # the producer default already sends it
        ("destination.producer.max.request.size = 777\n", 2 * MIB, "777"),  # the user's
        ("source->destination.producer.max.request.size = 888\n", 2 * MIB, "888"),
    ],
)
def test_producer_request_size_follows_the_largest_source_limit(
    extra: str, largest: int, expected: str | None
) -> None:
    from kafka_mirror.kafka.clients import spark_sink_options

    config = mm2_from_text(
        "clusters = source, destination\nsource.bootstrap.servers = a:1\n"
        "destination.bootstrap.servers = b:1\nsource->destination.enabled = true\n" + extra
    )
    options = spark_sink_options(config.flows[0], largest)
    assert options.get("kafka.max.request.size") == expected
