"""Writing test records to a local cluster: one helper, every delivery checked.

A test describes its records as :class:`Message` values (key, value or a tombstone, headers,
partition, timestamp) and :func:`produce` writes them all, failing the test when any record is
not acknowledged, so a later "not mirrored" can never be a record that was never written.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from confluent_kafka import KafkaError, Producer
from confluent_kafka import Message as DeliveredMessage

from kafka_mirror_testing.localcluster import LocalKafkaCluster

Header = tuple[str, bytes | None]
# librdkafka's "not given" values: RD_KAFKA_PARTITION_UA (the partitioner picks) and a zero
# timestamp (the producer stamps the current time)
PARTITIONER = -1
PRODUCER_CLOCK = 0


@dataclass(frozen=True)
class Message:
    """One record to write; ``value=None`` is a tombstone, ``partition=None`` leaves the choice
    to the producer's partitioner, ``timestamp=None`` to the producer's clock."""

    value: bytes | None
    key: bytes | None = None
    partition: int | None = None
    headers: Sequence[Header] | None = None
    timestamp: int | None = None


def produce(cluster: LocalKafkaCluster, topic: str, messages: Iterable[Message], *,
            timeout: float = 60.0, **config: str) -> int:
    """Write ``messages`` to ``topic`` in order with a producer of ``config`` (librdkafka keys
    over the cluster's client config) and wait until the cluster has acknowledged each one;
    returns how many were written. Fails with an ``AssertionError`` naming the delivery errors
    or the records still unacknowledged after ``timeout`` seconds."""
    producer = Producer(cluster.client_config(**config))
    errors: list[KafkaError] = []

    def delivered(err: KafkaError | None, _msg: DeliveredMessage) -> None:
        if err is not None:
            errors.append(err)

    count = 0
    for message in messages:
        headers: list[tuple[str, str | bytes | None]] | None = (
            None if message.headers is None else list(message.headers))
        while True:
            try:
                producer.produce(
                    topic, key=message.key, value=message.value, headers=headers,
                    partition=PARTITIONER if message.partition is None else message.partition,
                    timestamp=PRODUCER_CLOCK if message.timestamp is None else message.timestamp,
                    on_delivery=delivered,
                )
                break
            except BufferError:  # the local queue is full: let deliveries make room
                producer.poll(0.1)
        producer.poll(0)
        count += 1
    unsent = producer.flush(timeout)
    assert unsent == 0, f"{unsent} of {count} records to {topic} not acknowledged in {timeout}s"
    assert not errors, f"records to {topic} not delivered: {errors[:5]}"
    return count
