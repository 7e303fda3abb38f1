"""Topics and partitions are created in requests a KRaft controller accepts (at most 10,000
partitions each): ``partition_batches``."""

from __future__ import annotations

from kafka_mirror.control.topics import PARTITIONS_PER_REQUEST, partition_batches


def test_a_thousand_topics_of_ten_partitions_take_two_requests() -> None:
    topics = [(f"t{i}", 10) for i in range(1001)]
    batches = partition_batches(topics, lambda t: t[1])
    assert [sum(p for _, p in b) for b in batches] == [5000, 5000, 10]
    assert [t for b in batches for t in b] == topics  # all, in order
    assert PARTITIONS_PER_REQUEST * 2 <= 10_000


def test_a_topic_larger_than_the_limit_goes_alone_and_nothing_is_an_empty_request() -> None:
    sizes = [3, 12_000, 4, 4]
    batches = partition_batches(sizes, lambda n: n, limit=10)
    assert batches == [[3], [12_000], [4, 4]]
    assert partition_batches([], lambda n: n) == []
