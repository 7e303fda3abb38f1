"""Exactly once on the target at a (re)start (:mod:`kafka_mirror.engine.exactly_once`): the
records a cut batch already wrote are skipped, not written again."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kafka_mirror.config.model import FlowSpec
from kafka_mirror.engine.batch_writer import (
    BatchWriter,
    BatchWritten,
    PartitionCopy,
    WriteHook,
    run_write_hooks,
)
from kafka_mirror.engine.exactly_once import (
    JvmRecordReader,
    Skip,
    TargetEnds,
    plan_restart,
    settle,
    wait_producer_idle,
)
from kafka_mirror.engine.jvm_offsets import JvmEndOffsets
from kafka_mirror.engine.positions import Positions
from kafka_mirror.engine.realtime import RealTimeWriter
from kafka_mirror.errors import MirrorError
from kafka_mirror.kafka.clients import (
    producer_properties,
    sink_client_id,
    source_reader_properties,
    target_reader_properties,
    user_set_producer_key,
)
from kafka_mirror.observability.null_metrics import Metrics
from kafka_mirror.runtime.resume import SourceAdmin, assigned_partitions
from kafka_mirror.runtime.start_phases import StartPhases
from kafka_mirror.state.offset_ranges import CopiedRange

log = logging.getLogger(__name__)

# skipped partitions of a (re)start logged a line each at INFO; the rest in one summary line
SKIP_LINES = 10


class SkipNotKnown(MirrorError):
    """A (re)start could not yet determine what a cut batch left on the target (the target or
    the source does not answer): the flow retries with backoff."""


def producer_keeps_prefix(flow: FlowSpec) -> bool:
    """Whether the flow's producer leaves a prefix of a cut batch on the target (idempotence,
    acks=all): what ``mirror.exactly.once.target`` rests on."""
    props = producer_properties(flow)
    return props.get("enable.idempotence", "true").strip().lower() == "true" and \
        props.get("acks", "all").strip() in ("all", "-1")


def keeps_prefix(flow: FlowSpec) -> bool:
    """:func:`producer_keeps_prefix`, with a warning when it does not."""
    if producer_keeps_prefix(flow):
        return True
    log.warning("flow %s: mirror.exactly.once.target needs the producer's enable.idempotence=true "
                "and acks=all; without them a restart replays its last batch whole "
                "(at-least-once)", flow.name)
    return False


class ExactlyOnceRestart:
    """Where each partition of a flow resumes once the records a cut batch already wrote to the
    target are skipped; the skipped ranges go to the write hooks (offset translation, offset
    syncs)."""

    def __init__(self, flow: FlowSpec, source: SourceAdmin, target_ends: TargetEnds,
                 hooks: Sequence[WriteHook], save_ranges: Callable[[], None],
                 metrics: Metrics) -> None:
        self.flow = flow
        self.source = source
        self.target_ends = target_ends
        self.hooks = hooks
        self.save_ranges = save_ranges
        self.metrics = metrics

    def skip_written(self, spark: Any, known: Positions, assignment: Mapping[str, int],
                     offsets: JvmEndOffsets, previous: BatchWriter | RealTimeWriter | None,
                     phases: StartPhases | None = None) -> Positions:
        """``known`` moved on past what the batch cut short (by ``previous``, the writer of
        the query started last) already wrote; ``offsets`` reads the target's end offsets;
        ``phases`` gets the proof and the recording of its skips as steps."""
        flow, target_ends = self.flow, self.target_ends
        mine = {tp: o for tp, o in known.items() if tp[1] < assignment.get(tp[0], 0)}
        # partitions never committed (added since the last committed batch) resume where a cut
        # batch began to copy them: their log start, unless records were deleted since (then
        # the first position recorded)
        fresh = [tp for tp in assigned_partitions(assignment)
                 if tp not in known and target_ends.has(tp)]
        log_starts = self.source.log_start_offsets(fresh) if fresh else {}
        for tp in fresh:
            first = target_ends.first_position(tp)
            mine[tp] = log_starts[tp] if first is None or target_ends.target_end(
                tp, log_starts[tp]) is not None else first
        target_tps = sorted({(flow.target_topic(t), p) for t, p in mine})
        if isinstance(previous, BatchWriter) and previous.writing.is_set():
            # this process's producer may still hold records of the interrupted write: they
            # land before the target's end offsets are read
            self.wait_for_interrupted_write(spark, offsets, target_tps)
            previous.writing.clear()
        elif isinstance(previous, RealTimeWriter) and not previous.settled_everywhere:
            # the stopped real-time run's tasks may still copy: on executors of a cluster (not
            # counted from here), or past the stop's grace period
            self.wait_for_interrupted_write(spark, offsets, target_tps)
            previous.settled_everywhere = True
        plan = plan_restart(
            mine, flow.target_topic, target_ends,
            lambda tps: offsets.end_offsets(tps, timeout=30.0),
            lambda: JvmRecordReader(spark, source_reader_properties(flow)),
            lambda: JvmRecordReader(spark, target_reader_properties(flow)),
            lambda tps: self.source.log_start_offsets(tps),
        )
        for (topic, partition), why in sorted(plan.fallbacks.items()):
            log.warning("flow %s: %s[%d] resumes at-least-once from offset %d (records of the "
                        "batch cut short may be written twice): %s", flow.name, topic,
                        partition, mine[(topic, partition)], why)
        if plan.fallback_ends:
            # where the target ends now, for the batch that resumes there (records beyond it
            # later are late, not these)
            target_ends.record({tp: (mine[tp], end) for tp, end in plan.fallback_ends.items()})
        if phases is not None:
            phases.mark("cut batch proven")
        skipped = self._record_skips(plan.skips)
        if phases is not None:
            phases.mark("skips recorded")
        self.metrics.skipped_at_restart(flow, skipped, len(plan.fallbacks))
        return {**known, **plan.positions}

    def warm_readers(self, spark: Any, topic: str) -> None:
        """A record reader of each cluster opened, asked for an end offset of ``topic``
        (partition 0, and its target topic's) and closed: what a standby does once, so that
        the readers of a takeover's proof open on loaded code."""
        flow = self.flow
        for props, name in ((source_reader_properties(flow), topic),
                            (target_reader_properties(flow), flow.target_topic(topic))):
            reader = JvmRecordReader(spark, props)
            try:
                reader.end_offset(name, 0)
            finally:
                reader.close()

    def _record_skips(self, skips: Sequence[Skip]) -> int:
        """The skipped ranges, reported and handed to the write hooks; how many records."""
        flow = self.flow
        copies = []
        for i, skip in enumerate(skips):
            # a line per partition for the first few, the rest at DEBUG after a summary (a
            # takeover at 2,000 partitions would print 2,000 lines)
            log.log(logging.INFO if i < SKIP_LINES else logging.DEBUG,
                    "flow %s: %s[%d]: %d records of the batch cut short are already on the "
                    "target (%s[%d] offsets %d..%d): resuming at source offset %d instead of "
                    "%d", flow.name, skip.topic, skip.partition, skip.records,
                    flow.target_topic(skip.topic), skip.partition, skip.target_start,
                    skip.target_end - 1, skip.resume, skip.source_start)
            copies.append(PartitionCopy(
                skip.topic, skip.partition, flow.target_topic(skip.topic),
                CopiedRange(skip.source_start, skip.resume, skip.target_start, skip.target_end,
                            skip.exact)))
        skipped = sum(skip.records for skip in skips)
        if len(skips) > SKIP_LINES:
            rest = skips[SKIP_LINES:]
            log.info("flow %s: and %d partitions more with %d records of the batch cut short "
                     "already on the target, skipped likewise (%d records in all; each "
                     "partition's line at DEBUG)", flow.name, len(rest),
                     sum(skip.records for skip in rest), skipped)
        if copies:
            self.target_ends.record({(s.topic, s.partition): (s.resume, s.target_end)
                                     for s in skips})
            run_write_hooks(self.hooks, BatchWritten(flow, -1, tuple(copies), skipped, 0))
            self.save_ranges()
        return skipped

    def wait_for_interrupted_write(self, spark: Any, offsets: JvmEndOffsets,
                                   target_tps: list[tuple[str, int]]) -> None:
        """Until the stopped query's producer acknowledged (or failed) every record it held
        (found by its client id in the driver's JVM, in local mode), then until the target's end
        offsets stood still for 3 s. The second wait is also what covers a producer elsewhere
        (executors on a cluster, a client.id set by the user), and records a target broker
        appended without acknowledging them: a broker that stopped mid-write (a full disk)
        recovers them from its log when it starts again, and its end offset (the high
        watermark) reaches them only a moment after it answers."""
        flow = self.flow
        client_id = None if user_set_producer_key(flow, "client.id") else sink_client_id(flow)
        idle = wait_producer_idle(spark, client_id) if client_id else None
        if idle is False:
            raise MirrorError("the stopped query's producer still holds records of its "
                              "interrupted write")
        log.info("flow %s: the stopped query was interrupted while writing; waiting until "
                 "the target's end offsets stand still", flow.name)
        if not settle(lambda: offsets.end_offsets(target_tps, timeout=30.0)):
            raise MirrorError("the target's end offsets still move after the query stopped")
