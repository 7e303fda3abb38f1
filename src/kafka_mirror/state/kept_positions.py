"""A flow's positions kept in Kafka, so that no host's disk holds the mirror.

Per source partition, the flow keeps in MirrorMaker 2's Connect offsets topic on its target
cluster (``mm2-offsets.<source>.internal``, or ``offset.storage.topic``) the record MM2 itself
would keep for it (same key, same partition, ``{"offset": last copied}``), with two more fields:
the target partition's end offset right after that record was written, and the source topic's
ID (:func:`kafka_mirror.mm2.offsets_records.kept_value`). The pair (source position, target end)
is what an exactly-once restart starts from (:mod:`kafka_mirror.engine.exactly_once`): a new host
with an empty state dir proves from it what the last batches wrote, and so neither copies the log
again nor writes a record twice; and MM2 started on the same topic resumes from the same records
without an export step.

Each pair is a fact (the target ended there when the source position was that), whenever it was
written: a pair older than the newest batch costs the restart a longer count of what is already
on the target, never a duplicate or a gap. So the pairs of a flow's batches are written at most
once per ``mirror.positions.in.kafka.interval.ms`` (0: after every batch, before Spark commits
it), the newest pair per partition, in one flush.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kafka_mirror.config.model import ClusterSpec
from kafka_mirror.kafka.admin import ClusterAdmin
from kafka_mirror.kafka.internal_topics import InternalTopicReader, InternalTopicWriter
from kafka_mirror.mm2.offsets_records import (
    DEFAULT_OFFSETS_PARTITIONS,
    MM2_SOURCE_CONNECTOR,
    kept_value,
    mm2_source_key,
    parse_kept_value,
    parse_source_key,
)

log = logging.getLogger(__name__)

Key = tuple[str, int]
TIMEOUT = 30.0


@dataclass(frozen=True)
class KeptPosition:
    """One partition's kept position: the next source offset to read; the target partition's
    end right after the record before it (None in a record MM2 wrote itself); the source
    topic's ID then (None when not known)."""

    position: int
    target_end: int | None
    topic_id: str | None


class KeptPositions:
    """The positions of one flow (``source_alias`` -> ``target``) in ``topic`` on the target."""

    def __init__(
        self,
        target: ClusterSpec,
        topic: str,
        source_alias: str,
        admin: ClusterAdmin,
        interval_ms: int = 1_000,
        *,
        replication_factor: int = -1,
        partitions: int = DEFAULT_OFFSETS_PARTITIONS,
        timeout: float = TIMEOUT,
        writer_factory: Callable[..., InternalTopicWriter] = InternalTopicWriter,
        reader_factory: Callable[..., InternalTopicReader] = InternalTopicReader,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.target = target
        self.topic = topic
        self.source_alias = source_alias
        self.admin = admin
        self.interval = interval_ms / 1000.0
        # the topic's when this creates it (offset.storage.replication.factor, .partitions)
        self.replication_factor = replication_factor
        self.partitions = partitions
        self.timeout = timeout
        self._writer_factory = writer_factory
        self._reader_factory = reader_factory
        self._clock = clock
        self._lock = threading.Lock()
        self._writer: InternalTopicWriter | None = None
        # the newest pair per partition not written yet, and the topic IDs they belong to
        self._pending: dict[Key, tuple[int, int, str | None]] = {}
        self._last_write = float("-inf")
        self._cut = False

    def keep(self, pairs: Mapping[Key, tuple[int, int]], topic_ids: Mapping[str, str]) -> int:
        """Remember ``(source position, target end)`` per partition; written (flushed) when the
        interval since the last write has passed. Returns how many records were written.
        Raises :class:`~kafka_mirror.kafka.internal_topics.InternalTopicError` when the cluster
        does not take them (they stay pending for the next call)."""
        with self._lock:
            for (topic, partition), (position, end) in pairs.items():
                self._pending[(topic, partition)] = (position, end, topic_ids.get(topic))
            if not self._pending or self._clock() - self._last_write < self.interval:
                return 0
            return self._write_pending()

    def cut_short(self) -> None:
        """The process stops: a write of the drains waiting for a cluster that does not answer
        ends within 2 s, and later ones wait no longer (what they did not write stays pending for
        :meth:`close`, which waits what it is given)."""
        self._cut = True
        writer = self._writer
        if writer is not None:
            writer.cut_short()

    def flush(self) -> int:
        """Write what is pending now (a clean stop)."""
        with self._lock:
            return self._write_pending() if self._pending else 0

    def _write_pending(self, timeout: float | None = None) -> int:
        pending = dict(self._pending)
        records = [
            (mm2_source_key(self.source_alias, topic, partition),
             kept_value(position, end, topic_id))
            for (topic, partition), (position, end, topic_id) in sorted(pending.items())
            if position > 0
        ]
        writer = self._open()
        writer.write(records, timeout=timeout)
        self._last_write = self._clock()
        for key, value in pending.items():
            if self._pending.get(key) == value:
                del self._pending[key]
        return len(records)

    def _open(self) -> InternalTopicWriter:
        if self._writer is None:
            writer = self._writer_factory(
                self.target, self.topic, label="positions not kept in", timeout=self.timeout,
                partition_by_key=True)
            writer.ensure_topic(self.admin, self.replication_factor, self.partitions)
            # set before _cut is read, as cut_short sets _cut before it reads _writer: a stop
            # under way while the writer is made reaches it either way
            self._writer = writer
            if self._cut:
                writer.cut_short()
        return self._writer

    def read(self) -> dict[Key, KeptPosition]:
        """The positions of the flow's source partitions in the topic (the last record per key;
        a tombstone removes it), MM2's own included; {} when the topic does not exist."""
        latest = self._reader_factory(self.target, self.topic,
                                      label="reading the kept positions in",
                                      timeout=self.timeout).read_latest()
        found: dict[Key, KeptPosition] = {}
        for record in latest.values():
            parsed = parse_source_key(record.key)
            if parsed is None:
                continue
            connector, alias, topic, partition = parsed
            if connector != MM2_SOURCE_CONNECTOR or alias != self.source_alias or \
                    record.key != mm2_source_key(alias, topic, partition):
                continue
            value = parse_kept_value(record.value or b"")
            if value is not None:
                found[(topic, partition)] = KeptPosition(*value)
        return found

    def close(self, timeout: float | None = None) -> None:
        """Write what is pending (best effort, at most ``timeout`` seconds, the positions'
        own timeout by default: a stop goes on) and close the producer."""
        wait = self.timeout if timeout is None else min(timeout, self.timeout)
        deadline = self._clock() + wait
        with self._lock:
            writer = self._writer
            try:
                if self._pending:
                    self._write_pending(wait)
            except Exception as exc:  # the next start proves from the last pair written
                log.warning("%s: the newest positions were not kept in %s on cluster '%s' at "
                            "the stop (%s)", self.source_alias, self.topic, self.target.alias,
                            exc)
            self._writer = None
        if writer is not None:  # what is left of the wait (a write that failed spent it)
            writer.close(max(0.0, deadline - self._clock()))

