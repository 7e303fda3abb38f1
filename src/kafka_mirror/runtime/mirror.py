"""The mirror process: every enabled flow as its own query, kept in line with its topics."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from kafka_mirror.config.model import FlowSpec, MirrorConfig
from kafka_mirror.control.acl_sync import AclSync
from kafka_mirror.control.checkpoints import GroupCheckpointer
from kafka_mirror.control.heartbeats import HeartbeatEmitter
from kafka_mirror.control.mm2_positions import mm2_offsets_topic, read_mm2_positions
from kafka_mirror.control.offset_syncs import OffsetSyncWriter
from kafka_mirror.control.topics import TopicSync
from kafka_mirror.engine.acked_positions import FILE as ACKED_FILE
from kafka_mirror.engine.acked_positions import AckedPositions
from kafka_mirror.engine.batch_writer import (
    BatchWriter,
    BatchWritten,
    PartitionCopy,
    WriteHook,
    run_write_hooks,
)
from kafka_mirror.engine.batches import BatchHook, event_from_progress, observed_row, run_hooks
from kafka_mirror.engine.class_data import CLASS_DATA_DIR, ClassData
from kafka_mirror.engine.data_loss import deleted_ranges, describe_all
from kafka_mirror.engine.exactly_once import (
    TARGET_ENDS_FILE,
    JvmRecordReader,
    TargetEnds,
    plan_restart,
    settle,
    wait_producer_idle,
)
from kafka_mirror.engine.flow_query import OBSERVATION, start_query
from kafka_mirror.engine.jvm_offsets import JvmEndOffsets
from kafka_mirror.engine.positions import (
    FlowState,
    Positions,
    TopicIdsUnknown,
    batch_end_positions,
    batch_start_positions,
    ids_to_record,
    recreated_topics,
    starting_offsets,
)
from kafka_mirror.engine.realtime import (
    RealTimeProgress,
    RealTimeWriter,
    new_run_key,
    task_slots_needed,
)
from kafka_mirror.engine.session import (
    build_session,
    connector_jars,
    realtime_master,
    spark_conf,
    topic_latency_text,
    wait_for_master,
)
from kafka_mirror.errors import MirrorError
from kafka_mirror.kafka.admin import ClusterAdmin
from kafka_mirror.kafka.clients import (
    admin_properties,
    durability_warnings,
    producer_properties,
    sink_client_id,
    source_reader_properties,
    spark_sink_options,
    target_reader_properties,
    user_set_producer_key,
)
from kafka_mirror.observability.lag import LagCommitter
from kafka_mirror.observability.metrics import MirrorMetrics
from kafka_mirror.observability.progress import ProgressReporter
from kafka_mirror.observability.server import MetricsServer, MirrorStatus
from kafka_mirror.runtime.periodic import Periodic
from kafka_mirror.state.offset_ranges import CopiedRange, OffsetRanges

log = logging.getLogger(__name__)
STOP_GRACE_SECONDS = 15.0
# real-time progress: how long the source's offsets may take to answer (the main loop waits)
PROGRESS_LOOKUP_SECONDS = 2.0
MAX_RETRY_SECONDS = 60.0
# Errors a restart cannot cure: the target refuses a record for good.
PERMANENT_FAILURES = (
    "RecordTooLargeException",
    "InvalidTimestampException",
    "InvalidRecordException",
    "TopicAuthorizationException",
    "CorruptRecordException",
)


def _first_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[0][:500] if lines else text


def _reason(error: str, exception: str) -> str:
    """``exception`` and its message, from the line of ``error`` (a Java trace) naming it."""
    for line in error.splitlines():
        at = line.find(exception)
        if at >= 0:
            return line[at:].strip()[:300]
    return _first_line(error)


def error_kind(error: str) -> str:
    """The kind of a flow's failure, for ``kafka_mirror_errors_total``."""
    lowered = error.lower()
    if "authoriz" in lowered or "authenticat" in lowered or "sasl" in lowered:
        return "authorization"
    if any(p in error for p in PERMANENT_FAILURES):
        return "record_rejected"
    if any(w in lowered for w in ("timeout", "disconnect", "connection", "unreachable",
                                  "not usable", "network")):
        return "unreachable"
    return "other"


def refused_batch(flow: FlowSpec, checkpoint: Path) -> str | None:
    """Which records the batch that failed held (the newest batch Spark planned but did not
    commit), as source and target partitions with offsets; None when unknown."""
    planned = sorted(int(p.name) for p in (checkpoint / "offsets").glob("*") if p.name.isdigit())
    committed = {p.name for p in (checkpoint / "commits").glob("*")}
    pending = [b for b in planned if str(b) not in committed]
    if not pending:
        return None
    batch = pending[-1]
    try:
        start = batch_start_positions(checkpoint, batch) or {}
        end = batch_end_positions(checkpoint, batch) or {}
    except (OSError, ValueError):
        return None
    moved = [
        f"{topic}[{partition}] offsets {start.get((topic, partition), offset)}.."
        f"{offset - 1} -> {flow.target_topic(topic)}[{partition}]"
        for (topic, partition), offset in sorted(end.items())
        if offset > start.get((topic, partition), offset)
    ]
    if not moved:
        return None
    shown = ", ".join(moved[:5]) + (f" and {len(moved) - 5} more" if len(moved) > 5 else "")
    return f"cluster '{flow.target.alias}' refused batch {batch} ({shown})"


