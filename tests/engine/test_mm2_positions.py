"""Stock MirrorMaker 2's source positions: read (takeover MM2 -> kafka-mirror) and write (back).

(The record format's pure tests: tests/unit/kafka_mirror/control/test_mm2_positions_cases.py.)
The tests here run real stock MM2 (Kafka 4.3.1, dedicated mode) against the session clusters:
MM2 stores positions that :func:`read_mm2_positions` must return, and a restarted MM2 must
continue exactly from the positions :func:`write_mm2_positions` stored.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import ConfigResource
from mirror_process import end_offsets

from kafka_mirror.config.model import ClusterSpec
from kafka_mirror.control.mm2_positions import (
    mm2_offsets_topic,
    mm2_source_key,
    read_mm2_positions,
    write_mm2_positions,
)
from kafka_mirror.errors import MirrorError
from kafka_mirror_testing.localcluster import LocalKafkaCluster
from kafka_mirror_testing.records import Message, produce
from kafka_mirror_testing.stock_mm2 import RECORDS_ONLY, StockMirrorMaker2, mm2_properties
from kafka_mirror_testing.waiting import wait_for

MM2_HEAP = "384m"
LINGER = {"linger.ms": "5"}

# Computed with Kafka 4.3.1's jars (jvm/kafka-dist/target/lib): the key is
# JsonConverter(schemas.enable=false, isKey=true).fromConnectData(t, null,
# List.of("MirrorSourceConnector", <HashMap put topic, partition, cluster as in
# MirrorUtils.wrapPartition>)), the partition Utils.toPositive(Utils.murmur2(key)) % 25.
JAVA_PARTITION_OF_A_ORDERS = {0: 3, 1: 11, 2: 7, 3: 4, 4: 23, 24: 17}


def _letters() -> str:
    """8 random lowercase letters (aliases must not collide between tests on shared clusters)."""
    return "".join(chr(ord("a") + int(c, 16)) for c in uuid.uuid4().hex[:8])


# ------------------------------------------------------------------ broker helpers


def _spec(cluster: LocalKafkaCluster, alias: str) -> ClusterSpec:
    return ClusterSpec(alias=alias, client={"bootstrap.servers": cluster.bootstrap})


def _produce_values(
    cluster: LocalKafkaCluster, topic: str, per_partition: dict[int, range]
) -> None:
    produce(
        cluster,
        topic,
        [
            Message(value=f"p{p}-{i}".encode(), partition=p)
            for p, indexes in per_partition.items()
            for i in indexes
        ],
        **LINGER,
    )


def _end_offsets(cluster: LocalKafkaCluster, topic: str) -> dict[tuple[str, int], int]:
    """End offset of every partition of ``topic`` ({} when the topic does not exist); a topic
    just created may not have its leaders everywhere yet on a loaded machine: up to 30 s."""
    meta = cluster.admin().list_topics(timeout=10)
    if topic not in meta.topics or meta.topics[topic].error is not None:
        return {}
    count = len(meta.topics[topic].partitions)
    ends: dict[int, int] = {}

    def every_leader() -> bool:
        ends.update(end_offsets(cluster, topic))
        return len(ends) >= count

    wait_for(every_leader, 30, f"the end offsets of {topic}'s {count} partitions", interval=0.2)
    return {(topic, p): end for p, end in ends.items()}


def _wait_for_count(cluster: LocalKafkaCluster, topic: str, count: int, timeout: float) -> None:
    def total() -> int:
        try:
            return sum(_end_offsets(cluster, topic).values())
        except KafkaException:  # a topic just created: its leader is not elected yet
            return 0

    wait_for(lambda: total() >= count, timeout, f"{count} records on {topic}", interval=0.3)


def _read_all(
    cluster: LocalKafkaCluster, topic: str, timeout: float = 30.0
) -> list[tuple[int, int, bytes | None, bytes | None]]:
    """Every record of ``topic``: (partition, offset, key, value)."""
    ends = {p: end for (_, p), end in _end_offsets(cluster, topic).items() if end > 0}
    consumer = Consumer(
        {"bootstrap.servers": cluster.bootstrap, "group.id": "mm2-pos-read",
         "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in ends])
    out: list[tuple[int, int, bytes | None, bytes | None]] = []
    done: set[int] = set()
    deadline = time.monotonic() + timeout
    try:
        while len(done) < len(ends):
            assert time.monotonic() < deadline, f"{topic}: read {len(out)} records only"
            for msg in consumer.consume(1000, timeout=0.5):
                assert msg.error() is None, msg.error()
                out.append((msg.partition(), msg.offset(), msg.key(), msg.value()))
                if msg.offset() >= ends[msg.partition()] - 1:
                    done.add(msg.partition())
    finally:
        consumer.close()
    return out


# ------------------------------------------------------------------ real MM2


@dataclass
class Mm2Flow:
    source: LocalKafkaCluster
    target: LocalKafkaCluster
    source_alias: str
    target_alias: str
    topic: str
    props: dict[str, str]
    workdir: Path
    first_ends: dict[tuple[str, int], int]

    @property
    def remote(self) -> str:
        return f"{self.source_alias}.{self.topic}"

    @property
    def offsets_topic(self) -> str:
        return mm2_offsets_topic(self.props, self.source_alias, self.target_alias)

    def target_spec(self) -> ClusterSpec:
        return _spec(self.target, self.target_alias)

    def mm2(self) -> StockMirrorMaker2:
        return StockMirrorMaker2(self.props, self.workdir, heap=MM2_HEAP)


FIRST_RUN = {0: range(30), 1: range(20), 2: range(10)}
# one worker runs the module: stock MirrorMaker 2's flow runs once
pytestmark = [pytest.mark.xdist_group("mm2-positions")]


@pytest.fixture(scope="module")
def mm2_flow(
    source_cluster: LocalKafkaCluster,
    destination_cluster: LocalKafkaCluster,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Mm2Flow]:
    """A flow stock MM2 ran once: 60 records over 3 partitions copied, then MM2 stopped."""
    source_alias, target_alias = f"src{_letters()}", f"dst{_letters()}"
    topic = f"mm2pos-{uuid.uuid4().hex[:8]}"
    source_cluster.create_topic(topic, partitions=3)
    _produce_values(source_cluster, topic, FIRST_RUN)
    props = mm2_properties(
        source_cluster.bootstrap,
        destination_cluster.bootstrap,
        topics=topic,
        source_alias=source_alias,
        target_alias=target_alias,
        extra={**RECORDS_ONLY, "sync.topic.configs.enabled": "false"},
    )
    flow = Mm2Flow(
        source_cluster, destination_cluster, source_alias, target_alias, topic, props,
        tmp_path_factory.mktemp("mm2-positions"), _end_offsets(source_cluster, topic),
    )
    mm2 = flow.mm2()
    with mm2:
        _wait_for_count(destination_cluster, flow.remote, 60, timeout=60)
    # stopped gracefully (SIGTERM): the source task flushed its offsets on the way out
    yield flow


@pytest.mark.kafka
def test_read_positions_stock_mm2_stored(mm2_flow: Mm2Flow) -> None:
    flow = mm2_flow
    assert flow.offsets_topic == f"mm2-offsets.{flow.source_alias}.internal"
    positions = read_mm2_positions(flow.target_spec(), flow.offsets_topic, flow.source_alias)
    assert positions == flow.first_ends == {(flow.topic, 0): 30, (flow.topic, 1): 20,
                                            (flow.topic, 2): 10}
    # another source alias's positions, or a missing topic: nothing
    assert read_mm2_positions(flow.target_spec(), flow.offsets_topic, "other") == {}
    assert read_mm2_positions(flow.target_spec(), f"absent-{_letters()}", "x") == {}


@pytest.mark.kafka
def test_write_positions_stock_mm2_resumes_there(mm2_flow: Mm2Flow) -> None:
    flow = mm2_flow
    # MM2 is stopped; 10 new records per partition, the first 5 of each pretended mirrored
    _produce_values(flow.source, flow.topic, {p: range(100, 110) for p in range(3)})
    positions = {tp: end + 5 for tp, end in flow.first_ends.items()}
    written = write_mm2_positions(
        flow.target_spec(), flow.offsets_topic, flow.source_alias, positions
    )
    assert written == 3
    assert read_mm2_positions(flow.target_spec(), flow.offsets_topic, flow.source_alias) == (
        positions
    )
    # ours landed where MM2's own records with the same key are (so the last one wins)
    by_key: dict[bytes | None, set[int]] = {}
    for partition, _, key, _ in _read_all(flow.target, flow.offsets_topic):
        by_key.setdefault(key, set()).add(partition)
    for topic, partition in positions:
        assert len(by_key[mm2_source_key(flow.source_alias, topic, partition)]) == 1

    mm2 = flow.mm2()
    with mm2:
        _wait_for_count(flow.target, flow.remote, 60 + 15, timeout=60)
        with pytest.raises(MirrorError, match=f"'{flow.source_alias}-mm2'.*active member"):
            write_mm2_positions(flow.target_spec(), flow.offsets_topic, flow.source_alias,
                                {(flow.topic, 0): 1})
    values = sorted(v or b"" for _, _, _, v in _read_all(flow.target, flow.remote))
    expected = sorted(
        [f"p{p}-{i}".encode() for p, indexes in FIRST_RUN.items() for i in indexes]
        + [f"p{p}-{i}".encode() for p in range(3) for i in range(105, 110)]
    )
    assert values == expected  # no record before our positions copied, none after missed
    assert read_mm2_positions(flow.target_spec(), flow.offsets_topic, flow.source_alias) == (
        {tp: end + 10 for tp, end in flow.first_ends.items()}
    )


@pytest.mark.kafka
def test_write_creates_topic_like_connect_and_places_like_java(
    destination_cluster: LocalKafkaCluster, caplog: pytest.LogCaptureFixture
) -> None:
    """Java's partitions for known keys; a 0 position is a tombstone; junk is skipped on read."""
    spec = _spec(destination_cluster, "dst")
    topic = f"mm2-offsets-{_letters()}"
    positions = {("orders", p): 100 + p for p in JAVA_PARTITION_OF_A_ORDERS}
    positions[("orders", 9)] = 0
    group = f"none{_letters()}-mm2"
    assert write_mm2_positions(spec, topic, "A", positions, worker_group=group) == 7

    admin = destination_cluster.admin()
    meta = admin.list_topics(timeout=10)
    assert len(meta.topics[topic].partitions) == 25
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = admin.describe_configs([resource])[resource].result(timeout=10)
    assert configs["cleanup.policy"].value == "compact"

    records = _read_all(destination_cluster, topic)
    placed = {key: (partition, value) for partition, _, key, value in records}
    for partition, java_partition in JAVA_PARTITION_OF_A_ORDERS.items():
        key = mm2_source_key("A", "orders", partition)
        assert placed[key] == (java_partition, b'{"offset":%d}' % (99 + partition))
    assert placed[mm2_source_key("A", "orders", 9)][1] is None  # tombstone

    # records MM2 would not use: skipped (with a warning for the malformed ones)
    produce(
        destination_cluster,
        topic,
        [
            Message(key=b"not json", value=b'{"offset":1}', partition=0),
            Message(key=b'{"cluster":"A"}', value=b'{"offset":1}', partition=0),
            Message(  # alphabetic field order: MM2 looks up other bytes
                key=b'["MirrorSourceConnector",{"cluster":"A","topic":"orders","partition":5}]',
                value=b'{"offset":1}', partition=0,
            ),
            Message(key=mm2_source_key("A", "orders", 6), value=b'{"offset":"x"}', partition=0),
            Message(key=mm2_source_key("A", "orders", 7), value=b'{"offset":-1}', partition=0),
            Message(key=mm2_source_key("B", "orders", 8), value=b'{"offset":5}', partition=0),
            Message(key=b'["MirrorCheckpointConnector",{"partition":3,"topic":"A.orders",'
                    b'"group":"g1"}]', value=b'{"offset":0}', partition=0),
            # a later record for key 3 in the same partition wins; a tombstone deletes key 4
            Message(key=mm2_source_key("A", "orders", 3), value=b'{"offset":7}',
                    partition=JAVA_PARTITION_OF_A_ORDERS[3]),
            Message(key=mm2_source_key("A", "orders", 4), value=None,
                    partition=JAVA_PARTITION_OF_A_ORDERS[4]),
        ],
        **LINGER,
    )
    with caplog.at_level(logging.WARNING, logger="kafka_mirror.control.mm2_positions"):
        read = read_mm2_positions(spec, topic, "A")
    expected = {tp: pos for tp, pos in positions.items() if pos > 0}
    expected[("orders", 3)] = 8
    del expected[("orders", 4)]
    assert read == expected
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 4, warnings
    assert all(w.startswith(f"{topic} partition 0 offset ") for w in warnings)
    assert read_mm2_positions(spec, topic, "B") == {("orders", 8): 6}
