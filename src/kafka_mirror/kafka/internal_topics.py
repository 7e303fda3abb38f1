"""Reading and writing MirrorMaker 2's internal topics, modelled on Kafka Connect's KafkaBasedLog.

The internal topics (``mm2-offset-syncs.<cluster>.internal``, ``<source>.checkpoints.internal``,
``heartbeats``, the Connect offsets topic ``mm2-offsets.<source>.internal``) are compacted logs
that a reader replays from the beginning and a writer appends to:

- :class:`InternalTopicReader` reads a topic's partitions from the start up to the end offsets
  taken when the read begins (``KafkaBasedLog.readToEnd``), committed records only, handing each
  record to a callback or returning them all.
- :class:`InternalTopicWriter` creates the topic when it is missing (compacted, through
  :class:`~kafka_mirror.kafka.admin.ClusterAdmin`), produces with delivery confirmation, flushes
  with a timeout and closes (``KafkaBasedLog.send``/``flush``/``stop``).

One timeout policy: every step that waits (metadata, end offsets, reading to the end, a flush)
waits at most ``timeout`` seconds (30 unless given). Every failure is an
:class:`InternalTopicError` naming the topic and the cluster.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from kafka_mirror.config.model import ClusterSpec
from kafka_mirror.errors import MirrorError
from kafka_mirror.kafka.admin import ClusterAdmin
from kafka_mirror.kafka.clients import control_consumer_config, control_producer_config

__all__ = [
    "CLOSE_TIMEOUT",
    "CONSUME_SECONDS",
    "DEFAULT_TIMEOUT",
    "DeliveryReport",
    "EndTracker",
    "InternalRecord",
    "InternalTopicError",
    "InternalTopicReader",
    "InternalTopicWriter",
    "on_delivery",
]

DEFAULT_TIMEOUT = 30.0
# how long close() lets records still queued reach the cluster
CLOSE_TIMEOUT = 10.0
# a write waits for its records in slices this long, so that a stop can end the wait
STOP_CHECK_SECONDS = 0.5
# once a stop began, a write of the writer's own timeout waits at most this long from the stop
# (or from its own start, if later): a cluster that answers acknowledges in milliseconds
STOP_WAIT_SECONDS = 2.0
_CREATED_POLL = 0.2  # seconds between metadata checks after creating a topic
# ListOffsets' timestamps for a partition's first offset and its end
_EARLIEST, _LATEST = -2, -1


class InternalTopicError(MirrorError):
    """Reading or writing an internal topic failed; names the topic and the cluster."""

    def __init__(self, label: str, topic: str, cluster: str, reason: str) -> None:
        self.label = label
        self.topic = topic
        self.cluster = cluster
        self.reason = reason
        super().__init__(f"{label} {topic} on cluster '{cluster}': {reason}")


@dataclass(frozen=True)
class InternalRecord:
    """One record of an internal topic; ``value`` None is a tombstone."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


# how long one consume call waits for more records (the read loops until the end is reached;
# librdkafka's consume returns early only with num_messages in hand, so a read of a few records
# ends this long after its last fetch arrived, when the position check sees the end)
CONSUME_SECONDS = 0.02


class EndTracker:
    """Which partitions a read-to-end still waits for: those whose end offset (taken when the
    read began) is above their start, until a record at end - 1 or the end itself is seen."""

    def __init__(self, watermarks: dict[int, tuple[int, int]]) -> None:
        self.ends = {p: high for p, (low, high) in watermarks.items() if high > low}
        self.pending = set(self.ends)

    def seen(self, partition: int, offset: int) -> None:
        """A record at ``offset`` was read from ``partition``."""
        if partition in self.ends and offset >= self.ends[partition] - 1:
            self.pending.discard(partition)

    def reached(self, partition: int, position: int) -> None:
        """The consumer's position in ``partition`` is ``position`` (the next offset it reads;
        librdkafka moves it past transaction markers and aborted records)."""
        if partition in self.ends and position >= self.ends[partition]:
            self.pending.discard(partition)

    def at_end(self, partition: int) -> None:
        """The consumer reported the end of ``partition`` (all committed records read)."""
        self.pending.discard(partition)

    @property
    def done(self) -> bool:
        return not self.pending