def _keeps_prefix(flow: FlowSpec) -> bool:
    """Whether the flow's producer leaves a prefix of a cut batch on the target (idempotence,
    acks=all): what ``mirror.exactly.once.target`` rests on; warns when it does not."""
    props = producer_properties(flow)
    if props.get("enable.idempotence", "true").strip().lower() == "true" and \
            props.get("acks", "all").strip() in ("all", "-1"):
        return True
    log.warning("flow %s: mirror.exactly.once.target needs the producer's enable.idempotence=true "
                "and acks=all; without them a restart replays its last batch whole "
                "(at-least-once)", flow.name)
    return False


class SkipNotKnown(MirrorError):
    """A (re)start could not yet determine what a cut batch left on the target (the target or
    the source does not answer): the flow retries with backoff."""


class RangeKeeper:
    """Batch-writer hook: remembers where each batch landed, for offset translation."""

    def __init__(self, ranges: OffsetRanges) -> None:
        self.ranges = ranges

    def on_written(self, event: BatchWritten) -> None:
        for copy in event.copies:
            self.ranges.add(copy.topic, copy.partition, copy.copied)


class FlowRunner:
    """One flow's query, restarted on a fresh checkpoint generation when its topics change."""

    def __init__(
        self,
        flow: FlowSpec,
        state_root: Path,
        admins: Mapping[str, ClusterAdmin],
        raw_config: Mapping[str, str] | None = None,
        metrics: MirrorMetrics | None = None,
    ) -> None:
        self.flow = flow
        self.metrics = metrics
        if metrics is not None:
            metrics.register(flow)
        self.state = FlowState(state_root / flow.path_name)
        self.source = admins[flow.source.alias]
        self.target = admins[flow.target.alias]
        self.topics = TopicSync(
            flow, self.source, self.target,
            partial(metrics.topics_changed, flow) if metrics is not None else None,
        )
        self.raw_config = dict(raw_config or {})
        self.ranges_path = self.state.flow_dir / "offset-ranges.json"
        self.ranges = OffsetRanges.load(self.ranges_path)
        self.offset_syncs = (
            OffsetSyncWriter(
                flow, admins,
                partial(metrics.offset_syncs_written, flow) if metrics is not None else None,
            )
            if flow.syncs.emit_offset_syncs else None
        )
        self.hooks: list[WriteHook] = [RangeKeeper(self.ranges)]
        if self.offset_syncs is not None:
            self.hooks.append(self.offset_syncs)
        # real-time mode resumes after the last record the target acknowledged
        self.acked = AckedPositions(self.state.flow_dir / ACKED_FILE)
        if flow.realtime:
            self.hooks.append(self.acked)
        # real-time mode: progress after every drain, to these batch hooks (set by the Mirror)
        self.progress = RealTimeProgress(flow)
        self.progress_hooks: Sequence[BatchHook] = ()
        self._drain_lock = threading.Lock()
        # where the running query started partitions it has copied nothing of yet
        self._run_start: Positions = {}
        self.target_ends = (
            TargetEnds(self.state.flow_dir / TARGET_ENDS_FILE)
            if flow.exactly_once_target and _keeps_prefix(flow) else None
        )
        # the batch writer of the query started last (did its last write end normally?)
        self.last_writer: BatchWriter | RealTimeWriter | None = None
        self.query: Any = None
        # per query run (progress events of a stopped run can still arrive after a restart)
        self.writers: dict[str, BatchWriter | RealTimeWriter] = {}
        # the other flows of the process (real-time ones hold task slots)
        self.peers: Mapping[str, FlowRunner] = {}
        self.assignment: dict[str, int] = {}
        self.next_refresh = 0.0
        self.failures = 0
        self.retry_at = 0.0
        self.failed: str | None = None  # why the flow stopped for good
        self.target_offsets: JvmEndOffsets | None = None
        # the largest max.message.bytes among the source topics: wanted, and the running
        # query's (its producer's max.request.size follows it)
        self.largest_batch = 0
        self.started_largest_batch = 0
        # source topic IDs: now, and those the running query started with
        self.topic_ids: dict[str, str] = {}
        self.started_ids: dict[str, str] = {}
        self._reported_ids: set[tuple[str, str]] = set()
        self._ids_warned = False  # the source cluster has no topic IDs (reported once)
        # the last read of the IDs: what it found (None: the cluster has none) or why it failed
        self._ids_read: dict[str, str] | str | None = {}

    def start_control(self) -> None:
        """Internal topics the flow writes exist before any batch runs."""
        if self.offset_syncs is not None:
            self.offset_syncs.start()

    def sync_topics(self) -> dict[str, int]:
        """Bring the target topics in line; return the source partitions to mirror."""
        plans = self.topics.sync()
        self.largest_batch = max((p.source_max_message_bytes or 0 for p in plans), default=0)
        self.next_refresh = time.monotonic() + self.flow.refresh_interval_seconds
        assignment = {p.source_topic: p.partitions for p in plans}
        self.topic_ids = self._source_topic_ids(sorted(assignment))
        return assignment

    def _source_topic_ids(self, topics: list[str]) -> dict[str, str]:
        """The source topics' IDs (none when the cluster has none, or when they could not be
        read this time: the running query goes on and a re-creation is found at the next
        read, but no query starts; see ``ids_to_record``)."""
        try:
            ids = self.source.topic_ids(topics)
        except Exception as exc:
            self._ids_read = _first_line(str(exc))
            return {}
        self._ids_read = ids
        if ids is None:
            if not self._ids_warned:
                log.warning("flow %s: the source cluster has no topic IDs (brokers before Kafka "
                            "2.8): a topic deleted and created again under the same name is "
                            "not detected", self.flow.name)
                self._ids_warned = True
            return {}
        return ids

    def resume_positions(self) -> Positions | None:
        """Where the flow resumes: the positions of its last committed batch (in real-time
        mode, moved on to the acknowledged records), less those of source topics deleted and
        created again since (their new incarnation is mirrored from its start, and the old
        one's offset translation is forgotten)."""
        if self.flow.realtime:
            # the newest run may have committed no batch: its acknowledged positions too
            # belong to the topic IDs it started with
            self._forget_recreated(self.state.newest_topic_ids())
        last = self.state.last_committed()
        if last is None:
            # a real-time run cut before its first batch ended resumes where it started,
            # moved on by what it copied
            return self.acked.resume(None) if self.flow.realtime else None
        known, known_ids = last
        recreated = self._forget_recreated(known_ids)
        known = {tp: offset for tp, offset in known.items() if tp[0] not in recreated}
        return self.acked.resume(known) if self.flow.realtime else known

    def _forget_recreated(self, known_ids: Mapping[str, str]) -> set[str]:
        """The source topics whose ID is no longer one of ``known_ids``: their positions and
        offset translation are dropped (reported once per new topic ID)."""
        recreated = recreated_topics(known_ids, self.topic_ids)
        for topic, (old, new) in recreated.items():
            self.ranges.drop_topic(topic)
            self.acked.drop_topic(topic)
            if self.target_ends is not None:
                self.target_ends.drop_topic(topic)
            if (topic, new) not in self._reported_ids:
                self._reported_ids.add((topic, new))
                log.warning(
                    "flow %s: source topic %s was deleted and created again (topic ID %s, was "
                    "%s): mirrored from the new topic's start; the old topic's positions and "
                    "offset translation are dropped", self.flow.name, topic, new, old,
                )
        if recreated:
            self.save_ranges()
        return set(recreated)

    def follow(self, spark: Any, assignment: dict[str, int]) -> None:
        """(Re)start the query when the partitions to mirror changed."""
        recreated = recreated_topics(self.started_ids, self.topic_ids)
        if assignment != self.assignment or (assignment and self.query is None):
            reason = None
            if self.assignment:
                log.info("flow %s: topics or partitions changed; restarting", self.flow.name)
                reason = "topics_changed"
            elif self.failures:
                reason = "failure"
            self._restart(spark, assignment, reason)
        elif self.query is not None and recreated:
            log.info("flow %s: source topics deleted and created again (%s); restarting",
                     self.flow.name, ", ".join(recreated))
            self._restart(spark, assignment, "topic_recreated")
        elif self.query is not None and self.largest_batch > self.started_largest_batch:
            log.info("flow %s: a source topic now accepts records up to %d bytes; restarting "
                     "with a producer that sends them", self.flow.name, self.largest_batch)
            self._restart(spark, assignment, "record_size")

    def takeover_positions(self) -> Positions | None:
        """Where a first run starts when another mirror ran before: MirrorMaker 1's consumer
        group (``legacy``), or a MirrorMaker 2's positions in its Connect offsets topic."""
        flow = self.flow
        if flow.takeover_group:
            committed = self.source.committed_offsets(
                flow.takeover_group, self.source.partitions(flow.should_mirror)
            )
            if committed:
                log.info(
                    "flow %s: first run starts at the offsets group %s committed (%d partitions)",
                    flow.name, flow.takeover_group, len(committed),
                )
                return {tp: offset for tp, (offset, _) in committed.items()}
        if flow.takeover_mm2:
            topic = mm2_offsets_topic(self.raw_config, flow.source.alias, flow.target.alias)
            positions = read_mm2_positions(flow.target, topic, flow.source.alias)
            if positions:
                log.info(
                    "flow %s: taking over from MirrorMaker 2: %d partitions start where its "
                    "offsets topic %s says it stopped", flow.name, len(positions), topic,
                )
                return positions
        return None

    def _restart(self, spark: Any, assignment: dict[str, int], reason: str | None = None
                 ) -> None:
        self.stop()
        self.assignment = assignment
        if self.metrics is not None:
            self.metrics.set_assignment(self.flow, assignment)
            if reason is not None:
                self.metrics.restarted(self.flow, reason)
        if not assignment:
            log.info("flow %s: no source topic matches yet", self.flow.name)
            return
        read = self._ids_read
        ids = ids_to_record(assignment, None if read is None else self.topic_ids,
                            read if isinstance(read, str) else None,
                            {**self.state.newest_topic_ids(), **self.started_ids})
        known = self.resume_positions()
        resumed = known is not None
        if known is None:
            known = self.takeover_positions()
        if known and not self._check_data_loss(known, assignment):
            return
        if self.target_offsets is None:
            self.target_offsets = JvmEndOffsets(spark, admin_properties(self.flow.target))
        # a first run from the log start whose first batch was cut resumes like the rest
        first = known is None and self.flow.starting_offsets == "earliest"
        if self.target_ends is not None and ((resumed and bool(known)) or first):
            try:
                known = self._skip_written(spark, known or {}, assignment)
            except Exception as exc:
                raise SkipNotKnown(
                    f"what the target already holds of the batch cut short was not determined "
                    f"({_first_line(str(exc))}); not restarting yet") from exc
        if self.flow.realtime:
            known = self._realtime_start(known, assignment)
        start = starting_offsets(assignment, known, self.flow.starting_offsets)
        if self.flow.realtime:
            taken = sum(peer.realtime_partitions for peer in self.peers.values()
                        if peer is not self)
            task_slots_needed(self.flow, assignment,
                              int(spark.sparkContext.defaultParallelism), taken)
        checkpoint = self.state.new_generation(ids)
        self.started_ids = ids
        self.state.prune(keep=checkpoint)
        writer: BatchWriter | RealTimeWriter
        if self.flow.realtime:
            run_key = new_run_key(self.flow)
            writer = RealTimeWriter(
                self.flow, checkpoint,
                spark_sink_options(self.flow, self.largest_batch,
                                   latency=self.metrics is not None, copies_run=run_key),
                run_key, assignment,
            )
            writer.attach(spark)
        else:
            self.acked.clear()  # micro-batch positions are the committed batches'
            writer = BatchWriter(
                self.flow, checkpoint,
                spark_sink_options(self.flow, self.largest_batch,
                                   latency=self.metrics is not None),
                self.target_offsets, self.target_ends,
            )
        self.last_writer = writer
        self._run_start = {}
        self.started_largest_batch = self.largest_batch
        self.query = start_query(spark, self.flow, assignment, start, checkpoint, writer,
                                 with_latency=self.metrics is not None)
        for dropped in list(self.writers.values())[:-2]:
            if isinstance(dropped, RealTimeWriter):
                # acknowledgements that reached an old run's producer after its stop
                dropped.forget()
        self.writers = {k: v for k, v in list(self.writers.items())[-2:]}
        self.writers[str(self.query.runId)] = writer
        log.info(
            "flow %s: mirroring %d topics, %d partitions (checkpoint %s)",
            self.flow.name,
            len(assignment),
            sum(assignment.values()),
            checkpoint,
        )

    def _realtime_start(self, known: Positions | None, assignment: dict[str, int]
                        ) -> Positions | None:
        """Real-time mode: where the run starts is saved before it starts (a run cut before
        Spark committed a batch resumes there, moved on by what it copied); a first run from
        the latest offsets reads them now, for the same reason."""
        if known is None and self.flow.starting_offsets == "latest":
            known = self.source.end_offsets(_partitions(assignment))
        if known:
            self.acked.seed(known)
        return known

    def _skip_written(self, spark: Any, known: Positions, assignment: dict[str, int]
                      ) -> Positions:
        """Exactly once on the target (:mod:`kafka_mirror.engine.exactly_once`): where each
        partition resumes once the records a cut batch already wrote to the target are
        skipped; the skipped ranges go to offset translation and offset syncs."""
        flow, target_ends, offsets = self.flow, self.target_ends, self.target_offsets
        assert target_ends is not None and offsets is not None
        mine = {tp: o for tp, o in known.items() if tp[1] < assignment.get(tp[0], 0)}
        # partitions never committed (added since the last committed batch) start at their
        # log start, where a cut batch may have begun to copy them
        fresh = [tp for tp in _partitions(assignment)
                 if tp not in known and target_ends.has(tp)]
        if fresh:
            mine |= self.source.log_start_offsets(fresh)
        target_tps = sorted({(flow.target_topic(t), p) for t, p in mine})
        previous = self.last_writer
        if isinstance(previous, BatchWriter) and previous.writing.is_set():
            # this process's producer may still hold records of the interrupted write: they
            # land before the target's end offsets are read
            self._wait_for_interrupted_write(spark, target_tps)
            previous.writing.clear()
        plan = plan_restart(
            mine, flow.target_topic, target_ends,
            lambda tps: offsets.end_offsets(tps, timeout=30.0),
            lambda: JvmRecordReader(spark, source_reader_properties(flow)),
            lambda: JvmRecordReader(spark, target_reader_properties(flow)),
        )
        for (topic, partition), why in sorted(plan.fallbacks.items()):
            log.warning("flow %s: %s[%d] resumes at-least-once from offset %d (records of the "
                        "batch cut short may be written twice): %s", flow.name, topic,
                        partition, mine[(topic, partition)], why)
        copies = []
        for skip in plan.skips:
            log.info("flow %s: %s[%d]: %d records of the batch cut short are already on the "
                     "target (%s[%d] offsets %d..%d): resuming at source offset %d instead of "
                     "%d", flow.name, skip.topic, skip.partition, skip.records,
                     flow.target_topic(skip.topic), skip.partition, skip.target_start,
                     skip.target_end - 1, skip.resume, skip.source_start)
            copies.append(PartitionCopy(
                skip.topic, skip.partition, flow.target_topic(skip.topic),
                CopiedRange(skip.source_start, skip.resume, skip.target_start, skip.target_end,
                            skip.exact)))
        skipped = sum(skip.records for skip in plan.skips)
        if copies:
            target_ends.record({(s.topic, s.partition): (s.resume, s.target_end)
                                for s in plan.skips})
            run_write_hooks(self.hooks, BatchWritten(flow, -1, tuple(copies), skipped, 0))
            self.save_ranges()
        if self.metrics is not None:
            self.metrics.skipped_at_restart(flow, skipped, len(plan.fallbacks))
        return {**known, **plan.positions}

    def _wait_for_interrupted_write(self, spark: Any, target_tps: list[tuple[str, int]]
                                    ) -> None:
        """Until the stopped query's producer acknowledged (or failed) every record it held:
        found by its client id in the driver's JVM (local mode); elsewhere (executors on a
        cluster, a client.id set by the user), until the target's end offsets stood still for
        3 s."""
        flow, offsets = self.flow, self.target_offsets
        assert offsets is not None
        client_id = None if user_set_producer_key(flow, "client.id") else sink_client_id(flow)
        idle = wait_producer_idle(spark, client_id) if client_id else None
        if idle is False:
            raise MirrorError("the stopped query's producer still holds records of its "
                              "interrupted write")
        if idle is None:
            log.info("flow %s: the stopped query was interrupted while writing; waiting until "
                     "the target's end offsets stand still", flow.name)
            if not settle(lambda: offsets.end_offsets(target_tps, timeout=30.0)):
                raise MirrorError("the target's end offsets still move after the query "
                                  "stopped")

    def check_resume(self, assignment: dict[str, int]) -> None:
        """Before Spark starts: records deleted since the last run stop the flow at once (with
        ``mirror.fail.on.data.loss=true``; otherwise the start of the query reports them)."""
        known = self.resume_positions()
        if known and self.flow.fail_on_data_loss:
            self._check_data_loss(known, assignment)

    def _check_data_loss(self, known: Positions, assignment: dict[str, int]) -> bool:
        """False when records the flow has not mirrored yet were deleted on the source and
        ``mirror.fail.on.data.loss`` holds: the flow then stops for good, naming them. Otherwise
        they are reported and skipped (Spark starts each partition at its log start)."""
        resume = {
            (topic, partition): offset for (topic, partition), offset in known.items()
            if partition < assignment.get(topic, 0)
        }
        try:
            log_starts = self.source.log_start_offsets(sorted(resume))
        except Exception as exc:  # Spark's own check still applies
            log.warning("flow %s: cannot check for records deleted before they were mirrored: "
                        "%s", self.flow.name, _first_line(str(exc)))
            return True
        gaps = deleted_ranges(resume, log_starts)
        if not gaps:
            return True
        if self.flow.fail_on_data_loss:
            self.failed = (
                f"records were deleted on cluster '{self.flow.source.alias}' (retention or "
                f"deleted records) before they were mirrored: {describe_all(gaps)}; "
                "mirror.fail.on.data.loss=true stops the flow (set it to false to skip them)"
            )
            self.assignment = {}
            log.error("flow %s stopped for good: %s", self.flow.name, self.failed)
            return False
        log.warning(
            "flow %s: skipping records deleted on cluster '%s' before they were mirrored "
            "(mirror.fail.on.data.loss=false): %s",
            self.flow.name, self.flow.source.alias, describe_all(gaps),
        )
        return True

    def save_ranges(self) -> None:
        self.ranges.save(self.ranges_path)

    @property
    def realtime_partitions(self) -> int:
        """Task slots this flow's real-time query holds (0 in micro-batch mode)."""
        if not self.flow.realtime or self.query is None:
            return 0
        return sum(self.assignment.values())

    def drain_copies(self, writer: BatchWriter | RealTimeWriter | None = None,
                     ended: tuple[int, float] | None = None) -> None:
        """Real-time mode: where the records acknowledged since the last drain landed, to the
        write hooks (offset translation, offset syncs, acknowledged positions); then the flow's
        progress to the batch hooks (``ended``: the id and duration of the batch Spark just
        committed)."""
        writer = writer or self._current_writer()
        if not isinstance(writer, RealTimeWriter):
            return
        with self._drain_lock:
            batch_id, duration = ended or (-1, 0.0)
            written = writer.drain(batch_id)
            if written is not None:
                run_write_hooks(self.hooks, written)
            self.progress.add(written)
            latest = self._source_ends()
            if latest is None:
                return
            event = self.progress.report(self._progress_positions(latest), latest, batch_id,
                                         duration)
        run_hooks(self.progress_hooks, event)

    def _source_ends(self) -> Positions | None:
        """The source's end offsets of the partitions mirrored now; None when there are none
        or the source did not answer within :data:`PROGRESS_LOOKUP_SECONDS`."""
        partitions = _partitions(self.assignment)
        if not partitions:
            return None
        try:
            return self.source.end_offsets(partitions, timeout=PROGRESS_LOOKUP_SECONDS)
        except Exception as exc:
            log.debug("flow %s: source end offsets not read (%s)", self.flow.name, exc)
            return None

    def _progress_positions(self, latest: Positions) -> Positions:
        """Per partition mirrored now, the offset after its last acknowledged record, or
        where the running query started it (its log start, read once, when it was started
        from the earliest offset and has copied nothing yet)."""
        acked = self.acked.positions()
        missing = [tp for tp in latest if tp not in acked and tp not in self._run_start]
        if missing:
            try:
                self._run_start |= self.source.log_start_offsets(
                    missing, timeout=PROGRESS_LOOKUP_SECONDS)
            except Exception as exc:
                log.debug("flow %s: log start offsets not read (%s)", self.flow.name, exc)
        return {tp: acked[tp] if tp in acked else self._run_start[tp] for tp in latest
                if tp in acked or tp in self._run_start}

    def tick(self, spark: Any) -> None:
        """Keep the flow running: restart a failed query, follow topic changes. Faults (a
        cluster unreachable for minutes, a broker restart) are retried with backoff; a record
        the target refuses for good stops this flow only (restarting would append the same
        batch again and again)."""
        now = time.monotonic()
        if self.failed is not None or now < self.retry_at:
            return
        try:
            if self.query is not None and not self.query.isActive:
                error = str(self.query.exception() or "query terminated")
                writer = self._current_writer()
                self.query = None
                self.assignment = {}
                permanent = next((p for p in PERMANENT_FAILURES if p in error), None)
                if permanent is not None:
                    refused = refused_batch(self.flow, writer.checkpoint) if writer else None
                    reason = _reason(error, permanent)
                    # the first line: the refused records and the target's reason; Spark's
                    # whole text follows
                    self.failed = f"{refused}: {reason}\n{error}" if refused else \
                        f"{reason}\n{error}"
                    log.error("flow %s stopped for good (%s): %s", self.flow.name, permanent,
                              _first_line(self.failed))
                    if self.metrics is not None:
                        self.metrics.failed(self.flow, error_kind(error),
                                            _first_line(self.failed))
                    return
                raise MirrorError(f"query failed: {_first_line(error)}")
            self.drain_copies()
            wanted = self.flow.refresh_topics or self.query is None
            if wanted and now >= self.next_refresh:
                self.follow(spark, self.sync_topics())
            if self.failures:
                log.info("flow %s: running again after %d failed attempts", self.flow.name,
                          self.failures)
                self.failures = 0
        except Exception as exc:
            self.failed_attempt(exc, now)

    def failed_attempt(self, exc: Exception, now: float) -> None:
        """A failure a retry may cure: counted, reported, retried with backoff."""
        self.failures += 1
        if self.metrics is not None:
            message = _first_line(str(exc))
            self.metrics.failed(self.flow, error_kind(str(exc)), message)
        delay = min(MAX_RETRY_SECONDS, 2.0 ** min(self.failures, 6))
        self.retry_at = now + delay
        log.warning("flow %s: %s; retrying in %.0f s (attempt %d)", self.flow.name,
                    _first_line(str(exc)), delay, self.failures)

    def phase(self) -> str:
        """starting, running, retrying (after a failure, with backoff) or failed (for good)."""
        if self.failed is not None:
            return "failed"
        if self.failures:
            return "retrying"
        return "running" if self.query is not None and self.query.isActive else "starting"

    def begin_stop(self) -> None:
        """No new batch starts writing from now on (the one writing finishes)."""
        writer = self._current_writer()
        if writer is not None:
            writer.stopping.set()

    def _current_writer(self) -> BatchWriter | RealTimeWriter | None:
        if self.query is None:
            return None
        return self.writers.get(str(self.query.runId))

    def stop(self) -> None:
        """Stop between batches: the batch being written finishes, the next is refused (and
        read again on the next start); past the grace period the query is interrupted."""
        self.begin_stop()
        writer = self._current_writer()
        query, self.query = self.query, None
        if query is None:
            return
        if isinstance(writer, RealTimeWriter):
            # no wait for the real-time batch's end: the next run resumes after the last
            # record the target acknowledged (AckedPositions), once the stopped query's
            # producer delivered what it had sent
            writer.stop_quietly(query)
            if not writer.settle(STOP_GRACE_SECONDS):
                log.warning("flow %s: records sent before the stop were not acknowledged within "
                            "%.0f s; they are written again on the next start", self.flow.name,
                            STOP_GRACE_SECONDS)
            self.drain_copies(writer)
            writer.forget()
            return
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        while time.monotonic() < deadline and query.isActive:
            if writer is not None and writer.refused.is_set():
                break
            if not query.status.get("isTriggerActive", False):
                break
            time.sleep(0.05)
        query.stop()


