"""Offsets committed to a consumer group in requests the group coordinator can write.

The group coordinator writes the offsets of one OffsetCommit request to ``__consumer_offsets``
as one record batch, which must fit the topic's ``max.message.bytes`` (1 MiB by default): a
commit of 10,000 partitions' offsets was refused as a whole ("Failed to write a batch of 10001
record(s) to __consumer_offsets-0 because it is larger than the maximum batch size of 1048588
bytes"; the client saw "Unknown broker error"), every time it was tried. So a commit is split
into requests of at most :data:`COMMIT_BYTES` of records, each estimated from the group, topic
and metadata lengths (offset metadata may be up to ``offset.metadata.max.bytes``, 4 KiB by
default, per partition). The requests are not one transaction: offsets committed before a
request that failed stay committed, as a group's consumers' own commits would.

A partition the broker refuses fails its whole request in librdkafka (the commit raises with the
first partition's error). A topic deleted meanwhile is common enough (the mirror commits the
positions of what it mirrored until it notices the deletion) that a request failing for an
unknown topic is sent again topic by topic: the other topics' offsets are committed and the
deleted topic's partitions are returned as refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import groupby
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition

# at most this many bytes of offset records per OffsetCommit request: half the default 1 MiB
# batch limit of __consumer_offsets, for the estimate's slack
COMMIT_BYTES = 512 * 1024
# what an offset record holds besides the group, topic and metadata: key and value versions,
# the partition, offset, leader epoch and commit time, the record's framing within its batch
RECORD_BYTES = 64


def record_bytes(group: str, partition: TopicPartition) -> int:
    """The estimated size of ``partition``'s offset record of ``group`` in the coordinator's
    batch."""
    metadata = partition.metadata or ""
    return (RECORD_BYTES + len(group.encode()) + len(partition.topic.encode())
            + len(metadata.encode()))


def commit_requests(group: str, partitions: Sequence[TopicPartition],
                    limit: int = COMMIT_BYTES) -> list[list[TopicPartition]]:
    """``partitions`` in order, split into requests of at most ``limit`` estimated bytes (one
    partition per request at least)."""
    requests: list[list[TopicPartition]] = []
    current: list[TopicPartition] = []
    size = 0
    for partition in partitions:
        record = record_bytes(group, partition)
        if current and size + record > limit:
            requests.append(current)
            current, size = [], 0
        current.append(partition)
        size += record
    if current:
        requests.append(current)
    return requests


def commit_offsets(consumer: Any, group: str, partitions: Sequence[TopicPartition]
                   ) -> list[Any]:
    """Commit ``partitions`` (offsets, metadata) to ``group`` through ``consumer`` (a
    confluent-kafka ``Consumer`` of that group), synchronously, every request in turn (as one
    request would have tried every partition); the partitions the broker refused, each with its
    error. A request that fails as a whole raises, but for an unknown topic (see above)."""
    refused: list[Any] = []
    for request in commit_requests(group, partitions):
        refused.extend(_commit(consumer, request))
    return refused


@dataclass(frozen=True)
class RefusedPartition:
    """A partition of a topic the cluster does not have, as the broker's answer would name it
    (a TopicPartition's error cannot be set)."""

    topic: str
    partition: int
    offset: int
    error: KafkaError = field(
        default_factory=lambda: KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))


def _commit(consumer: Any, offsets: Sequence[TopicPartition]) -> list[Any]:
    """``offsets`` committed in one request; the partitions refused. Failed for an unknown topic:
    a request of several topics is sent again a topic at a time, one of a single topic is
    refused whole."""
    try:
        result = consumer.commit(offsets=list(offsets), asynchronous=False) or []
    except KafkaException as exc:
        error = exc.args[0] if exc.args else None
        if not (isinstance(error, KafkaError)
                and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
            raise
        topics = [list(members) for _, members in groupby(offsets, key=lambda tp: tp.topic)]
        if len(topics) > 1:
            return [tp for members in topics for tp in _commit(consumer, members)]
        return [RefusedPartition(tp.topic, tp.partition, tp.offset) for tp in offsets]
    return [tp for tp in result if tp.error is not None]