class InternalTopicReader:
    """Reads an internal topic from its start to the end offsets taken when the read begins."""

    def __init__(
        self,
        cluster: ClusterSpec,
        topic: str,
        *,
        label: str = "reading",
        timeout: float = DEFAULT_TIMEOUT,
        partitions: Sequence[int] | None = None,
        tail: int | None = None,
        consumer_factory: Callable[[dict[str, Any]], Any] = Consumer,
    ) -> None:
        """``label`` starts error messages (e.g. ``reading MM2's offsets topic``);
        ``partitions`` limits the read to these (default: every partition); ``tail``, to the
        last so many offsets of each (default: from its start)."""
        self.cluster = cluster
        self.topic = topic
        self.label = label
        self.timeout = timeout
        self.partitions = partitions
        self.tail = tail
        self._consumer_factory = consumer_factory

    def _error(self, reason: str) -> InternalTopicError:
        return InternalTopicError(self.label, self.topic, self.cluster.alias, reason)

    def read(self) -> list[InternalRecord]:
        """Every record up to the end, in the order read (log order within a partition)."""
        out: list[InternalRecord] = []
        self.read_to_end(out.append)
        return out

    def read_latest(self) -> dict[bytes | None, InternalRecord]:
        """The last record per key up to the end (a compacted topic's content: a tombstone
        removes its key)."""
        latest: dict[bytes | None, InternalRecord] = {}

        def keep(record: InternalRecord) -> None:
            if record.value is None:
                latest.pop(record.key, None)
            else:
                latest[record.key] = record

        self.read_to_end(keep)
        return latest

    def read_to_end(self, on_record: Callable[[InternalRecord], None]) -> None:
        """Hand every record up to the end to ``on_record``; a missing topic has none."""
        consumer = self._consumer_factory(control_consumer_config(self.cluster))
        try:
            tracker = self._start(consumer)
            if tracker is not None:
                self._consume(consumer, tracker, on_record)
        except KafkaException as exc:
            raise self._error(f"failed: {_reason(exc)}") from exc
        finally:
            consumer.close()

    def _start(self, consumer: Any) -> EndTracker | None:
        # a full listing: a metadata request naming the topic could auto-create it
        described = consumer.list_topics(timeout=self.timeout).topics.get(self.topic)
        if described is None or described.error is not None:
            return None
        wanted = sorted(described.partitions) if self.partitions is None else self.partitions
        marks = self._watermarks(consumer, wanted)
        if self.tail is not None:
            marks = {p: (max(low, high - self.tail), high) for p, (low, high) in marks.items()}
        tracker = EndTracker(marks)
        # the first offsets as numbers: a logical ``beginning`` costs librdkafka half a second
        # before its first fetch (an offset gone by then is read from the new start:
        # auto.offset.reset=earliest)
        consumer.assign([TopicPartition(self.topic, p, marks[p][0])
                         for p in sorted(tracker.pending)])
        return tracker

    def _watermarks(self, consumer: Any, partitions: Sequence[int]) -> dict[int, tuple[int, int]]:
        """Per partition its first offset and its end: one ListOffsets request per broker for
        each (librdkafka's ``get_watermark_offsets`` asks for one partition at a time, two
        requests each: 0.09 s for the 25 partitions of MM2's offsets topic, 0.004 s so)."""
        offsets: list[dict[int, int]] = []
        for when in (_EARLIEST, _LATEST):
            found = consumer.offsets_for_times(
                [TopicPartition(self.topic, p, when) for p in partitions], timeout=self.timeout)
            for tp in found:
                if tp.error is not None:
                    raise KafkaException(tp.error)
            offsets.append({tp.partition: tp.offset for tp in found})
        first, end = offsets
        return {p: (first[p], end[p]) for p in partitions}

    def _consume(
        self, consumer: Any, tracker: EndTracker, on_record: Callable[[InternalRecord], None]
    ) -> None:
        deadline = time.monotonic() + self.timeout
        while not tracker.done:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._error(
                    f"did not reach the end of partitions {sorted(tracker.pending)} "
                    f"within {self.timeout:.0f}s"
                )
            # librdkafka's consume returns once it has num_messages or the timeout passed: a
            # short timeout, or a read of a few records waits the whole of it (a takeover reads
            # the kept positions and the offset syncs this way)
            for msg in consumer.consume(num_messages=10_000,
                                        timeout=min(CONSUME_SECONDS, remaining)):
                error = msg.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        tracker.at_end(msg.partition())
                        continue
                    raise self._error(f"failed: {error.str()}")
                partition, offset = msg.partition(), msg.offset()
                if partition is None or offset is None:
                    continue
                on_record(InternalRecord(partition, offset, msg.key(), msg.value()))
                tracker.seen(partition, offset)
            if not tracker.done:
                # past a partition's last transaction marker (or aborted records) the position
                # is at the end before any fetch reports it
                waiting = [TopicPartition(self.topic, p) for p in sorted(tracker.pending)]
                for position in consumer.position(waiting):
                    tracker.reached(position.partition, position.offset)