class _SessionStart:
    """The Spark session, started in a thread of its own while the control plane works (a
    session built outside the main thread also leaves the mirror's SIGINT handler alone)."""

    def __init__(self, conf: Mapping[str, str]) -> None:
        self._spark: Any = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._build, args=(dict(conf),),
                                        name="spark-session-start", daemon=True)
        self._thread.start()

    def _build(self, conf: dict[str, str]) -> None:
        try:
            self._spark = build_session(conf)
        except BaseException as exc:
            self._error = exc

    def session(self) -> Any:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._spark

    def discard(self) -> None:
        """Stop the session once it started (the mirror did not get as far as using it)."""
        self._thread.join()
        if self._spark is not None:
            self._spark.stop()


def _partitions(assignment: Mapping[str, int]) -> list[tuple[str, int]]:
    """Every (topic, partition) of an assignment (topic to partition count), in order."""
    return [(topic, p) for topic, count in sorted(assignment.items()) for p in range(count)]


def _stopped_for_good(runners: Mapping[str, FlowRunner]) -> MirrorError:
    return MirrorError(
        "every flow stopped for good: "
        + "; ".join(f"{r.flow.name}: {_first_line(r.failed or '')}" for r in runners.values())
    )


class _Listener:
    """Routes Spark's progress events to the batch hooks of the flow they belong to."""

    def __init__(self, runners: Mapping[str, FlowRunner], hooks: Sequence[BatchHook]) -> None:
        self.runners = runners
        self.hooks = hooks

    def progress(self, progress: Any) -> None:
        runner = self.runners.get(progress.name)
        if runner is None or not progress.sources:
            return
        writer = runner.writers.get(str(progress.runId))
        if runner.flow.realtime:
            # the drains report a real-time flow's progress; a batch end adds its count
            duration = float(getattr(progress, "batchDuration", 0) or 0) / 1000.0
            runner.drain_copies(writer, ended=(int(progress.batchId), duration))
            return
        row = observed_row(progress, OBSERVATION)
        records, size = int(row.get("records") or 0), int(row.get("bytes") or 0)
        written = (
            writer.completed(int(progress.batchId), records, size)
            if isinstance(writer, BatchWriter) else None
        )
        if written is not None:
            run_write_hooks(runner.hooks, written)
        event = event_from_progress(runner.flow, progress, written, row)
        run_hooks(self.hooks, event)


