"""A group's offsets committed on a real broker when their records exceed what the group
coordinator writes in one batch (``__consumer_offsets``' 1 MiB): every partition committed, with
its metadata, none refused (one request was refused whole: "Unknown broker error")."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import NewTopic

from kafka_mirror.config.model import ClusterSpec
from kafka_mirror.kafka.admin import ClusterAdmin
from kafka_mirror.kafka.offset_commits import record_bytes
from kafka_mirror_testing.localcluster import LocalKafkaCluster

pytestmark = pytest.mark.kafka

PARTITIONS = 300
METADATA = 4000  # under the broker's offset.metadata.max.bytes (4096)


def test_offsets_over_one_batch_are_all_committed(
    destination_cluster: LocalKafkaCluster, unique_topic: str,
) -> None:
    admin = destination_cluster.admin()
    admin.create_topics([NewTopic(unique_topic, PARTITIONS, 1)])[unique_topic].result(timeout=60)
    group = f"offsets-over-a-batch-{uuid.uuid4().hex[:8]}"
    wanted = {(unique_topic, p): (p * 7, f"{p:04d}" + "m" * (METADATA - 4))
              for p in range(PARTITIONS)}
    assert sum(record_bytes(group, TopicPartition(t, p, o, m))
               for (t, p), (o, m) in wanted.items()) > 1_048_588
    client = ClusterAdmin(ClusterSpec(alias="B", client={
        "bootstrap.servers": destination_cluster.bootstrap}))
    client.wait_ready(30)
    client.commit_group_offsets(group, wanted)
    assert client.committed_offsets(group, wanted) == wanted
