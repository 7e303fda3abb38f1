"""The Java admin client of the Spark driver (kafka_mirror.engine.jvm_admin) against a real
cluster: the topic IDs it reads are those librdkafka's client reads (the state holds IDs as
librdkafka writes them: Kafka's own Java text differs in two base64 letters), and a topic
deleted meanwhile is left out."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka.admin import NewTopic

from kafka_mirror.config.model import ClusterSpec
from kafka_mirror.engine.jvm_admin import JvmAdmin
from kafka_mirror.kafka.admin import ClusterAdmin
from kafka_mirror_testing.localcluster import LocalKafkaCluster
from kafka_mirror_testing.waiting import wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def test_topic_ids_are_read_as_librdkafka_reads_them(
    spark: Any, source_cluster: LocalKafkaCluster, unique_topic: str
) -> None:
    # 24 topics: the chance that no ID holds '+' or '/' (where the two texts differ) is 1e-7
    topics = [f"{unique_topic}-{i}" for i in range(24)]
    admin = source_cluster.admin()
    for future in admin.create_topics([NewTopic(t, 2, 1) for t in topics]).values():
        future.result(30)
    client = {"bootstrap.servers": source_cluster.bootstrap}
    python = ClusterAdmin(ClusterSpec(alias="A", client=client))
    java = JvmAdmin(spark, client)
    try:
        wait_for(lambda: len(python.topic_ids(topics) or {}) == 24, 30, "the topics' IDs")
        expected = python.topic_ids(topics)
        assert expected is not None
        assert any("+" in i or "/" in i for i in expected.values())
        assert java.topic_ids(topics) == expected
        for future in admin.delete_topics(topics[:2]).values():
            future.result(30)
        wait_for(lambda: topics[0] not in (python.topic_ids(topics) or {}), 30, "deleted")
        assert java.topic_ids([*topics, "never-created"]) == {
            t: expected[t] for t in topics[2:]}
        assert java.topic_ids([]) == {}
    finally:
        java.close()