def _spark_listener(listener: _Listener) -> Any:
    from pyspark.sql.streaming.listener import StreamingQueryListener

    class SparkListener(StreamingQueryListener):
        def onQueryStarted(self, event: Any) -> None:
            pass

        def onQueryProgress(self, event: Any) -> None:
            listener.progress(event.progress)

        def onQueryIdle(self, event: Any) -> None:
            pass

        def onQueryTerminated(self, event: Any) -> None:
            pass

    return SparkListener()


class Mirror:
    """Runs a :class:`MirrorConfig` until stopped."""

    def __init__(
        self,
        config: MirrorConfig,
        state_dir: Path,
        cli_spark_conf: Mapping[str, str] | None = None,
        jars_dir: Path | None = None,
        connect_timeout: float = 30.0,
    ) -> None:
        self.config = config
        self.metrics = MirrorMetrics() if config.metrics is not None else None
        self.status = MirrorStatus(self.metrics) if self.metrics is not None else None
        self.state_dir = state_dir
        self.cli_spark_conf = dict(cli_spark_conf or {})
        self.jars_dir = jars_dir
        self.connect_timeout = connect_timeout

    def connect(self) -> dict[str, ClusterAdmin]:
        """One admin per cluster a flow or a heartbeat uses; fails, naming the cluster, within
        the timeout."""
        used = {f.source.alias for f in self.config.flows} | {
            f.target.alias for f in self.config.flows
        }
        used |= {h.target.alias for h in self.config.heartbeats}
        admins = {alias: ClusterAdmin(self.config.clusters[alias]) for alias in sorted(used)}
        for admin in admins.values():
            admin.wait_ready(self.connect_timeout)
        return admins

    def control_plane(
        self, runners: Mapping[str, FlowRunner], admins: Mapping[str, ClusterAdmin]
    ) -> tuple[list[Periodic], list[GroupCheckpointer], list[HeartbeatEmitter]]:
        """Create the internal topics, then the periodic tasks: checkpoints, group offset sync,
        ACL sync, heartbeats, and saving the translation ranges."""
        tasks: list[Periodic] = []
        checkpointers: list[GroupCheckpointer] = []
        for runner in runners.values():
            flow = runner.flow
            runner.start_control()
            tasks.append(Periodic(f"{flow.name} ranges", 10.0, runner.save_ranges, 10.0))
            if flow.syncs.emit_checkpoints:
                checkpointer = GroupCheckpointer(flow, runner.source, runner.target, runner.ranges)
                checkpointer.start()
                checkpointers.append(checkpointer)
                tasks.append(Periodic(f"{flow.name} checkpoints", flow.syncs.checkpoints_interval,
                                      self._checkpoint_round(checkpointer),
                                      flow.syncs.checkpoints_interval))
                if flow.syncs.refresh_groups:
                    tasks.append(Periodic(f"{flow.name} groups",
                                          flow.syncs.refresh_groups_interval,
                                          checkpointer.refresh_groups,
                                          flow.syncs.refresh_groups_interval))
                if flow.syncs.sync_group_offsets:
                    interval = flow.syncs.sync_group_offsets_interval
                    tasks.append(Periodic(f"{flow.name} group offsets", interval,
                                          self._group_sync_round(checkpointer), interval))
            if flow.syncs.sync_topic_acls:
                acls = AclSync(flow, runner.source, runner.target)
                tasks.append(Periodic(f"{flow.name} ACLs", flow.syncs.sync_topic_acls_interval,
                                      acls.run))
        emitters = []
        for spec in self.config.heartbeats:
            delivered = None
            if self.metrics is not None:
                self.metrics.register_heartbeats(spec)
                delivered = partial(self.metrics.heartbeat_delivered, spec)
            emitter = HeartbeatEmitter(spec, admins, delivered)
            emitter.start()
            emitters.append(emitter)
            tasks.append(Periodic(f"{spec.name} heartbeats", spec.interval, emitter.beat))
        return tasks, checkpointers, emitters

    def _checkpoint_round(self, checkpointer: GroupCheckpointer) -> Callable[[], None]:
        """One checkpoint round, reported to the metrics when it succeeded."""
        def emit() -> None:
            checkpointer.emit()
            if self.metrics is not None:
                self.metrics.checkpoints_emitted(checkpointer.flow,
                                                 checkpointer.groups_checkpointed)
        return emit

    def _group_sync_round(self, checkpointer: GroupCheckpointer) -> Callable[[], None]:
        """One group offset sync round, reported to the metrics when it succeeded."""
        def sync() -> None:
            outcome = checkpointer.sync_group_offsets()
            if self.metrics is not None:
                self.metrics.group_offsets_synced(checkpointer.flow, outcome.synced)
        return sync

    def run(self, stop: threading.Event) -> None:
        """Mirror until ``stop`` is set (or every flow stopped for good), serving the metrics
        endpoint meanwhile when it is configured."""
        server = None
        if self.config.metrics is not None and self.metrics is not None and self.status:
            server = MetricsServer(self.config.metrics, self.metrics, self.status).start()
        try:
            self._run(stop)
        finally:
            if server is not None:
                server.stop()

    def _beat(self, runners: Mapping[str, FlowRunner]) -> None:
        if self.metrics is None or self.status is None:
            return
        self.status.beat()
        for runner in runners.values():
            self.metrics.set_state(runner.flow, runner.phase())

    def _run(self, stop: threading.Event) -> None:
        for notice in self.config.notices:
            log.warning("%s", notice)
        for flow in self.config.flows:
            for warning in durability_warnings(flow):
                log.warning("%s", warning)
        conf = spark_conf(
            self.config.spark_conf, self.cli_spark_conf, connector_jars(self.jars_dir),
            # the plugin also brings real-time mode's copied ranges from executors
            latency_plugin=self.metrics is not None or any(f.realtime for f in self.config.flows),
        )
        # an unreachable Spark master fails before any cluster is touched
        wait_for_master(conf, self.connect_timeout)
        class_data = ClassData(self.config.class_data_dir or self.state_dir / CLASS_DATA_DIR) \
            if self.config.class_data_sharing else None
        if class_data is not None:
            conf = class_data.spark_conf(conf)
        admins = self.connect()
        # the clusters answer and their client settings hold: the driver's JVM starts while
        # the control plane works (real-time flows first size local mode by their partitions)
        early = None if any(f.realtime for f in self.config.flows) else _SessionStart(conf)
        tasks: list[Periodic] = []
        try:
            runners = {
                flow.path_name: FlowRunner(flow, self.state_dir, admins, self.config.raw,
                                           self.metrics)
                for flow in self.config.flows
            }
            for runner in runners.values():
                runner.peers = runners
            # internal topics first (a heartbeats topic is mirrored like any topic), then the
            # topic sync: problems surface before the first query starts
            tasks, checkpointers, emitters = self.control_plane(runners, admins)
            initial = {name: runner.sync_topics() for name, runner in runners.items()}
            for name, runner in runners.items():
                runner.check_resume(initial[name])
            if all(runner.failed is not None for runner in runners.values()):
                raise _stopped_for_good(runners)
            for task in tasks:
                task.start()
            realtime = [n for n, r in runners.items() if r.flow.realtime and r.failed is None]
            if early is not None:
                spark = early.session()
            else:
                spark = build_session(realtime_master(
                    conf, sum(sum(initial[n].values()) for n in realtime)) if realtime else conf)
        except BaseException:
            for task in tasks:
                task.stop()
            if early is not None:
                early.discard()
            raise
        if class_data is not None:
            class_data.started(spark)
        lag = LagCommitter()
        lag_flush = Periodic("lag commits", 1.0, lag.flush_due, 1.0).start()
        hooks: list[BatchHook] = [ProgressReporter(), lag]
        if self.metrics is not None:
            hooks.append(self.metrics)
            self.metrics.read_topic_latency(partial(topic_latency_text, spark))
        for runner in runners.values():
            runner.acked.moved = lag.advance
            runner.progress_hooks = hooks
        spark.streams.addListener(_spark_listener(_Listener(runners, hooks)))
        try:
            for name, runner in runners.items():
                if runner.failed is None:
                    try:
                        runner.follow(spark, initial[name])
                    except (SkipNotKnown, TopicIdsUnknown) as exc:  # retried by tick()
                        runner.failed_attempt(exc, time.monotonic())
            self._beat(runners)
            while not stop.wait(1.0):
                for runner in runners.values():
                    runner.tick(spark)
                self._beat(runners)
                if all(runner.failed is not None for runner in runners.values()):
                    raise _stopped_for_good(runners)
        finally:
            log.info("stopping")
            for runner in runners.values():  # all flows finish their batch at once
                runner.begin_stop()
            for runner in runners.values():
                runner.stop()
            for task in tasks:
                task.stop()
            for checkpointer in checkpointers:
                try:  # the newest positions, for consumers that fail over after this stop
                    checkpointer.emit()
                except Exception as exc:
                    log.warning("last checkpoints of %s not written: %s",
                                checkpointer.flow.name, exc)
                checkpointer.close()
            for emitter in emitters:
                emitter.close()
            for runner in runners.values():
                runner.save_ranges()
                if runner.offset_syncs is not None:
                    runner.offset_syncs.close()
                if runner.target_offsets is not None:
                    runner.target_offsets.close()
            lag_flush.stop()
            lag.close()
            if class_data is not None:
                class_data.stop()
            spark.stop()
            log.info("stopped")
