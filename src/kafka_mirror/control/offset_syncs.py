"""Offset syncs in MirrorMaker 2's format, written after every batch: where records landed.

Topic ``mm2-offset-syncs.<target>.internal`` on the source cluster (``offset-syncs.topic.location
= source``, the default) or ``mm2-offset-syncs.<source>.internal`` on the target (``= target``);
one partition, compacted. For every partition that moved in a batch whose offsets map one to one,
two syncs are written, each a true (source offset, target offset) pair of one record: the batch's
first and last record. MirrorMaker 2's readers (a restarted MM2's checkpoint task) therefore
translate exactly at every batch boundary. A batch that does not map one to one (offset gaps,
duplicates) gets no sync: no pair in it is known exactly, and readers fall back to an earlier one,
which is conservative. kafka-mirror's own checkpoints use the finer ranges of
:mod:`kafka_mirror.state.offset_ranges`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from kafka_mirror.config.model import ClusterSpec, FlowSpec
from kafka_mirror.engine.batch_writer import BatchWritten
from kafka_mirror.kafka.admin import ClusterAdmin
from kafka_mirror.kafka.internal_topics import (
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
                 written: Callable[[], None] | None = None) -> None:
        self.flow = flow
        self.written = written  # told after every batch's syncs are on the cluster
        self.cluster, self.topic = offset_syncs_location(flow)
        self.admin = admins[self.cluster.alias]
        self.writer = InternalTopicWriter(
            self.cluster, self.topic, label=f"flow {flow.name}: offset syncs not written to"
        )
        self.failures = 0

    def start(self) -> None:
        self.writer.ensure_topic(self.admin, self.flow.syncs.offset_syncs_replication_factor)

    def on_written(self, event: BatchWritten) -> None:
        syncs = []
        for copy in event.copies:
            copied = copy.copied
            if not copied.exact:
                continue
            syncs.append(OffsetSync(copy.topic, copy.partition, copied.source_start,
                                    copied.target_start))
            if copied.source_end - 1 > copied.source_start:
                syncs.append(OffsetSync(copy.topic, copy.partition, copied.source_end - 1,
                                        copied.target_end - 1))
        if not syncs:
            return
        try:
            self.writer.write(((s.key(), s.value()) for s in syncs), partition=0)
        except InternalTopicError:
            self.failures += 1
            raise
        if self.written is not None:
            self.written()

    def close(self) -> None:
        self.writer.close()
