"""Prometheus metrics of a running mirror (``prometheus_client``), fed by its batches and flows.

Names follow Prometheus' conventions (base units, ``_total`` counters); README's "Metrics"
section maps each to MirrorMaker 2's JMX metric. Replication latency is measured per record
without Python touching records: each batch's ``observe()`` counts, in the JVM, how many records
are at most so old at the batch's start (:data:`AGE_GRID_MS`), with their mean and oldest
timestamp; when the batch has committed (it is on the target), the age each record had at that
moment is its age at the batch's start plus the batch's run time. Histogram buckets are then
filled from the grid conservatively: a record counts in a bucket only when it surely belongs.
Per target topic, the producer interceptor measures each record's latency when the target
acknowledged it, in the JVM (``io.kafkamirror.LatencyRegistry``), read when scraped.

Lag in seconds comes from the end offsets progress events already carry
(:mod:`kafka_mirror.observability.lag_time`); the control plane's outputs (checkpoints, offset
syncs, heartbeats, group offset sync, topic changes on the target) report here as they succeed. A
flow gets those series only for the features it has enabled, so that alerts never fire on a
disabled one.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from kafka_mirror.config.model import FlowSpec, HeartbeatSpec
from kafka_mirror.engine.batches import BatchCommitted
from kafka_mirror.observability.lag_time import FlowLagClock
from kafka_mirror.observability.latency import (
    FLOW_LABELS,
    FlowHistograms,
    LatencyCollector,
    TopicLatencyCollector,
)

FLOW_STATES = ("starting", "running", "restarting", "retrying", "failed", "standby")
# this instance's part in a flow: it writes it (holds its lease, or the flow has none), or not
FLOW_ROLES = ("active", "standby")
RESTART_REASONS = ("topics_changed", "topic_recreated", "record_size", "failure")
ERROR_KINDS = ("unreachable", "authorization", "record_rejected", "data_loss", "other")
PARTITION_LABELS = (*FLOW_LABELS, "topic", "partition")
# what a flow changes on the target's topics (kafka_mirror.control.topics.TopicSync reports them)
TOPIC_CHANGES = ("topics_created", "partitions_added", "topic_config_syncs")


@dataclass
class FlowHealth:
    """What readiness and ``kafka-mirror status`` need of one flow."""

    state: str = "starting"
    state_since: float | None = None  # wall clock of the last change of state
    records: int = 0
    bytes: int = 0
    lag: int | None = None
    lag_seconds: float | None = None  # the partition furthest behind, when last reported
    last_batch: float | None = None  # wall clock of the last batch that moved records
    last_progress: float | None = None  # wall clock of the last progress event (idle too)
    restarts: int = 0
    errors: int = 0
    last_error: str | None = None
    rate: float = 0.0
    role: str = "active"
    # the flow's lease (None: mirror.lease.ms = 0): epoch, holder, lease_age_seconds,
    # members_live, members_lost (kafka_mirror.control.lease.FlowLease.describe)
    lease: dict[str, Any] | None = None


class MirrorMetrics:
    """Every metric of one mirror process, in a registry of its own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.records = Counter("kafka_mirror_records", "Records mirrored (on the target)",
                               FLOW_LABELS, registry=r)
        self.bytes = Counter("kafka_mirror_bytes", "Bytes of keys and values mirrored",
                             FLOW_LABELS, registry=r)
        self.batches = Counter("kafka_mirror_batches", "Micro-batches committed that moved "
                               "records", FLOW_LABELS, registry=r)
        self.batch_duration = Histogram(
            "kafka_mirror_batch_duration_seconds", "Duration of committed micro-batches",
            FLOW_LABELS, registry=r,
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0),
        )
        self.last_batch = Gauge("kafka_mirror_last_batch_timestamp_seconds",
                                "When the last batch that moved records committed (Unix time)",
                                FLOW_LABELS, registry=r)
        self.lag = Gauge("kafka_mirror_lag_records",
                         "Source records not yet mirrored (source end offset minus the mirror's "
                         "position), per partition", PARTITION_LABELS, registry=r)
        self.lag_seconds = Gauge("kafka_mirror_lag_seconds",
                                 "Seconds since the source's end offset was first seen past the "
                                 "mirror's position (0 when caught up), per partition",
                                 PARTITION_LABELS, registry=r)
        self.latency = LatencyCollector()
        r.register(self.latency)
        self.topic_latency = TopicLatencyCollector(self.flow_targets)
        r.register(self.topic_latency)
        self.latency.acknowledged = self._realtime_flow_latency
        self.latency_max = Gauge("kafka_mirror_replication_latency_max_seconds",
                                 "Age of the oldest record of the last batch when it was on "
                                 "the target (real-time mode: the largest age a record "
                                 "acknowledged since the last report had)", FLOW_LABELS,
                                 registry=r)
        self.topics = Gauge("kafka_mirror_topics", "Source topics the flow mirrors",
                            FLOW_LABELS, registry=r)
        self.partitions = Gauge("kafka_mirror_partitions", "Source partitions the flow mirrors",
                                FLOW_LABELS, registry=r)
        self.restarts = Counter("kafka_mirror_query_restarts", "Restarts of a flow's query",
                                (*FLOW_LABELS, "reason"), registry=r)
        self.errors = Counter("kafka_mirror_errors", "Failures of a flow, by kind",
                              (*FLOW_LABELS, "kind"), registry=r)
        # mirror.exactly.once.target: records of batches cut short found on the target at a
        # (re)start and not written again, and partitions where that could not be proven
        self.restart_skipped = Counter(
            "kafka_mirror_restart_skipped_records",
            "Records skipped at a query (re)start because a batch cut short had already "
            "written them to the target", FLOW_LABELS, registry=r)
        self.restart_fallbacks = Counter(
            "kafka_mirror_restart_fallbacks",
            "Partitions replayed at-least-once at a (re)start because what the target holds "
            "past the last committed batch could not be proven to be the mirror's",
            FLOW_LABELS, registry=r)
        self.state = Gauge("kafka_mirror_flow_state", "1 for the state the flow is in",
                           (*FLOW_LABELS, "state"), registry=r)
        # one writer per flow (mirror.lease.ms): this instance's role, and the lease as seen here
        self.role = Gauge("kafka_mirror_flow_role",
                          "1 for this instance's role in the flow: active (it writes the flow: "
                          "it holds the flow's lease, or the flow has none) or standby",
                          (*FLOW_LABELS, "role"), registry=r)
        self.lease_epoch = Gauge("kafka_mirror_flow_lease_epoch",
                                 "The epoch of the flow's lease (it counts the takeovers)",
                                 FLOW_LABELS, registry=r)
        self.lease_age = Gauge("kafka_mirror_flow_lease_age_seconds",
                               "Seconds since the flow's lease was last renewed, as this "
                               "instance knows it (its own renewal when active)", FLOW_LABELS,
                               registry=r)
        self.members = Gauge("kafka_mirror_flow_members",
                             "Instances taking part in the flow's lease: live (seen within 3 "
                             "leases) or lost (unseen since, without a clean stop, for less "
                             "than a day)", (*FLOW_LABELS, "state"), registry=r)
        # the control plane: when each output was last written (the process's start time
        # until the first), and how many groups it covers
        self.checkpoints_last = Gauge(
            "kafka_mirror_checkpoints_last_timestamp_seconds",
            "When the flow's last checkpoint round succeeded (Unix time)", FLOW_LABELS,
            registry=r)
        self.groups_checkpointed = Gauge(
            "kafka_mirror_groups_checkpointed",
            "Consumer groups with checkpoints on the target after the last round", FLOW_LABELS,
            registry=r)
        self.group_offsets_last = Gauge(
            "kafka_mirror_group_offsets_sync_last_timestamp_seconds",
            "When the flow's last group offset sync round succeeded (Unix time)", FLOW_LABELS,
            registry=r)
        self.groups_synced = Gauge(
            "kafka_mirror_groups_synced",
            "Consumer groups whose offsets on the target are the translated ones after the last "
            "sync round", FLOW_LABELS, registry=r)
        self.offset_syncs_last = Gauge(
            "kafka_mirror_offset_syncs_last_timestamp_seconds",
            "When the flow last wrote offset syncs (Unix time)", FLOW_LABELS, registry=r)
        self.heartbeats_last = Gauge(
            "kafka_mirror_heartbeats_last_timestamp_seconds",
            "When the target last acknowledged a heartbeat of the pair (Unix time)",
            FLOW_LABELS, registry=r)
        self.topic_changes = {
            kind: Counter(name, text, FLOW_LABELS, registry=r)
            for kind, name, text in (
                ("topics_created", "kafka_mirror_topics_created",
                 "Topics the flow created on the target"),
                ("partitions_added", "kafka_mirror_partitions_added",
                 "Partitions the flow added to topics on the target"),
                ("topic_config_syncs", "kafka_mirror_topic_config_syncs",
                 "Changes of a target topic's configs the flow made"),
            )
        }
        self.started = Gauge("kafka_mirror_start_time_seconds",
                             "When the mirror process started (Unix time)", registry=r)
        self.start_time = time.time()
        self.started.set(self.start_time)
        self.health: dict[str, FlowHealth] = {}
        self.clocks: dict[str, FlowLagClock] = {}
        # per flow: the partitions it has lag series of (records, seconds), and the topics it
        # mirrors now
        self._lag_series: dict[str, set[tuple[str, int]]] = {}
        self._seconds_series: dict[str, set[tuple[str, int]]] = {}
        self._assigned: dict[str, Mapping[str, int]] = {}
        self._flows: dict[str, FlowSpec] = {}
        self._lock = threading.Lock()

    def read_topic_latency(self, read: Callable[[], str]) -> None:
        """Where the per-topic latency comes from when scraped: text as
        ``io.kafkamirror.LatencyRegistry.render()`` gives it, one line per flow and target topic
        (flow, topic, then the counts per bucket (not cumulative, the last above every bound),
        the count and the sum in ms)."""
        self.topic_latency.read = read

    def _realtime_flow_latency(self) -> FlowHistograms:
        """Real-time flows' latency: per flow, the sum of its topics' series (each record's
        age when the target acknowledged it)."""
        flows, _ = self.flow_targets()
        out: FlowHistograms = {}
        if not any(flow.realtime for flow in flows.values()):
            return out  # no second read of the JVM's registry per scrape
        for labels, _topic, buckets, total in self.topic_latency.series():
            flow = flows.get(labels[0])
            if flow is None or not flow.realtime:
                continue
            summed, summed_total = out.get(labels, ([(b, 0.0) for b, _ in buckets], 0.0))
            out[labels] = ([(b, n + m) for (b, n), (_, m) in zip(summed, buckets, strict=True)],
                           summed_total + total)
        return out

    def flow_targets(self) -> tuple[dict[str, FlowSpec], dict[str, set[str]]]:
        """The registered flows by name, and the target topics of those whose assignment is
        known (a topic no longer mirrored has no latency series)."""
        with self._lock:
            flows = dict(self._flows)
            targets = {name: {flows[name].target_topic(t) for t in assignment}
                       for name, assignment in self._assigned.items() if name in flows}
        return flows, targets

    @staticmethod
    def labels(flow: FlowSpec | HeartbeatSpec) -> tuple[str, str, str]:
        return flow.name, flow.source.alias, flow.target.alias

    def flow(self, flow: FlowSpec) -> FlowHealth:
        with self._lock:
            return self.health.setdefault(flow.name, FlowHealth())

    def register(self, flow: FlowSpec) -> None:
        """Every series of the flow exists from the start (at 0), so that rates, increases and
        alerts see the first restart or error."""
        labels = self.labels(flow)
        for reason in RESTART_REASONS:
            self.restarts.labels(*labels, reason)
        for kind in ERROR_KINDS:
            self.errors.labels(*labels, kind)
        for metric in (self.records, self.bytes, self.batches, self.batch_duration,
                       *self.topic_changes.values()):
            metric.labels(*labels)
        if flow.exactly_once_target:
            self.restart_skipped.labels(*labels)
            self.restart_fallbacks.labels(*labels)
        syncs = flow.syncs
        if syncs.emit_checkpoints:
            self.checkpoints_last.labels(*labels).set(self.start_time)
            self.groups_checkpointed.labels(*labels).set(0)
            if syncs.sync_group_offsets:
                self.group_offsets_last.labels(*labels).set(self.start_time)
                self.groups_synced.labels(*labels).set(0)
        if syncs.emit_offset_syncs:
            self.offset_syncs_last.labels(*labels).set(self.start_time)
        with self._lock:
            self.clocks.setdefault(flow.name, FlowLagClock())
            self._flows[flow.name] = flow
        self.set_state(flow, "starting")

    def register_heartbeats(self, spec: HeartbeatSpec) -> None:
        """A pair that emits heartbeats (``emit.heartbeats.enabled``; labelled like a flow)."""
        self.heartbeats_last.labels(*self.labels(spec)).set(self.start_time)

    def heartbeat_delivered(self, spec: HeartbeatSpec, at: float) -> None:
        self.heartbeats_last.labels(*self.labels(spec)).set(at)

    def checkpoints_emitted(self, flow: FlowSpec, groups: int) -> None:
        labels = self.labels(flow)
        self.checkpoints_last.labels(*labels).set(time.time())
        self.groups_checkpointed.labels(*labels).set(groups)

    def group_offsets_synced(self, flow: FlowSpec, groups: int) -> None:
        labels = self.labels(flow)
        self.group_offsets_last.labels(*labels).set(time.time())
        self.groups_synced.labels(*labels).set(groups)

    def offset_syncs_written(self, flow: FlowSpec) -> None:
        self.offset_syncs_last.labels(*self.labels(flow)).set(time.time())

    def topics_changed(self, flow: FlowSpec, kind: str, count: int) -> None:
        """``kind``: one of :data:`TOPIC_CHANGES`."""
        if count > 0:
            self.topic_changes[kind].labels(*self.labels(flow)).inc(count)

    def snapshot(self) -> dict[str, FlowHealth]:
        with self._lock:
            return {name: replace(health) for name, health in self.health.items()}

    def set_state(self, flow: FlowSpec, state: str) -> None:
        health = self.flow(flow)
        if health.state != state or health.state_since is None:
            health.state, health.state_since = state, time.time()
        for name in FLOW_STATES:
            self.state.labels(*self.labels(flow), name).set(1 if name == state else 0)

    def set_lease(self, flow: FlowSpec, lease: Mapping[str, Any] | None) -> None:
        """This instance's role in the flow and what it knows of the flow's lease (None: the
        flow has no lease, this instance writes it)."""
        labels = self.labels(flow)
        role = "active" if lease is None else str(lease["role"])
        with self._lock:
            health = self.health.setdefault(flow.name, FlowHealth())
            health.role, health.lease = role, None if lease is None else dict(lease)
        for name in FLOW_ROLES:
            self.role.labels(*labels, name).set(1 if name == role else 0)
        if lease is None:
            return
        self.lease_epoch.labels(*labels).set(lease["epoch"])
        self.lease_age.labels(*labels).set(lease["lease_age_seconds"])
        self.members.labels(*labels, "live").set(len(lease["members_live"]))
        self.members.labels(*labels, "lost").set(len(lease["members_lost"]))

    def set_assignment(self, flow: FlowSpec, assignment: Mapping[str, int]) -> None:
        """The source partitions the flow mirrors now; the lag series of any other partition
        (a topic deleted, no longer selected) go."""
        labels = self.labels(flow)
        self.topics.labels(*labels).set(len(assignment))
        self.partitions.labels(*labels).set(sum(assignment.values()))
        with self._lock:
            self._assigned[flow.name] = dict(assignment)
            gone: set[tuple[str, int]] = set()
            for series in (self._lag_series, self._seconds_series):
                known = series.setdefault(flow.name, set())
                stale = {tp for tp in known if not _assigned(assignment, tp)}
                known -= stale
                gone |= stale
            clock = self.clocks.get(flow.name)
        for topic, partition in sorted(gone):
            self.lag.remove(*labels, topic, str(partition))
            self.lag_seconds.remove(*labels, topic, str(partition))
            if clock is not None:
                clock.forget((topic, partition))

    def skipped_at_restart(self, flow: FlowSpec, records: int, fallbacks: int) -> None:
        """A (re)start found ``records`` records of a cut batch on the target (not written
        again) and fell back to at-least-once on ``fallbacks`` partitions."""
        labels = self.labels(flow)
        if records > 0:
            self.restart_skipped.labels(*labels).inc(records)
        if fallbacks > 0:
            self.restart_fallbacks.labels(*labels).inc(fallbacks)

    def restarted(self, flow: FlowSpec, reason: str) -> None:
        self.restarts.labels(*self.labels(flow), reason).inc()
        self.flow(flow).restarts += 1

    def failed(self, flow: FlowSpec, kind: str, message: str) -> None:
        self.errors.labels(*self.labels(flow), kind).inc()
        health = self.flow(flow)
        health.errors += 1
        health.last_error = message

    def on_batch(self, event: BatchCommitted) -> None:
        """Batch hook: one progress event (a batch that moved records, or an idle trigger; in
        real-time mode, a drain of acknowledged records, or a batch end: ``batch_id`` >= 0)."""
        committed = time.time()
        latest = self._current(event.flow, event.source_latest)
        self.observe_ends(event.flow, latest, event.source_end,
                          event.planned if event.planned is not None else committed)
        lag = {tp: max(0, end - event.source_end.get(tp, end)) for tp, end in latest.items()}
        ended = event.batch_id >= 0 and (event.records > 0 or event.flow.realtime)
        self.batch(event.flow, records=event.records, size=event.bytes,
                   duration=event.duration, lag=lag, row=event.observed,
                   committed=committed, rate=event.process_rate, ended=ended)

    def _current(self, flow: FlowSpec, latest: Mapping[tuple[str, int], int]
                 ) -> dict[tuple[str, int], int]:
        """The partitions of ``latest`` the flow mirrors now (an event of a query stopped
        before the assignment changed must not bring back a series that went)."""
        with self._lock:
            assignment = self._assigned.get(flow.name)
        if assignment is None:
            return dict(latest)
        return {tp: end for tp, end in latest.items() if _assigned(assignment, tp)}

    def observe_ends(self, flow: FlowSpec, latest: Mapping[tuple[str, int], int],
                     position: Mapping[tuple[str, int], int], at: float) -> None:
        """The source end offsets seen at ``at`` and the mirror's positions: the lag-in-seconds
        tables, and a series per partition computed when scraped."""
        labels = self.labels(flow)
        with self._lock:
            clock = self.clocks.setdefault(flow.name, FlowLagClock())
            known = self._seconds_series.setdefault(flow.name, set())
            new = [tp for tp in latest if tp not in known]
            known.update(new)
        clock.observe(latest, position, at)
        for topic, partition in new:
            self.lag_seconds.labels(*labels, topic, str(partition)).set_function(
                partial(_seconds_now, clock, (topic, partition))
            )
        self.flow(flow).lag_seconds = clock.max_seconds(time.time())

    def batch(self, flow: FlowSpec, *, records: int, size: int, duration: float,
              lag: Mapping[tuple[str, int], int], row: Mapping[str, Any],
              committed: float, rate: float, ended: bool) -> None:
        """``ended``: a batch was committed (counted, with its duration); ``records``: how many
        reached the target since the last call."""
        labels = self.labels(flow)
        health = self.flow(flow)
        health.last_progress = committed
        health.lag = sum(lag.values())
        with self._lock:
            self._lag_series.setdefault(flow.name, set()).update(lag)
        for (topic, partition), behind in lag.items():
            self.lag.labels(*labels, topic, str(partition)).set(behind)
        if ended:
            self.batches.labels(*labels).inc()
            self.batch_duration.labels(*labels).observe(duration)
        if records <= 0:
            return
        health.records += records
        health.bytes += size
        health.last_batch = committed
        health.rate = rate
        self.records.labels(*labels).inc(records)
        self.bytes.labels(*labels).inc(size)
        self.last_batch.labels(*labels).set(committed)
        committed_ms = committed * 1000.0
        self.latency.add(labels, row, records, committed_ms)
        if row.get("ts_min_ms") is not None:
            self.latency_max.labels(*labels).set(
                max(0.0, committed_ms - float(row["ts_min_ms"])) / 1000.0
            )
        elif row.get("age_max_ms") is not None:  # real-time mode: measured when acknowledged
            self.latency_max.labels(*labels).set(float(row["age_max_ms"]) / 1000.0)


def _seconds_now(clock: FlowLagClock, tp: tuple[str, int]) -> float:
    return clock.seconds(tp, time.time())


def _assigned(assignment: Mapping[str, int], tp: tuple[str, int]) -> bool:
    return tp[1] < assignment.get(tp[0], 0)
