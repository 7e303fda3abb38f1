"""Offsets committed in requests the group coordinator can write
(kafka_mirror.kafka.offset_commits), without Kafka: split by the estimated size of their records,
in order, every partition once; every request is sent and the partitions the broker refused are
returned (a deleted topic's too: librdkafka fails their whole request)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from kafka_mirror.kafka.offset_commits import (
    COMMIT_BYTES,
    commit_offsets,
    commit_requests,
    record_bytes,
)

GROUP = "kafka-mirror.source_to_destination"


def _partitions(topics: int, per_topic: int, metadata: str = "") -> list[TopicPartition]:
    return [TopicPartition(f"bench-scale-{t:04d}", p, 100 + p, metadata)
            for t in range(topics) for p in range(per_topic)]


def test_ten_thousand_partitions_go_in_requests_under_the_limit_in_order() -> None:
    partitions = _partitions(1000, 10)
    # the commit a broker refused as one batch (10,001 records over 1,048,588 bytes)
    assert sum(record_bytes(GROUP, tp) for tp in partitions) > 1_048_588
    requests = commit_requests(GROUP, partitions)
    assert len(requests) == 3
    assert all(sum(record_bytes(GROUP, tp) for tp in r) <= COMMIT_BYTES for r in requests)
    assert [tp for r in requests for tp in r] == partitions


def test_metadata_counts_towards_a_request() -> None:
    partitions = _partitions(1, 300, metadata="m" * 4000)
    requests = commit_requests(GROUP, partitions)
    assert len(requests) == 3  # 300 x ~4.1 KB: about 1.2 MB, 127 per 512 KiB
    assert [len(r) for r in requests] == [127, 127, 46]


def test_a_few_partitions_are_one_request_and_a_record_over_the_limit_goes_alone() -> None:
    few = _partitions(2, 3)
    assert commit_requests(GROUP, few) == [few]
    big = TopicPartition("t", 0, 1, "x" * 2000)
    assert commit_requests(GROUP, [big, *few], limit=1000) == [[big], few]
    assert commit_requests(GROUP, []) == []


@dataclass
class Answer:
    """A partition of the broker's answer (a TopicPartition's error cannot be set here)."""

    error: KafkaError | None = None


class Consumer:
    def __init__(self, refuse: int | None = None) -> None:
        self.requests: list[list[TopicPartition]] = []
        self.refuse = refuse

    def commit(self, offsets: list[TopicPartition], asynchronous: bool) -> list[Answer]:
        assert not asynchronous
        self.requests.append(list(offsets))
        answered = [Answer() for _ in offsets]
        if self.refuse is not None and len(self.requests) == self.refuse:
            answered[-1].error = KafkaError(KafkaError.OFFSET_METADATA_TOO_LARGE)
        return answered


def test_commit_sends_every_request_and_returns_the_refused_partitions() -> None:
    partitions = _partitions(1000, 10)
    consumer = Consumer()
    assert commit_offsets(consumer, GROUP, partitions) == []
    assert [tp for r in consumer.requests for tp in r] == partitions
    assert len(consumer.requests) == 3

    refusing = Consumer(refuse=2)
    refused = commit_offsets(refusing, GROUP, partitions)
    assert [tp.error.code() for tp in refused] == [KafkaError.OFFSET_METADATA_TOO_LARGE]
    assert len(refusing.requests) == 3  # the requests after a refusal are sent too


class DeletedTopicConsumer:
    """librdkafka's commit when a topic of the request was deleted: the whole commit raises."""

    def __init__(self, deleted: str, other_error: int | None = None) -> None:
        self.deleted = deleted
        self.other_error = other_error
        self.committed: list[TopicPartition] = []

    def commit(self, offsets: list[TopicPartition], asynchronous: bool) -> list[Answer]:
        assert not asynchronous
        if self.other_error is not None:
            raise KafkaException(KafkaError(self.other_error))
        if any(tp.topic == self.deleted for tp in offsets):
            raise KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))
        self.committed.extend(offsets)
        return [Answer() for _ in offsets]


def test_a_deleted_topic_refuses_its_partitions_only() -> None:
    partitions = [TopicPartition("a", 0, 1), TopicPartition("gone", 0, 2),
                  TopicPartition("gone", 1, 3), TopicPartition("z", 0, 4)]
    consumer = DeletedTopicConsumer("gone")
    refused = commit_offsets(consumer, GROUP, partitions)
    assert [(tp.topic, tp.partition, tp.offset) for tp in refused] == [("gone", 0, 2),
                                                                       ("gone", 1, 3)]
    assert {tp.error.code() for tp in refused} == {KafkaError.UNKNOWN_TOPIC_OR_PART}
    assert [(tp.topic, tp.partition) for tp in consumer.committed] == [("a", 0), ("z", 0)]


def test_a_commit_failing_otherwise_raises() -> None:
    consumer = DeletedTopicConsumer("gone", other_error=KafkaError.COORDINATOR_NOT_AVAILABLE)
    with pytest.raises(KafkaException):
        commit_offsets(consumer, GROUP, [TopicPartition("a", 0, 1)])