def on_delivery(then: Callable[[str | None], None]) -> Callable[[KafkaError | None, Any], None]:
    """A librdkafka delivery callback that tells ``then`` None when the record was delivered,
    else the reason it was not."""

    def delivered(error: KafkaError | None, _msg: Any) -> None:
        then(None if error is None else str(error))

    return delivered


class DeliveryReport:
    """Delivery outcomes of a batch of produced records: the reasons of those not delivered."""

    def __init__(self) -> None:
        self.failures: list[str] = []
        self.callback = on_delivery(self._record)

    def _record(self, reason: str | None) -> None:
        if reason is not None:
            self.failures.append(reason)

    def reason(self, undelivered: int, timeout: float) -> str | None:
        """Why a flush that left ``undelivered`` records failed; None when it did not."""
        reasons = list(self.failures[:5])
        if undelivered:
            reasons.append(f"{undelivered} record(s) not acknowledged within {timeout:.0f}s")
        return "; ".join(reasons) if reasons else None


class InternalTopicWriter:
    """A producer for one internal topic: create-if-missing, send, flush with a timeout, close."""

    def __init__(
        self,
        cluster: ClusterSpec,
        topic: str,
        *,
        label: str = "records not written to",
        timeout: float = DEFAULT_TIMEOUT,
        partition_by_key: bool = False,
        producer_factory: Callable[[dict[str, Any]], Any] = Producer,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``label`` starts error messages (e.g. ``flow f: offset syncs not written to``).
        ``partition_by_key``: records sent without a partition go where Kafka's Java default
        partitioner puts their key (what Connect's own producer does)."""
        self.cluster = cluster
        self.topic = topic
        self.label = label
        self.timeout = timeout
        conf: dict[str, Any] = dict(control_producer_config(cluster))
        # internal topics are created compacted by ensure_topic, never auto-created
        conf["allow.auto.create.topics"] = False
        if partition_by_key:
            conf["partitioner"] = "murmur2_random"  # Java's default partitioner for keys
        self.producer = producer_factory(conf)
        self._clock = clock
        self._cut_at: float | None = None  # when a stop began (:meth:`cut_short`)

    def _error(self, reason: str) -> InternalTopicError:
        return InternalTopicError(self.label, self.topic, self.cluster.alias, reason)

    def ensure_topic(
        self, admin: ClusterAdmin, replication_factor: int = -1, partitions: int = 1
    ) -> int:
        """The topic's partition count; created first (compacted) when it is missing. The
        writer's producer has then asked for the topic's metadata: its first write does not
        wait for librdkafka's idempotent producer to get its producer ID (a write right after
        the producer was made waited 0.5-1.0 s for it)."""
        count = admin.topic_partitions(self.timeout).get(self.topic)
        if count is None:
            count = self._created(admin, replication_factor, partitions)
        try:
            self.producer.list_topics(self.topic, timeout=self.timeout)
        except KafkaException as exc:
            raise self._error(f"failed: {_reason(exc)}") from exc
        return count

    def _created(self, admin: ClusterAdmin, replication_factor: int, partitions: int) -> int:
        if partitions == 1:
            admin.ensure_compacted_topic(self.topic, replication_factor)
        else:
            self._create(admin, partitions, replication_factor)
        deadline = time.monotonic() + self.timeout
        while True:
            count = admin.topic_partitions(self.timeout).get(self.topic)
            if count is not None:
                return count
            if time.monotonic() >= deadline:
                raise self._error("created but not in the metadata")
            time.sleep(_CREATED_POLL)

    def _create(self, admin: ClusterAdmin, partitions: int, replication_factor: int) -> None:
        new = NewTopic(self.topic, num_partitions=partitions,
                       replication_factor=replication_factor,
                       config={"cleanup.policy": "compact"})
        future = admin.client.create_topics([new], operation_timeout=self.timeout)[self.topic]
        try:
            future.result()
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            if isinstance(error, KafkaError) and error.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                return
            raise self._error(f"cannot be created: {_reason(exc)}") from exc

    def send(
        self,
        key: bytes | None,
        value: bytes | None,
        *,
        partition: int | None = None,
        timestamp: int | None = None,
        delivered: Callable[[KafkaError | None, Any], None] | None = None,
    ) -> None:
        """Queue one record (waiting for room when the queue is full); ``delivered`` is a
        librdkafka delivery callback (see :func:`on_delivery`)."""
        extra: dict[str, Any] = {}
        if partition is not None:
            extra["partition"] = partition
        if timestamp is not None:
            extra["timestamp"] = timestamp
        if delivered is not None:
            extra["on_delivery"] = delivered
        while True:
            try:
                self.producer.produce(self.topic, value=value, key=key, **extra)
                return
            except BufferError:
                self.producer.poll(0.1)

    def poll(self) -> None:
        """Serve delivery callbacks of records already acknowledged, without waiting."""
        self.producer.poll(0)

    def write(
        self, records: Iterable[tuple[bytes | None, bytes | None]], partition: int | None = None,
        timeout: float | None = None,
    ) -> int:
        """Send ``(key, value)`` records and wait until the cluster has every one (at most
        ``timeout`` seconds, the writer's own by default); returns how many were written.
        Raises :class:`InternalTopicError` when any is not delivered or the flush times out."""
        report = DeliveryReport()
        count = 0
        for key, value in records:
            self.send(key, value, partition=partition, delivered=report.callback)
            count += 1
        if not count:
            return 0
        wait = self.timeout if timeout is None else timeout
        undelivered, cut = self._flush(wait, stoppable=timeout is None)
        if undelivered and cut:
            raise self._error(f"{undelivered} record(s) not acknowledged within "
                              f"{STOP_WAIT_SECONDS:.0f}s of the stop (left queued for the "
                              "writer's close)")
        reason = report.reason(undelivered, wait)
        if reason is not None:
            raise self._error(reason)
        return count

    def _flush(self, wait: float, stoppable: bool) -> tuple[int, bool]:
        """Waits up to ``wait`` seconds for every queued record, in slices of
        :data:`STOP_CHECK_SECONDS`, a ``stoppable`` wait at most :data:`STOP_WAIT_SECONDS`
        past a stop (:meth:`cut_short`); the records not acknowledged by then, and whether the
        stop ended the wait."""
        started = self._clock()
        deadline = started + wait
        undelivered = int(self.producer.flush(min(wait, STOP_CHECK_SECONDS)))
        while undelivered:
            end, cut = deadline, False
            if stoppable and self._cut_at is not None:
                stop_end = max(self._cut_at, started) + STOP_WAIT_SECONDS
                end, cut = min(deadline, stop_end), stop_end < deadline
            left = end - self._clock()
            if left <= 0:
                return undelivered, cut
            undelivered = int(self.producer.flush(min(left, STOP_CHECK_SECONDS)))
        return 0, False

    def cut_short(self) -> None:
        """A stop began: a write waiting for the cluster for the writer's own timeout waits at
        most :data:`STOP_WAIT_SECONDS` more (then an error; its records stay queued), and so
        does every later one; a write given its timeout by the caller (a closer, with what is
        left of the stop's budget) and :meth:`close` wait as long as they are given."""
        if self._cut_at is None:
            self._cut_at = self._clock()

    def close(self, timeout: float = CLOSE_TIMEOUT) -> None:
        """Let queued records reach the cluster (at most ``timeout`` seconds)."""
        self.producer.flush(min(timeout, CLOSE_TIMEOUT))


def _reason(exc: KafkaException) -> str:
    error = exc.args[0] if exc.args else None
    return error.str() if isinstance(error, KafkaError) else str(exc)
