"""The pure parts of the internal-topic reader and writer (``kafka_mirror.kafka.internal_topics``):
when a read has reached the end, how delivery outcomes become one error naming the topic and the
cluster, and the writer's send/flush logic over a producer that stands in for librdkafka's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from kafka_mirror.config.model import ClusterSpec
from kafka_mirror.errors import MirrorError
from kafka_mirror.kafka.internal_topics import (
    CONSUME_SECONDS,
    STOP_CHECK_SECONDS,
    STOP_WAIT_SECONDS,
    DeliveryReport,
    EndTracker,
    InternalTopicError,
    InternalTopicReader,
    InternalTopicWriter,
    on_delivery,
)

CLUSTER = ClusterSpec(alias="B", client={"bootstrap.servers": "127.0.0.1:1"})


class FakeProducer:
    """Queues records; ``flush`` reports each as ``outcomes`` says (None: delivered) and leaves
    ``stuck`` records unacknowledged. ``full`` makes the first produce calls raise BufferError."""

    def __init__(self, conf: dict[str, Any], outcomes: list[KafkaError | None] | None = None,
                 stuck: int = 0, full: int = 0) -> None:
        self.conf = conf
        self.now = 0.0  # the writer's clock: a flush that leaves records waits its whole timeout
        self.during_flush: Callable[[], None] | None = None
        self.outcomes = outcomes or []
        self.stuck = stuck
        self.full = full
        self.queued: list[tuple[str, dict[str, Any]]] = []
        self.polls = 0
        self.flushes: list[float] = []
        self.metadata: list[str] = []
        self.unreachable = False

    def list_topics(self, topic: str, timeout: float) -> None:
        if self.unreachable:
            raise KafkaException(KafkaError(KafkaError._TRANSPORT))
        self.metadata.append(topic)

    def produce(self, topic: str, **kwargs: Any) -> None:
        if self.full:
            self.full -= 1
            raise BufferError("queue full")
        self.queued.append((topic, kwargs))

    def poll(self, _timeout: float) -> int:
        self.polls += 1
        return 0

    def flush(self, timeout: float) -> int:
        self.flushes.append(timeout)
        if self.stuck:
            self.now += timeout
            if self.during_flush is not None:
                self.during_flush()
        for index, (_topic, kwargs) in enumerate(self.queued):
            outcome = self.outcomes[index] if index < len(self.outcomes) else None
            callback: Callable[[Any, Any], None] | None = kwargs.get("on_delivery")
            if callback is not None:
                callback(outcome, None)
        self.queued = []
        return self.stuck


def _writer(**fake: Any) -> tuple[InternalTopicWriter, list[FakeProducer]]:
    made: list[FakeProducer] = []

    def factory(conf: dict[str, Any]) -> FakeProducer:
        made.append(FakeProducer(conf, **fake))
        return made[-1]

    writer = InternalTopicWriter(CLUSTER, "mm2-offset-syncs.B.internal",
                                 label="flow f: offset syncs not written to",
                                 producer_factory=factory, clock=lambda: made[0].now)
    return writer, made


def test_end_tracker_waits_for_nonempty_partitions_only() -> None:
    tracker = EndTracker({0: (0, 3), 1: (5, 5), 2: (2, 4)})
    assert tracker.pending == {0, 2}
    tracker.seen(0, 1)
    assert not tracker.done
    tracker.seen(0, 2)  # end 3: the record at 2 is the last
    tracker.seen(1, 9)  # nothing was awaited there
    assert tracker.pending == {2}
    tracker.at_end(2)  # e.g. a transaction marker is the last offset
    assert tracker.done


def test_end_tracker_empty_topic_is_done_at_once() -> None:
    assert EndTracker({0: (7, 7)}).done
    assert EndTracker({}).done


def test_error_names_topic_and_cluster() -> None:
    error = InternalTopicError("reading MM2's offsets topic", "mm2-offsets.A.internal", "B",
                               "failed: broker down")
    assert isinstance(error, MirrorError)
    assert str(error) == ("reading MM2's offsets topic mm2-offsets.A.internal on cluster 'B': "
                          "failed: broker down")
    assert (error.topic, error.cluster) == ("mm2-offsets.A.internal", "B")


def test_delivery_report_reason() -> None:
    report = DeliveryReport()
    assert report.reason(0, 30) is None
    report.callback(None, None)
    assert report.reason(0, 30) is None
    timed_out = KafkaError(KafkaError._MSG_TIMED_OUT)
    report.callback(timed_out, None)
    assert report.reason(2, 30) == (
        f"{timed_out}; 2 record(s) not acknowledged within 30s"
    )


def test_on_delivery_tells_outcome() -> None:
    told: list[str | None] = []
    callback = on_delivery(told.append)
    callback(None, None)
    refused = KafkaError(KafkaError.NOT_ENOUGH_REPLICAS)
    callback(refused, None)
    assert told == [None, str(refused)]


def test_writer_producer_settings() -> None:
    writer, made = _writer()
    conf = made[0].conf
    assert (conf["acks"], conf["enable.idempotence"]) == ("all", "true")
    assert conf["allow.auto.create.topics"] is False
    assert "partitioner" not in conf
    keyed = InternalTopicWriter(CLUSTER, "t", partition_by_key=True,
                                producer_factory=lambda c: FakeProducer(c))
    assert keyed.producer.conf["partitioner"] == "murmur2_random"
    assert writer.topic == "mm2-offset-syncs.B.internal"


def test_write_sends_every_record_and_flushes_with_the_timeout() -> None:
    writer, made = _writer(full=2)
    assert writer.write([(b"k1", b"v1"), (b"k2", None)], partition=0) == 2
    producer = made[0]
    assert producer.polls == 2  # waited twice for room in the queue
    assert producer.flushes == [STOP_CHECK_SECONDS]  # acknowledged within the first slice
    assert writer.write([]) == 0
    assert producer.flushes == [STOP_CHECK_SECONDS]  # nothing to wait for


def test_write_passes_partition_and_tombstones() -> None:
    writer, made = _writer(stuck=0)
    sent: list[dict[str, Any]] = []
    original = made[0].produce

    def spy(topic: str, **kwargs: Any) -> None:
        sent.append({"topic": topic, **kwargs})
        original(topic, **kwargs)

    made[0].produce = spy  # type: ignore[method-assign]
    writer.write([(b"k", None)], partition=0)
    writer.send(b"h", b"v", timestamp=12)
    assert [(s["topic"], s["key"], s["value"], s.get("partition")) for s in sent] == [
        ("mm2-offset-syncs.B.internal", b"k", None, 0),
        ("mm2-offset-syncs.B.internal", b"h", b"v", None),
    ]
    assert sent[1]["timestamp"] == 12


def test_write_failure_is_one_error_naming_topic_and_cluster() -> None:
    denied = KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)
    writer, _ = _writer(outcomes=[None, denied])
    with pytest.raises(InternalTopicError) as caught:
        writer.write([(b"a", b"1"), (b"b", b"2")])
    assert str(caught.value) == (
        "flow f: offset syncs not written to mm2-offset-syncs.B.internal on cluster 'B': "
        f"{denied}"
    )


def test_write_timeout_is_an_error() -> None:
    writer, made = _writer(stuck=1)
    with pytest.raises(InternalTopicError, match=r"1 record\(s\) not acknowledged within 30s"):
        writer.write([(b"a", b"1")])
    assert sum(made[0].flushes) == pytest.approx(30.0)  # the whole timeout, in slices
    assert max(made[0].flushes) == STOP_CHECK_SECONDS


def test_a_stop_cuts_a_waiting_write_short_and_every_later_one() -> None:
    # a stop with the cluster gone: the flow's upkeep, waiting 30 s on its offset syncs, held
    # the whole stop's budget (the records stay queued: the writer's close flushes them)
    writer, made = _writer(stuck=1)
    producer = made[0]
    producer.during_flush = lambda: writer.cut_short() if producer.now >= 3.0 else None
    with pytest.raises(InternalTopicError, match=r"^flow f: offset syncs not written to "
                                                 r"mm2-offset-syncs.B.internal on cluster 'B': "
                                                 r"1 record\(s\) not acknowledged within 2s of "
                                                 r"the stop \(left queued for the writer's "
                                                 r"close\)"):
        writer.write([(b"a", b"1")])
    assert producer.now == pytest.approx(3.0 + STOP_WAIT_SECONDS)
    producer.flushes.clear()
    with pytest.raises(InternalTopicError, match="of the stop"):
        writer.write([(b"b", b"2")])  # a later one: the same bound from its own start
    assert sum(producer.flushes) == pytest.approx(STOP_WAIT_SECONDS)
    producer.flushes.clear()
    with pytest.raises(InternalTopicError, match=r"not acknowledged within 4s"):
        writer.write([(b"c", b"3")], timeout=4.0)  # a closer's, with what is left of the budget
    assert sum(producer.flushes) == pytest.approx(4.0)
    producer.stuck = 0
    assert writer.write([(b"d", b"4")]) == 1  # a cluster that answers still takes records


class TopicsAdmin:
    def __init__(self, topics: dict[str, int]) -> None:
        self.topics = topics

    def topic_partitions(self, timeout: float) -> dict[str, int]:
        return dict(self.topics)


def test_ensure_topic_leaves_the_producer_connected() -> None:
    # librdkafka's idempotent producer, written to at once after it was made, waited 0.5-1.0 s
    # for its producer ID: the writer's producer asks for the topic's metadata first
    writer, made = _writer()
    assert writer.ensure_topic(TopicsAdmin({"mm2-offset-syncs.B.internal": 1})) == 1  # type: ignore[arg-type]
    assert made[0].metadata == ["mm2-offset-syncs.B.internal"]
    made[0].unreachable = True
    with pytest.raises(InternalTopicError, match=r"^flow f: offset syncs not written to "
                                                 r"mm2-offset-syncs.B.internal on cluster 'B': "
                                                 r"failed: "):
        writer.ensure_topic(TopicsAdmin({"mm2-offset-syncs.B.internal": 1}))  # type: ignore[arg-type]


def test_close_flushes_briefly() -> None:
    writer, made = _writer()
    writer.close()
    assert made[0].flushes == [10.0]


class FakeMessage:
    """A consumed record, or an event (``error``) such as the end of a partition."""

    def __init__(self, partition: int, offset: int, key: bytes | None = None,
                 value: bytes | None = None, error: KafkaError | None = None) -> None:
        self._partition, self._offset, self._key, self._value = partition, offset, key, value
        self._error = error

    def error(self) -> KafkaError | None:
        return self._error

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value


class FakeTopic:
    def __init__(self, partitions: int) -> None:
        self.partitions = {p: object() for p in range(partitions)}
        self.error = None


class FakeConsumer:
    """Topic ``t`` with ``watermarks`` per partition; ``consume`` hands out ``batches`` in turn
    (then nothing)."""

    def __init__(self, watermarks: dict[int, tuple[int, int]] | None,
                 batches: list[list[FakeMessage]],
                 skipped: dict[int, int] | None = None) -> None:
        """``skipped``: per partition, offsets past the last record the position moves over
        (a transaction's marker)."""
        self.watermarks = watermarks
        self.batches = batches
        self.skipped = skipped or {}
        self.next: dict[int, int] = {}
        self.offset_lookups = 0
        self.assigned: list[tuple[int, int]] = []
        self.consumed = 0
        self.timeouts: list[float] = []
        self.closed = False

    def list_topics(self, timeout: float) -> Any:
        topics = {} if self.watermarks is None else {"t": FakeTopic(len(self.watermarks))}
        return type("Metadata", (), {"topics": topics})()

    def offsets_for_times(self, partitions: list[Any], timeout: float) -> list[Any]:
        # ListOffsets' timestamps -2 and -1: a partition's first offset and its end, all
        # partitions in one call
        assert self.watermarks is not None
        self.offset_lookups += 1
        return [TopicPartition(tp.topic, tp.partition,
                               self.watermarks[tp.partition][0 if tp.offset == -2 else 1])
                for tp in partitions]

    def assign(self, partitions: list[Any]) -> None:
        self.assigned = [(tp.partition, tp.offset) for tp in partitions]
        self.next = dict(self.assigned)

    def consume(self, num_messages: int, timeout: float) -> list[FakeMessage]:
        self.consumed += 1
        self.timeouts.append(timeout)
        batch = self.batches.pop(0) if self.batches else []
        for message in batch:
            if message.error() is None:
                self.next[message.partition()] = message.offset() + 1
        if not self.batches:
            for partition, more in self.skipped.items():
                self.next[partition] = self.next.get(partition, 0) + more
        return batch

    def position(self, partitions: list[Any]) -> list[Any]:
        return [TopicPartition(tp.topic, tp.partition, self.next.get(tp.partition, -1001))
                for tp in partitions]

    def close(self) -> None:
        self.closed = True


def _reader(consumer: FakeConsumer, **kwargs: Any) -> InternalTopicReader:
    return InternalTopicReader(CLUSTER, "t", label="reading checkpoints",
                               consumer_factory=lambda _conf: consumer, **kwargs)


def test_reader_reads_from_the_start_to_the_ends_taken_first() -> None:
    consumer = FakeConsumer(
        {0: (0, 2), 1: (4, 4), 2: (1, 3)},
        [[FakeMessage(0, 0, b"a", b"1"), FakeMessage(2, 1, b"b", None)],
         [FakeMessage(0, 1, b"a", b"2"), FakeMessage(2, 2, b"c", b"3")],
         [FakeMessage(0, 2, b"late", b"x")]],  # written after the read began
    )
    records = _reader(consumer).read()
    # from each start as a number (librdkafka's logical beginning first waits half a
    # second); empty partition 1 not read
    assert consumer.assigned == [(0, 0), (2, 1)]
    assert [(r.partition, r.offset, r.key, r.value) for r in records] == [
        (0, 0, b"a", b"1"), (2, 1, b"b", None), (0, 1, b"a", b"2"), (2, 2, b"c", b"3"),
    ]
    assert consumer.consumed == 2 and consumer.closed
    assert consumer.offset_lookups == 2  # the first offsets, then the ends, each in one call
    # librdkafka's consume waits for num_messages or the whole timeout: each call short, so a
    # read of a few records (a takeover's kept positions) does not wait a second per call
    assert consumer.timeouts and max(consumer.timeouts) <= CONSUME_SECONDS == 0.02


def test_reader_end_of_partition_event_ends_it() -> None:
    eof = KafkaError(KafkaError._PARTITION_EOF)
    consumer = FakeConsumer({0: (0, 5)}, [[FakeMessage(0, 3, b"k", b"v"),
                                           FakeMessage(0, 4, error=eof)]])
    assert [r.offset for r in _reader(consumer, partitions=[0]).read()] == [3]


def test_reader_position_past_a_transaction_marker_ends_it() -> None:
    # the last offset of a transactionally written partition is a marker, never handed out:
    # the consumer's position moves past it, and the read ends without waiting for a fetch to
    # report the end of the partition
    consumer = FakeConsumer({0: (0, 3), 1: (5, 8)},
                            [[FakeMessage(0, 0, b"a", b"1"), FakeMessage(0, 1, b"b", b"2"),
                              FakeMessage(1, 5, b"c", b"3"), FakeMessage(1, 6, b"d", b"4")]],
                            skipped={0: 1, 1: 1})
    assert [r.offset for r in _reader(consumer).read()] == [0, 1, 5, 6]
    assert consumer.consumed == 1


def test_reader_offset_lookup_errors_name_topic_and_cluster() -> None:
    class Refused(FakeConsumer):
        def offsets_for_times(self, partitions: list[Any], timeout: float) -> list[Any]:
            error = KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION)
            return [type("Found", (), {"partition": tp.partition, "offset": -1,
                                       "error": error if tp.partition == 1 else None})()
                    for tp in partitions]

    consumer = Refused({0: (0, 1), 1: (0, 1)}, [])
    with pytest.raises(InternalTopicError, match=r"^reading checkpoints t on cluster 'B': "
                                                 r"failed: .*[Ll]eader"):
        _reader(consumer).read()
    assert consumer.assigned == [] and consumer.closed


