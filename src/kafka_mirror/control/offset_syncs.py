"""Offset syncs in MirrorMaker 2's format, written after every batch (real-time mode: every
drain): where records landed.

Topic ``mm2-offset-syncs.<target>.internal`` on the source cluster (``offset-syncs.topic.location
= source``, the default) or ``mm2-offset-syncs.<source>.internal`` on the target (``= target``);
one partition, compacted. For every partition that moved in a batch whose offsets map one to one,
syncs are written, each a true (source offset, target offset) pair of one record: the batch's
first and last record and, between them, one every ``offset.lag.max + 1`` records (default 100:
as dense as MM2's own, which syncs once the target offset is ``offset.lag.max`` past the last
sync; 0: every record). MirrorMaker 2's readers (a restarted MM2's checkpoint task) and a new
kafka-mirror writer rebuilding its translation from them therefore translate exactly at every
batch boundary and within ``offset.lag.max`` records between. A batch that does not map one to
one (offset gaps, duplicates) gets no sync: no pair in it is known exactly, and readers fall back
to an earlier one, which is conservative. kafka-mirror's own checkpoints use the finer ranges of
:mod:`kafka_mirror.state.offset_ranges`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from kafka_mirror.config.model import ClusterSpec, FlowSpec
from kafka_mirror.engine.batch_writer import BatchWritten
from kafka_mirror.kafka.admin import ClusterAdmin
from kafka_mirror.kafka.internal_topics import (
    CLOSE_TIMEOUT,
    InternalRecord,
    InternalTopicError,
    InternalTopicReader,
    InternalTopicWriter,
)
from kafka_mirror.mm2.records import OffsetSync, RecordFormatError

log = logging.getLogger(__name__)


def offset_syncs_location(flow: FlowSpec) -> tuple[ClusterSpec, str]:
    """The cluster that holds the flow's offset syncs, and the topic's name."""
    if flow.syncs.offset_syncs_location == "target":
        return flow.target, flow.policy.offset_syncs_topic(flow.source.alias)
    return flow.source, flow.policy.offset_syncs_topic(flow.target.alias)


# a new writer reads at most this many of the newest offset syncs (the newest records of a
# partition are where its consumer groups usually are)
SYNCS_TAIL = 200_000


class OffsetSyncsReader:
    """The newest offset syncs of the flow's topic (:data:`SYNCS_TAIL` at most), per source
    partition in log order: what a new writer rebuilds its offset translation from."""

    def __init__(self, flow: FlowSpec, tail: int = SYNCS_TAIL) -> None:
        cluster, topic = offset_syncs_location(flow)
        self.where = f"{topic} on cluster '{cluster.alias}'"
        self.reader = InternalTopicReader(cluster, topic, label=f"flow {flow.name}: reading",
                                          tail=tail)

    def __call__(self) -> dict[tuple[str, int], list[tuple[int, int]]]:
        out: dict[tuple[str, int], list[tuple[int, int]]] = {}

        def keep(record: InternalRecord) -> None:
            if record.value is None:
                return
            try:
                sync = OffsetSync.decode(record.key, record.value)
            except RecordFormatError:
                return  # not a sync (another tool's record): nothing to learn from it
            out.setdefault((sync.topic, sync.partition), []).append(
                (sync.upstream_offset, sync.offset))

        self.reader.read_to_end(keep)
        return out


class OffsetSyncWriter:
    """Batch-writer hook: two syncs per partition of every batch that maps one to one."""

    def __init__(self, flow: FlowSpec, admins: Mapping[str, ClusterAdmin],
                 written: Callable[[], None] | None = None,
                 may_write: Callable[[], bool] | None = None) -> None:
        """``may_write``: whether this instance holds the flow's lease; without it, copies are
        no syncs (a writer paused past its lease drains, once resumed, ranges its successor
        copied past already: their syncs, later in the topic, would hide the successor's from
        a new writer's rebuild, which keeps only the syncs after the last that went back)."""
        self.flow = flow
        self.written = written  # told after every batch's syncs are on the cluster
        self.may_write = may_write
        self.cluster, self.topic = offset_syncs_location(flow)
        self.admin = admins[self.cluster.alias]
        self.writer = InternalTopicWriter(
            self.cluster, self.topic, label=f"flow {flow.name}: offset syncs not written to"
        )
        self.failures = 0

    def start(self) -> None:
        self.writer.ensure_topic(self.admin, self.flow.syncs.offset_syncs_replication_factor)

    def on_written(self, event: BatchWritten) -> None:
        if self.may_write is not None and not self.may_write():
            return
        syncs = []
        step = self.flow.syncs.offset_lag_max + 1
        for copy in event.copies:
            copied = copy.copied
            if not copied.exact or copied.source_end <= copied.source_start:
                continue
            last = copied.source_end - 1
            syncs += [OffsetSync(copy.topic, copy.partition, offset,
                                 copied.target_start + offset - copied.source_start)
                      for offset in [*range(copied.source_start, last, step), last]]
        if not syncs:
            return
        try:
            self.writer.write(((s.key(), s.value()) for s in syncs), partition=0)
        except InternalTopicError:
            self.failures += 1
            raise
        if self.written is not None:
            self.written()

    def cut_short(self) -> None:
        """The process stops: a write waiting for a cluster that does not answer ends within
        2 s (the syncs stay queued for :meth:`close`); they are not worth the stop's whole
        budget."""
        self.writer.cut_short()

    def close(self, timeout: float = CLOSE_TIMEOUT) -> None:
        self.writer.close(timeout)
