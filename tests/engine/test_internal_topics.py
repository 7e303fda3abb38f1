"""The internal-topic reader and writer (``kafka_mirror.kafka.internal_topics``) against a real
cluster: create-if-missing as a compacted topic, write with delivery confirmation, read back to
the end, and failures as one error naming the topic and the cluster."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka.admin import ConfigResource

from kafka_mirror.config.model import ClusterSpec
from kafka_mirror.kafka.admin import ClusterAdmin
from kafka_mirror.kafka.internal_topics import (
    InternalRecord,
    InternalTopicError,
    InternalTopicReader,
    InternalTopicWriter,
)
from kafka_mirror_testing.localcluster import LocalKafkaCluster

pytestmark = pytest.mark.kafka


def _spec(cluster: LocalKafkaCluster) -> ClusterSpec:
    return ClusterSpec(alias="B", client={"bootstrap.servers": cluster.bootstrap})


def _topic() -> str:
    return f"internal-{uuid.uuid4().hex[:8]}.internal"


def _cleanup_policy(cluster: LocalKafkaCluster, topic: str) -> str:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    admin = cluster.admin()  # kept alive until the answer is in
    configs = admin.describe_configs([resource])[resource].result(timeout=30)
    return str(configs["cleanup.policy"].value)


def _admin(cluster: LocalKafkaCluster) -> ClusterAdmin:
    admin = ClusterAdmin(_spec(cluster))
    admin.wait_ready(30)
    return admin


def test_write_creates_compacted_topic_and_reads_back_in_order(
    destination_cluster: LocalKafkaCluster,
) -> None:
    topic = _topic()
    spec = _spec(destination_cluster)
    admin = _admin(destination_cluster)
    writer = InternalTopicWriter(spec, topic)
    try:
        assert writer.ensure_topic(admin) == 1
        assert writer.ensure_topic(admin) == 1  # exists now: left as it is
        assert _cleanup_policy(destination_cluster, topic) == "compact"
        records = [(f"k{i % 3}".encode(), f"v{i}".encode()) for i in range(50)]
        assert writer.write([*records, (b"k0", None)], partition=0) == 51
    finally:
        writer.close()
    read = InternalTopicReader(spec, topic).read()
    assert [(r.key, r.value) for r in read] == [*records, (b"k0", None)]
    assert [r.offset for r in read] == list(range(51))
    assert {r.partition for r in read} == {0}


def test_read_every_partition_or_only_those_asked_for(
    destination_cluster: LocalKafkaCluster,
) -> None:
    topic = _topic()
    spec = _spec(destination_cluster)
    writer = InternalTopicWriter(spec, topic, partition_by_key=True)
    try:
        assert writer.ensure_topic(_admin(destination_cluster), partitions=3) == 3
        for partition in range(3):
            writer.write([(b"k", f"p{partition}-{i}".encode()) for i in range(partition + 1)],
                         partition=partition)
    finally:
        writer.close()
    seen: list[InternalRecord] = []
    InternalTopicReader(spec, topic).read_to_end(seen.append)
    assert sorted((r.partition, r.offset, r.value) for r in seen) == [
        (p, i, f"p{p}-{i}".encode()) for p in range(3) for i in range(p + 1)
    ]
    only = InternalTopicReader(spec, topic, partitions=[2]).read()
    assert [r.value for r in only] == [b"p2-0", b"p2-1", b"p2-2"]


def test_missing_topic_reads_empty_and_is_not_created(
    destination_cluster: LocalKafkaCluster,
) -> None:
    topic = _topic()
    assert InternalTopicReader(_spec(destination_cluster), topic).read() == []
    assert topic not in _admin(destination_cluster).topic_partitions()


def test_empty_topic_reads_empty(destination_cluster: LocalKafkaCluster) -> None:
    topic = _topic()
    writer = InternalTopicWriter(_spec(destination_cluster), topic)
    try:
        writer.ensure_topic(_admin(destination_cluster))
    finally:
        writer.close()
    assert InternalTopicReader(_spec(destination_cluster), topic, timeout=10).read() == []


def test_write_to_missing_topic_fails_naming_topic_and_cluster(
    destination_cluster: LocalKafkaCluster,
) -> None:
    topic = _topic()
    writer = InternalTopicWriter(_spec(destination_cluster), topic,
                                 label="heartbeats not written to", timeout=3)
    try:
        with pytest.raises(InternalTopicError) as caught:
            writer.write([(b"k", b"v")], partition=0)
    finally:
        writer.producer.purge()
        writer.close()
    assert str(caught.value).startswith(f"heartbeats not written to {topic} on cluster 'B': ")
    assert (caught.value.topic, caught.value.cluster) == (topic, "B")
    # internal topics are never auto-created (they would not be compacted)
    assert topic not in _admin(destination_cluster).topic_partitions()


def test_read_failure_names_topic_and_cluster(destination_cluster: LocalKafkaCluster) -> None:
    topic = _topic()
    writer = InternalTopicWriter(_spec(destination_cluster), topic)
    try:
        writer.ensure_topic(_admin(destination_cluster))
    finally:
        writer.close()
    reader = InternalTopicReader(_spec(destination_cluster), topic, label="reading checkpoints",
                                 timeout=5, partitions=[4])  # the topic has partition 0 only
    with pytest.raises(InternalTopicError, match=f"^reading checkpoints {topic} on cluster 'B': "):
        reader.read()