def test_reader_missing_topic_has_no_records() -> None:
    consumer = FakeConsumer(None, [])
    assert _reader(consumer).read() == []
    assert consumer.assigned == [] and consumer.closed


def test_reader_errors_name_topic_and_cluster() -> None:
    failed = KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)
    consumer = FakeConsumer({0: (0, 1)}, [[FakeMessage(0, 0, error=failed)]])
    with pytest.raises(InternalTopicError) as caught:
        _reader(consumer).read()
    assert str(caught.value) == f"reading checkpoints t on cluster 'B': failed: {failed.str()}"
    assert consumer.closed
    stalled = FakeConsumer({0: (0, 1), 1: (0, 1)}, [])
    with pytest.raises(InternalTopicError,
                       match=r"^reading checkpoints t on cluster 'B': did not reach the end of "
                             r"partitions \[0, 1\] within 0s$"):
        _reader(stalled, timeout=0.05).read()


def test_reader_reads_a_tail_of_each_partition() -> None:
    consumer = FakeConsumer({0: (0, 100), 1: (95, 100), 2: (3, 3)},
                            [[FakeMessage(0, 99, b"a", b"1"), FakeMessage(1, 99, b"b", b"2")]])
    records = _reader(consumer, tail=10).read()
    assert consumer.assigned == [(0, 90), (1, 95)]  # the last 10 offsets (or fewer), empty not
    assert [r.offset for r in records] == [99, 99]
