"""One flow's lifecycle: its query started, followed as its topics change, restarted after a
failure (with backoff) and stopped between batches."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from functools import partial
from pathlib import Path
from typing import Any

from kafka_mirror.config.model import FlowSpec
from kafka_mirror.control.lease import FlowLease, lease_names, member_id
from kafka_mirror.control.offset_syncs import OffsetSyncsReader, OffsetSyncWriter
from kafka_mirror.control.topics import TopicSync
from kafka_mirror.engine.acked_positions import FILE as ACKED_FILE
from kafka_mirror.engine.acked_positions import AckedPositions
from kafka_mirror.engine.batch_writer import BatchWriter, BatchWritten, WriteHook
from kafka_mirror.engine.exactly_once import TARGET_ENDS_FILE, TargetEnds
from kafka_mirror.engine.flow_query import start_query, warm_frame
from kafka_mirror.engine.jvm_admin import JvmAdmin
from kafka_mirror.engine.jvm_offsets import JvmEndOffsets
from kafka_mirror.engine.leader_epochs import (
    JvmLeaderEpochs,
    TruncatedRange,
    UncleanElections,
    consumer_truncations,
    skip_notice,
    stop_reason,
)
from kafka_mirror.engine.positions import (
    FlowState,
    Positions,
    TopicIdsUnknown,
    ids_to_record,
    recreated_topics,
    starting_offsets,
)
from kafka_mirror.engine.py4j_connections import close_idle_callback_connections
from kafka_mirror.engine.quiet_stop import MICRO_BATCH_STOP_NOISE, stop_quietly
from kafka_mirror.engine.realtime import RealTimeWriter, new_run_key, realtime_groups
from kafka_mirror.engine.write_gate import WriteGate
from kafka_mirror.errors import MirrorError, first_line, reason
from kafka_mirror.kafka.admin import ClusterAdmin
from kafka_mirror.kafka.clients import admin_properties, spark_sink_options
from kafka_mirror.mm2.offsets_records import mm2_offsets_topic
from kafka_mirror.observability.null_metrics import Metrics
from kafka_mirror.runtime.exactly_once_restart import ExactlyOnceRestart, SkipNotKnown, keeps_prefix
from kafka_mirror.runtime.failures import (
    error_kind,
    failed_for_good,
    permanent_failure,
    query_error_line,
)
from kafka_mirror.runtime.planning_watch import PlanningWatch
from kafka_mirror.runtime.realtime_flow import RealTimeEnds, RealTimeFlow, StartNotRecorded
from kafka_mirror.runtime.restarts import (
    LATE_WRITES,
    RECORD_SIZE,
    TOPIC_RECREATED,
    TOPICS_CHANGED,
    restart_decision,
    retry_delay,
)
from kafka_mirror.runtime.resume import ResumePlanner
from kafka_mirror.runtime.standby import StandbyWarmUp, on_thread
from kafka_mirror.runtime.start_phases import StartPhases
from kafka_mirror.state.kept_positions import KeptPositions
from kafka_mirror.state.offset_ranges import OffsetRanges
from kafka_mirror.state.source_epochs import FILE as SOURCE_EPOCHS_FILE
from kafka_mirror.state.source_epochs import SourceEpochs

log = logging.getLogger(__name__)
STOP_GRACE_SECONDS = 15.0
# how many leases the first start waits for the lease's first step (its own reads and the
# claim's calls are bounded by about five)
LEASE_SETTLE_LEASES = 6
# what Kafka's Java clients call a topic (or partition) the cluster does not have
UNKNOWN_TOPIC = "UnknownTopicOrPartitionException"
Writer = BatchWriter | RealTimeWriter


class RangeKeeper:
    """Batch-writer hook: remembers where each batch landed, for offset translation."""

    def __init__(self, ranges: OffsetRanges) -> None:
        self.ranges = ranges

    def on_written(self, event: BatchWritten) -> None:
        for copy in event.copies:
            self.ranges.add(copy.topic, copy.partition, copy.copied)


class FlowRunner:
    """One flow's query, restarted on a fresh checkpoint generation when its topics change."""

    def __init__(self, flow: FlowSpec, state_root: Path, admins: Mapping[str, ClusterAdmin],
                 raw_config: Mapping[str, str], metrics: Metrics, with_latency: bool) -> None:
        """``with_latency``: the queries measure replication latency (metrics are served)."""
        self.flow = flow
        self.metrics = metrics
        self.with_latency = with_latency
        metrics.register(flow)
        self.state = FlowState(state_root / flow.path_name)
        self.source = admins[flow.source.alias]
        self.target = admins[flow.target.alias]
        self.topics = TopicSync(flow, self.source, self.target,
                                partial(metrics.topics_changed, flow))
        self.ranges_path = self.state.flow_dir / "offset-ranges.json"
        self.ranges = OffsetRanges.load(self.ranges_path)
        # one writer per flow: the lease in Kafka, and the gate the source's readers ask
        lease_key, transactional_id = lease_names(flow.lag_group_id)
        self.gate = WriteGate(flow.path_name)
        self.lease = (
            FlowLease(flow.name, transactional_id, flow.target, self.target,
                      flow.lease_ms, member=member_id(str(state_root.resolve())),
                      key=lease_key,
                      selects=f"{','.join(flow.topic_filter.include)} excluding "
                              f"{','.join(flow.topic_filter.exclude)}",
                      on_held=self.gate.hold_until)
            if flow.lease_ms > 0 else None
        )
        # what an instance that lost the lease drains late (real-time mode) is no sync: it would
        # come after its successor's in the topic
        may_write = None if self.lease is None else self.lease.held
        self.offset_syncs = (
            OffsetSyncWriter(flow, admins, partial(metrics.offset_syncs_written, flow),
                             may_write)
            if flow.syncs.emit_offset_syncs else None
        )
        self.hooks: list[WriteHook] = [RangeKeeper(self.ranges)]
        if self.offset_syncs is not None:
            self.hooks.append(self.offset_syncs)
        self.target_ends = (
            TargetEnds(self.state.flow_dir / TARGET_ENDS_FILE)
            if flow.exactly_once_target and keeps_prefix(flow) else None
        )
        # the source's leader epochs, against unclean leader elections
        self.source_epochs = SourceEpochs(self.state.flow_dir / SOURCE_EPOCHS_FILE)
        self.unclean: UncleanElections | None = None
        # the positions and target ends after them, kept in Kafka on the target (with exactly
        # once: what a restart on another host proves its start from)
        self.kept = (
            KeptPositions(flow.target, mm2_offsets_topic(raw_config, flow.source.alias,
                                                         flow.target.alias),
                          flow.source.alias, self.target, flow.positions_interval_ms,
                          replication_factor=flow.positions_replication_factor,
                          partitions=flow.positions_partitions)
            if flow.positions_in_kafka and self.target_ends is not None else None
        )
        self._read_kept = True  # the positions kept in Kafka are read at the next start
        # real-time mode resumes after the last record the target acknowledged; with exactly
        # once, the target's end there is recorded first (and kept in Kafka while this
        # instance holds the lease)
        self.acked = AckedPositions(self.state.flow_dir / ACKED_FILE)
        ends = (RealTimeEnds(flow, self.target_ends, self.kept,
                             partial(getattr, self, "started_ids"), may_write)
                if flow.realtime and self.target_ends is not None else None)
        if flow.realtime:
            self.hooks += [ends, self.acked] if ends is not None else [self.acked]
        self.realtime = RealTimeFlow(flow, self.source, self.acked, self.hooks, ends)
        self._standing_by = False
        self.warm_up = StandbyWarmUp(flow.name, on_thread(f"standby {flow.name}"))
        self.resume = ResumePlanner(flow, self.source, self.state, self.ranges, self.acked,
                                    self.target_ends, self.save_ranges, dict(raw_config),
                                    epochs=self.source_epochs, kept=self.kept,
                                    read_syncs=OffsetSyncsReader(flow))
        self.exactly_once = (
            ExactlyOnceRestart(flow, self.source, self.target_ends, self.hooks,
                               self.save_ranges, metrics)
            if self.target_ends is not None else None
        )
        # the batch writer of the query started last (did its last write end normally?)
        self.last_writer: Writer | None = None
        self.query: Any = None
        # per query run (progress events of a stopped run can still arrive after a restart)
        self.writers: dict[str, Writer] = {}
        # the running query's (its run's entry in writers: no py4j call for its run id)
        self._query_writer: Writer | None = None
        # the other flows of the process (real-time ones hold task slots), and the lock under
        # which real-time flows count the free slots and take theirs (flows start in parallel)
        self.peers: Mapping[str, FlowRunner] = {}
        self.slots: threading.Lock = threading.Lock()
        # the process is stopping: no query starts any more (set before the flows stop)
        self.closing = False
        self._query_lock = threading.Lock()  # a query started or taken for a stop
        self.groups = 0
        self.assignment: dict[str, int] = {}
        self.next_refresh = 0.0
        self.planning = PlanningWatch()  # micro-batch mode: a query asking for offsets long
        self.failures = 0
        self.retry_at = 0.0
        self.failed: str | None = None  # why the flow stopped for good
        self.restarting = False  # a restart (stop, resume planning, start) is under way
        self.target_offsets: JvmEndOffsets | None = None
        # the largest max.message.bytes among the source topics: wanted, and the running
        # query's (its producer's max.request.size follows it)
        self.largest_batch = 0
        self.started_largest_batch = 0
        # source topic IDs: now, and those the running query started with
        self.topic_ids: dict[str, str] = {}
        self.started_ids: dict[str, str] = {}
        self._ids_warned = False  # the source cluster has no topic IDs (reported once)
        # the last read of the IDs: what it found (None: the cluster has none) or why it failed
        self._ids_read: dict[str, str] | str | None = {}

    def start_control(self) -> None:
        """Internal topics the flow writes exist before any batch runs; the flow's lease is
        taken, or watched, from now on (its first step runs meanwhile: :meth:`check_resume`
        waits for it)."""
        if self.offset_syncs is not None:
            self.offset_syncs.start()
        if self.lease is not None:
            self.lease.start()

    @property
    def active(self) -> bool:
        """Whether this instance writes the flow (it holds its lease, or the flow has none)."""
        return self.lease is None or self.lease.holds

    @property
    def translates(self) -> bool:
        """Whether this instance writes the flow and its offset translation is the flow's: a
        query started since it took the lease (from the positions the previous writer kept in
        Kafka, which the translation then covers) and the offset syncs the previous writer
        wrote were read in (:meth:`ResumePlanner.rebuilt`)."""
        return self.active and not self._read_kept and self.resume.rebuilt.is_set()

    def _may_write(self) -> bool:
        """:attr:`active`, with the change reported once."""
        if self.active:
            if self._standing_by:
                self._standing_by = False
                self.next_refresh = 0.0  # the query starts at this tick
                self._read_kept = True  # where the previous holder left the flow
                log.info("flow %s: this instance holds the lease now (epoch %d): mirroring",
                         self.flow.name, self.lease.epoch if self.lease else 0)
            return True
        if not self._standing_by:
            self._standing_by = True
            held = self.lease.describe() if self.lease else {}
            log.info("flow %s: standing by: the lease is held by %s (epoch %s); this instance "
                     "takes the flow over when it lapses", self.flow.name,
                     held.get("holder") or "another instance", held.get("epoch"))
        return False

    def sync_topics(self) -> dict[str, int]:
        """Bring the target topics in line; return the source partitions to mirror."""
        plans = self.topics.sync()
        self.largest_batch = max((p.source_max_message_bytes or 0 for p in plans), default=0)
        self.next_refresh = time.monotonic() + self.flow.refresh_interval_seconds
        assignment = {p.source_topic: p.partitions for p in plans}
        self.topic_ids = self._source_topic_ids(sorted(assignment))
        log.debug("flow %s: topics refreshed: %d topics, %d partitions", self.flow.name,
                  len(assignment), sum(assignment.values()))
        return assignment

    def _source_topic_ids(self, topics: list[str]) -> dict[str, str]:
        """The source topics' IDs (none when the cluster has none, or when they could not be
        read this time: the running query goes on and a re-creation is found at the next
        read, but no query starts; see ``ids_to_record``)."""
        # once the flow's Java admin client of the source is open, through it: librdkafka's
        # Python client makes an object of every partition and replica it describes (at 2,000
        # partitions refreshed every 5 s, a third of an idle mirror's Python CPU)
        reader: ClusterAdmin | JvmAdmin = self.source
        if self.unclean is not None and isinstance(self.unclean.reader, JvmAdmin):
            reader = self.unclean.reader
        try:
            ids = reader.topic_ids(topics)
        except Exception as exc:
            self._ids_read = reason(exc)
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

    def first_start(self, spark: Any, assignment: dict[str, int]) -> None:
        """The flow's first query (a start that must wait for what the target holds, or for
        its topics' IDs, is retried by :meth:`tick`)."""
        if self.failed is not None or not self._may_write():
            return
        try:
            self.follow(spark, assignment)
        except (SkipNotKnown, StartNotRecorded, TopicIdsUnknown) as exc:
            self.failed_attempt(exc, time.monotonic())

    def follow(self, spark: Any, assignment: dict[str, int]) -> None:
        """(Re)start the query when the partitions to mirror changed."""
        recreated = recreated_topics(self.started_ids, self.topic_ids)
        decision = restart_decision(self.assignment, assignment, self.query is not None,
                                    self.failures, sorted(recreated), self.largest_batch,
                                    self.started_largest_batch)
        if decision is None:
            return
        if decision.reason == TOPICS_CHANGED:
            log.info("flow %s: topics or partitions changed; restarting", self.flow.name)
        elif decision.reason == TOPIC_RECREATED:
            log.info("flow %s: source topics deleted and created again (%s); restarting",
                     self.flow.name, ", ".join(recreated))
        elif decision.reason == RECORD_SIZE:
            log.info("flow %s: a source topic now accepts records up to %d bytes; restarting "
                     "with a producer that sends them", self.flow.name, self.largest_batch)
        self._restart(spark, assignment, decision.reason)

    def _restart(self, spark: Any, assignment: dict[str, int], reason: str | None) -> None:
        """Stop the running query and start one for ``assignment``; while it is under way (the
        batch being written finishes, a cut batch's records on the target are found) the flow
        reports ``restarting``, which the health endpoint tells apart from a stuck mirror."""
        if reason is None:
            self._start(spark, assignment, reason)
            return
        self.restarting = True
        self.metrics.set_state(self.flow, "restarting")
        try:
            self._start(spark, assignment, reason)
        finally:
            self.restarting = False

    def _start(self, spark: Any, assignment: dict[str, int], reason: str | None) -> None:
        if self.closing:
            return
        self.stop()
        self.assignment = assignment
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
        ids = self.resume.drop_departed(assignment, ids)
        phases = StartPhases()
        known, go = self._start_positions(spark, assignment, phases)
        if not go:
            return
        start = starting_offsets(assignment, known, self.flow.starting_offsets)
        with self.slots if self.flow.realtime else nullcontext():
            groups = None
            if self.flow.realtime:
                others = [peer for peer in self.peers.values() if peer is not self]
                # micro-batch flows' tasks need a slot the real-time queries leave free
                taken = sum(peer.realtime_slots for peer in others) + any(
                    not peer.flow.realtime for peer in others)
                groups = realtime_groups(self.flow, assignment,
                                         int(spark.sparkContext.defaultParallelism), taken,
                                         os.cpu_count() or 1)
            if self.closing or not self.active:  # the process stops, or the lease went
                return
            checkpoint = self.state.new_generation(ids)
            self.started_ids = ids
            self.state.prune(keep=checkpoint)
            # once recounted, late records are reported only (another writer's would refuse
            # every batch otherwise)
            self._start_query(spark, assignment, start, checkpoint, groups,
                              recount=reason != LATE_WRITES, phases=phases)
            if self.query is not None:
                self._read_kept = False

    def _start_positions(self, spark: Any, assignment: dict[str, int], phases: StartPhases
                         ) -> tuple[Positions | None, bool]:
        """Where the query starts (None: Spark's default), and whether it starts at all (not
        when records it has not mirrored were deleted and the flow stops for good)."""
        known = self.resume.resume_positions(self.topic_ids)
        phases.mark("state dir")
        resumed = known is not None
        # past the last committed batch (or with no local state at all): the positions kept
        # in Kafka, whose target ends the exactly-once restart proves from. Read until a query
        # started (the state dir may be empty, or older than Kafka's), not at every restart
        # after that: this process wrote whatever is newer itself
        if self._read_kept:
            kept = self.resume.with_kept_positions(known, assignment, self.topic_ids)
            if kept is not known:
                known, resumed = kept, True
            phases.mark("kept positions")
        if known is None:
            known = self.resume.takeover_positions(assignment)
            phases.mark("takeover positions")
        if known and not self._check_data_loss(known, assignment):
            return known, False
        phases.mark("log starts")
        if resumed and known and not self.flow.realtime and \
                not self._check_unclean(spark, known, assignment):
            return known, False
        phases.mark("leader epochs")
        offsets = self._target_offsets(spark)
        phases.mark("target client")
        if known and self.flow.realtime:
            known = self.realtime.proof_positions(known)
        # a first run from the log start whose first batch was cut resumes like the rest
        first = known is None and self.flow.starting_offsets == "earliest"
        if self.exactly_once is not None and ((resumed and bool(known)) or first):
            checked = known or {}
            try:
                known = self.exactly_once.skip_written(spark, checked, assignment,
                                                       offsets, self.last_writer, phases)
            except Exception as exc:
                raise SkipNotKnown(
                    f"what the target already holds of the batch cut short was not determined "
                    f"({reason(exc)}); not restarting yet") from exc
            # partitions no batch committed resume where their cut batch left them: records
            # deleted past that were never mirrored either
            fresh = {tp: offset for tp, offset in known.items() if tp not in checked}
            if fresh and not self._check_data_loss(fresh, assignment):
                return known, False
        if self.flow.realtime:
            known = self.realtime.start_positions(
                known, assignment, partial(offsets.end_offsets, timeout=30.0))
        self.resume.forget_read_ahead()
        return known, True

    def _check_unclean(self, spark: Any, known: Positions, assignment: dict[str, int]) -> bool:
        """False when an unclean leader election on the source took records below the positions
        the flow resumes at out of its log and ``mirror.fail.on.data.loss`` holds: the flow
        then stops for good, naming them (otherwise they are reported)."""
        positions = {tp: offset for tp, offset in known.items()
                     if tp[1] < assignment.get(tp[0], 0)}
        try:
            lost = self._unclean(spark).check_resume(positions)
        except Exception as exc:
            log.warning("flow %s: the source's leader epochs were not read (%s); the next batch "
                        "checks them", self.flow.name, reason(exc))
            return True
        if self._goes_on(lost):
            return True
        self._fail_for_good(stop_reason(self.flow.source.alias, lost))
        return False

    def _goes_on(self, lost: list[TruncatedRange]) -> bool:
        """Whether the flow goes on after ``lost`` (none, or ``mirror.fail.on.data.loss=false``:
        reported)."""
        if lost and not self.flow.fail_on_data_loss:
            log.warning("flow %s: %s", self.flow.name, skip_notice(self.flow.source.alias, lost))
        return not lost or not self.flow.fail_on_data_loss

    def _check_running_source(self, spark: Any) -> None:
        """Real-time mode: the running query's source checked for unclean leader elections
        (micro-batch mode checks around every batch instead)."""
        try:
            lost = self.realtime.check_source(self._unclean(spark), self.assignment)
        except Exception as exc:
            log.debug("flow %s: the source's leader epochs were not read (%s)", self.flow.name,
                      reason(exc))
            if UNKNOWN_TOPIC in str(exc):
                # a topic deleted while mirrored: the topics are read again now, not at the
                # next refresh (its consumer fetches it in vain until the query restarts)
                self.next_refresh = 0.0
            return
        if not self._goes_on(lost):
            self._source_lost(stop_reason(self.flow.source.alias, lost))

    def _check_planning(self, now: float) -> None:
        """Micro-batch mode: the topics read again at once when the query has asked the source
        for its offsets for seconds (:mod:`kafka_mirror.runtime.planning_watch`)."""
        try:
            status = self.query.status
        except Exception as exc:
            log.debug("flow %s: the query's status not read (%s)", self.flow.name, reason(exc))
            return
        took = self.planning.overdue(status, now)
        if took is not None:
            log.debug("flow %s: the source's offsets asked for %.0f s; reading the topics again",
                      self.flow.name, took)
            self.next_refresh = 0.0

    def _fail_for_good(self, why: str) -> None:
        self.failed = why
        self.assignment = {}
        log.error("flow %s stopped for good: %s", self.flow.name, why)
        self.metrics.failed(self.flow, "data_loss", why)

    def _unclean(self, spark: Any) -> UncleanElections:
        """The flow's check for unclean leader elections on the source (opened once)."""
        if self.unclean is None:
            reader = JvmLeaderEpochs(spark, admin_properties(self.flow.source))
            self.unclean = UncleanElections(reader, self.source_epochs,
                                            skip_lost=not self.flow.fail_on_data_loss)
        return self.unclean

    def close_unclean(self, timeout: float) -> None:
        """The check's source clients, once opened (teardown, within ``timeout`` seconds)."""
        if self.unclean is not None and isinstance(self.unclean.reader, JvmLeaderEpochs):
            self.unclean.reader.close(timeout)

    def _start_query(self, spark: Any, assignment: dict[str, int], start: str,
                     checkpoint: Path, groups: int | None, recount: bool = True,
                     phases: StartPhases | None = None) -> None:
        phases = phases or StartPhases()
        writer = self._new_writer(spark, assignment, checkpoint, recount)
        phases.mark("writer")
        with self._query_lock:
            if self.closing:  # the process stops: the next start resumes from the same place
                log.info("flow %s: not started (the mirror is stopping)", self.flow.name)
                return
            self.last_writer = writer
            self.realtime.new_run()
            epochs = self._unclean(spark).reader
            if self.flow.realtime and isinstance(epochs, JvmLeaderEpochs):
                self.realtime.read_ends_with(epochs)
            self.started_largest_batch = self.largest_batch
            gated = self.lease is not None and self.gate.attach(spark)
            self.query = start_query(spark, self.flow, assignment, start, checkpoint, writer,
                                     with_latency=self.with_latency, groups=groups,
                                     write_gate=self.gate.key if gated else None)
            self.groups = groups or 0
            for dropped in list(self.writers.values())[:-2]:
                if isinstance(dropped, RealTimeWriter):
                    # acknowledgements that reached an old run's producer after its stop
                    dropped.forget()
            self.writers = {k: v for k, v in list(self.writers.items())[-2:]}
            self.writers[str(self.query.runId)] = writer
            self._query_writer = writer
            if isinstance(writer, BatchWriter):
                query = self.query
                writer.query_active = lambda: bool(query.isActive)
        phases.mark("query")
        log.info(
            "flow %s: mirroring %d topics, %d partitions (checkpoint %s; %s)",
            self.flow.name,
            len(assignment),
            sum(assignment.values()),
            checkpoint,
            phases.describe(),
        )

    def _new_writer(self, spark: Any, assignment: dict[str, int], checkpoint: Path,
                    recount: bool = True) -> Writer:
        """The batch writer of the query about to start."""
        if self.flow.realtime:
            run_key = new_run_key(self.flow)
            writer = RealTimeWriter(
                self.flow, checkpoint,
                spark_sink_options(self.flow, self.largest_batch, latency=self.with_latency,
                                   copies_run=run_key, partitions=sum(assignment.values())),
                run_key, assignment,
            )
            writer.attach(spark)
            return writer
        self.acked.clear()  # micro-batch positions are the committed batches'
        return BatchWriter(
            self.flow, checkpoint,
            spark_sink_options(self.flow, self.largest_batch, latency=self.with_latency,
                               partitions=sum(assignment.values())),
            self._target_offsets(spark), self.target_ends, self._unclean(spark), recount,
            self.kept, self.started_ids, None if self.lease is None else self.lease.wait_held,
        )

    def _target_offsets(self, spark: Any) -> JvmEndOffsets:
        """The reader of the target's end offsets the flow's queries share (opened once)."""
        if self.target_offsets is None:
            self.target_offsets = JvmEndOffsets(spark, admin_properties(self.flow.target))
        return self.target_offsets

    def check_resume(self, assignment: dict[str, int]) -> None:
        """Before Spark starts: records deleted since the last run stop the flow at once (with
        ``mirror.fail.on.data.loss=true``; otherwise the start of the query reports them);
        what the first start reads of Kafka is read while the session starts."""
        if self.lease is not None and not self.lease.settle(LEASE_SETTLE_LEASES * self.lease.lease):
            log.info("flow %s: the lease's first step is still under way; the flow starts "
                     "once it holds the lease", self.flow.name)
        known = self.resume.resume_positions(self.topic_ids)
        if known and self.flow.fail_on_data_loss and not self._check_data_loss(known,
                                                                                assignment):
            return
        if self.active and self._read_kept:  # the first start's reads of Kafka, under way now
            self.resume.read_ahead()

    def _check_data_loss(self, known: Positions, assignment: dict[str, int]) -> bool:
        """False when records the flow has not mirrored yet were deleted on the source and
        ``mirror.fail.on.data.loss`` holds: the flow then stops for good, naming them."""
        failed = self.resume.data_loss(known, assignment)
        if failed is None:
            return True
        self.failed = failed
        self.assignment = {}
        log.error("flow %s stopped for good: %s", self.flow.name, self.failed)
        return False

    def save_ranges(self) -> None:
        self.ranges.save(self.ranges_path)

    @property
    def realtime_slots(self) -> int:
        """Task slots this flow's real-time query holds, one per group (0 in micro-batch
        mode)."""
        if not self.flow.realtime or self.query is None:
            return 0
        return self.groups

    def drain_copies(self, writer: Writer | None = None,
                     ended: tuple[int, float] | None = None) -> None:
        """Real-time mode: what ``writer`` (the running query's by default) had acknowledged
        since the last drain, with the flow's progress (see :meth:`RealTimeFlow.drain`)."""
        self.realtime.drain(writer or self._current_writer(), self.assignment, ended)

    def tick(self, spark: Any) -> None:
        """Keep the flow running: restart a failed query, follow topic changes. Faults (a
        cluster unreachable for minutes, a broker restart) are retried with backoff; a record
        the target refuses for good stops this flow only (restarting would append the same
        batch again and again)."""
        now = time.monotonic()
        if self.failed is not None or now < self.retry_at:
            return
        if not self._may_write():
            if self.query is not None:
                log.warning("flow %s: the lease is not held any more: the query stops (the "
                            "batch being written finishes); standing by", self.flow.name)
                self.stop()
                self.assignment = {}
            self._prepare_standby(spark)
            return
        try:
            writer = self._current_writer()
            if isinstance(writer, BatchWriter) and writer.source_lost is not None:
                self._source_lost(writer.source_lost)
                return
            if isinstance(writer, BatchWriter) and writer.late_writes is not None:
                log.info("flow %s: records reached the target after the flow counted it; "
                         "restarting to count them", self.flow.name)
                self._restart(spark, self.assignment, LATE_WRITES)
                return
            if self.query is not None and not self.query.isActive:
                self._query_ended()
                return
            self.drain_copies()
            refused = writer.failure() if isinstance(writer, RealTimeWriter) else None
            if refused is not None:
                self._send_failed(refused)
                return
            if self.flow.realtime and self.query is not None:
                self._check_running_source(spark)
                if self.failed is not None:
                    return
            elif self.query is not None:
                self._check_planning(now)
            wanted = self.flow.refresh_topics or self.query is None
            if wanted and now >= self.next_refresh:
                self.follow(spark, self.sync_topics())
            if self.failures:
                log.info("flow %s: running again after %d failed attempts", self.flow.name,
                          self.failures)
                self.failures = 0
        except Exception as exc:
            self.failed_attempt(exc, now)

    def _prepare_standby(self, spark: Any) -> None:
        """Once, on a standby (:mod:`kafka_mirror.runtime.standby`): the clients the start opens
        first (the source's leader epochs, the target's end offsets) made here and connected on
        the warm-up's thread; the query's frame built and a made-up row run through its
        projection (:func:`warm_frame`); a record reader of each cluster opened once (a cut
        batch's proof). Read-only."""
        if spark is None:
            return

        def prepare() -> Callable[[], None]:
            unclean, offsets = self._unclean(spark), self._target_offsets(spark)
            return partial(self._warm, spark, unclean, offsets)

        self.warm_up.start(prepare)

    def _warm(self, spark: Any, unclean: UncleanElections, offsets: JvmEndOffsets) -> None:
        if isinstance(unclean.reader, JvmLeaderEpochs):
            unclean.reader.warm()
        offsets.warm()
        assignment = {plan.source_topic: plan.partitions for plan in self.topics.plan()}
        if assignment and not self.closing:
            warm_frame(spark, self.flow, assignment, self.with_latency)
            if self.exactly_once is not None and not self.closing:
                self.exactly_once.warm_readers(spark, min(assignment))

    def _send_failed(self, refused: str) -> None:
        """Real-time mode: the target failed a record the run sent (``refused`` names it), which
        Spark's sink reports only with the task's next record or at the batch's end. The query
        stops (the next run resumes after the last record acknowledged, so nothing is skipped);
        the flow stops for good when the target refuses the record for good, else this is a
        failure a retry may cure (the restart proves what the target got)."""
        self.stop()
        self.assignment = {}
        permanent = permanent_failure(refused)
        if permanent is None:
            raise MirrorError(f"query failed: {refused}")
        self._refused_for_good(refused, permanent, refused)

    def _query_ended(self) -> None:
        """The query stopped by itself: for good when the target refuses a record (the flow
        stops), else raised as a failure a retry may cure."""
        error = str(self.query.exception() or "query terminated")
        writer = self._current_writer()
        if isinstance(writer, RealTimeWriter):
            # the positions below are those of every record the target acknowledged
            writer.settle(STOP_GRACE_SECONDS)
            self.drain_copies(writer)
        self.query = None
        self.assignment = {}
        if self.flow.realtime:  # micro-batch mode finds these before its next batch reads
            lost = consumer_truncations(error, self.acked.positions())
            if not self._goes_on(lost):
                self._fail_for_good(stop_reason(self.flow.source.alias, lost))
                return
        permanent = permanent_failure(error)
        if permanent is None:
            raise MirrorError(f"query failed: {query_error_line(error)}")
        self._refused_for_good(
            failed_for_good(self.flow, error, permanent, writer.checkpoint if writer else None),
            permanent, error)

    def _refused_for_good(self, why: str, permanent: str, error: str) -> None:
        """The target refuses a record for good (``permanent``, in ``error``): the flow stops,
        ``why`` names the records and the reason."""
        self.failed = why
        log.error("flow %s stopped for good (%s): %s", self.flow.name, permanent, first_line(why))
        self.metrics.failed(self.flow, error_kind(error), first_line(why))

    def _source_lost(self, why: str) -> None:
        """The running query's writer found records an unclean leader election took out of the
        source's log (and waits, refusing its batch): the query stops, and the flow for good;
        unless a source topic was deleted and created again (a log that started over), which
        the restart after the stop handles."""
        recreated = self._recreated_since_start()
        self.stop()
        if recreated:
            raise MirrorError("source topics were deleted and created again")
        self._fail_for_good(why)

    def _recreated_since_start(self) -> bool:
        """A source topic of the running query has another ID now (a log that started over is
        not an unclean election: the restart mirrors the new topic from its start)."""
        ids = self._source_topic_ids(sorted(self.started_ids))
        return bool(recreated_topics(self.started_ids, ids))

    def failed_attempt(self, exc: Exception, now: float) -> None:
        """A failure a retry may cure: counted, reported, retried with backoff."""
        self.failures += 1
        # a call into the JVM that failed as its Java exception's own line, not py4j's
        line = reason(exc)
        self.metrics.failed(self.flow, error_kind(str(exc)), line)
        delay = retry_delay(self.failures)
        self.retry_at = now + delay
        log.warning("flow %s: %s; retrying in %.0f s (attempt %d)", self.flow.name, line,
                    delay, self.failures)

    def phase(self) -> str:
        """starting, running, restarting (a new query under way), retrying (after a failure,
        with backoff), failed (for good) or standby (another instance holds the flow's
        lease)."""
        if self.failed is not None:
            return "failed"
        if not self.active:
            return "standby"
        if self.restarting:
            return "restarting"
        if self.failures:
            return "retrying"
        return "running" if self.query is not None and self.query.isActive else "starting"

    def begin_stop(self) -> None:
        """No new batch starts writing from now on (the one writing finishes)."""
        writer = self._current_writer()
        if writer is not None:
            writer.stopping.set()

    def cut_writes_short(self) -> None:
        """The process stops: the drains' writes of offset syncs and positions waiting on a
        cluster that does not answer end within 2 s, and later ones wait no longer (the
        upkeep's drain, waiting 30 s on them, held the whole stop's budget). Their closers wait
        what is left of it."""
        if self.offset_syncs is not None:
            self.offset_syncs.cut_short()
        if self.kept is not None:
            self.kept.cut_short()

    def _current_writer(self) -> Writer | None:
        if self.query is None:
            return None
        return self._query_writer

    def stop(self) -> None:
        """Stop between batches: the batch being written finishes, the next is refused (and
        read again on the next start); past the grace period the query is interrupted."""
        self.begin_stop()
        with self._query_lock:
            writer = self._current_writer()
            query, self.query = self.query, None
        if query is None:
            return
        if isinstance(writer, RealTimeWriter):
            # no wait for the real-time batch's end: the next run resumes after the last
            # record the target acknowledged (AckedPositions), once the stopped query's tasks
            # ended and its producer delivered what they had sent
            writer.stop_quietly(query)
            if not writer.settle(STOP_GRACE_SECONDS):
                log.warning("flow %s: the stopped query's tasks did not end, or records they "
                            "sent were not acknowledged, within %.0f s; the next start waits "
                            "until the target's end offsets stand still", self.flow.name,
                            STOP_GRACE_SECONDS)
            self.drain_copies(writer)
            writer.forget()
            self._close_callback_connections()
            return
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        while time.monotonic() < deadline and query.isActive:
            if writer is not None and (writer.refused.is_set() or not writer.in_batch.is_set()):
                break  # no batch is being written (Spark may be planning one, or asking the
                # source for its offsets: a topic just deleted keeps that waiting)
            if not query.status.get("isTriggerActive", False):
                break
            time.sleep(0.05)
        from pyspark import SparkContext

        stop_quietly(SparkContext._jvm, query, MICRO_BATCH_STOP_NOISE)
        self._close_callback_connections()

    def _close_callback_connections(self) -> None:
        """The stopped query's py4j connection (its stream thread ran ``foreachBatch``) and
        the other idle ones closed (:mod:`kafka_mirror.engine.py4j_connections`)."""
        from pyspark import SparkContext

        gateway = SparkContext._gateway
        if gateway is None:
            return
        try:
            closed = close_idle_callback_connections(gateway)
        except Exception as exc:
            log.debug("flow %s: py4j callback connections not closed (%s)", self.flow.name,
                      reason(exc))
            return
        log.debug("flow %s: %d idle py4j callback connections closed", self.flow.name, closed)
