"""Where a flow's query starts: the positions of its last committed batch (less those of topics
deleted and created again since), else a takeover from the mirror that ran before; and whether
records it has not mirrored yet were deleted meanwhile."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from kafka_mirror.config.model import ClusterSpec, FlowSpec
from kafka_mirror.control.mm2_positions import read_mm2_positions
from kafka_mirror.engine.acked_positions import AckedPositions
from kafka_mirror.engine.data_loss import deleted_ranges, describe_all
from kafka_mirror.engine.exactly_once import TargetEnds
from kafka_mirror.engine.positions import FlowState, Positions, recreated_topics
from kafka_mirror.errors import reason
from kafka_mirror.mm2.offsets_records import mm2_offsets_topic
from kafka_mirror.state.departed import DEPARTED_FILE, DepartedTopics
from kafka_mirror.state.kept_positions import KeptPositions
from kafka_mirror.state.offset_ranges import OffsetRanges, ranges_from_syncs
from kafka_mirror.state.source_epochs import SourceEpochs

log = logging.getLogger(__name__)

ReadMm2Positions = Callable[[ClusterSpec, str, str], Positions]
# how long what was read ahead for a start (ResumePlanner.read_ahead) serves it
READ_AHEAD_SECONDS = 30.0


class SourceAdmin(Protocol):
    """What a flow asks of its source cluster (:class:`~kafka_mirror.kafka.admin.ClusterAdmin`)."""

    def partitions(self, wanted: Callable[[str], bool]) -> list[tuple[str, int]]: ...

    def committed_offsets(
        self, group: str, partitions: Iterable[tuple[str, int]], timeout: float = 30.0
    ) -> dict[tuple[str, int], tuple[int, str]]: ...

    def log_start_offsets(
        self, partitions: list[tuple[str, int]], timeout: float = 30.0
    ) -> dict[tuple[str, int], int]: ...

    def end_offsets(
        self, partitions: list[tuple[str, int]], timeout: float = 30.0
    ) -> dict[tuple[str, int], int]: ...

    def topic_ids(self, topics: list[str], timeout: float = 30.0) -> dict[str, str] | None: ...


class ReadOffsetSyncs(Protocol):
    """A flow's offset syncs: per source partition, (source offset, target offset) pairs in
    log order; ``where`` names the topic and cluster."""

    where: str

    def __call__(self) -> Mapping[tuple[str, int], Sequence[tuple[int, int]]]: ...


def _on_a_thread(action: Callable[[], None]) -> None:
    threading.Thread(target=action, name="offset translation rebuild", daemon=True).start()


class ResumePlanner:
    """Plans where one flow's query (re)starts, from its state and its source cluster."""

    def __init__(
        self,
        flow: FlowSpec,
        source: SourceAdmin,
        state: FlowState,
        ranges: OffsetRanges,
        acked: AckedPositions,
        target_ends: TargetEnds | None,
        save_ranges: Callable[[], None],
        raw_config: Mapping[str, str],
        read_mm2: ReadMm2Positions = read_mm2_positions,
        departed: DepartedTopics | None = None,
        epochs: SourceEpochs | None = None,
        kept: KeptPositions | None = None,
        read_syncs: ReadOffsetSyncs | None = None,
        in_background: Callable[[Callable[[], None]], None] = _on_a_thread,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.flow = flow
        # the offset syncs a new writer rebuilds its offset translation from
        self.read_syncs = read_syncs
        self.in_background = in_background
        # the flow's positions kept in Kafka (mirror.positions.in.kafka)
        self.kept = kept
        # the source's leader epochs the flow saw (dropped with the rest of a topic's state)
        self.epochs = epochs
        # what the flow keeps of a source topic goes a while after the topic left it
        self.departed = departed or DepartedTopics(state.flow_dir / DEPARTED_FILE)
        self.source = source
        self.state = state
        self.ranges = ranges
        self.acked = acked
        self.target_ends = target_ends
        self.save_ranges = save_ranges
        self.raw_config = raw_config
        self.read_mm2 = read_mm2
        self._reported_ids: set[tuple[str, str]] = set()
        # set while no rebuild of offset translation from offset syncs is under way
        self.rebuilt = threading.Event()
        self.rebuilt.set()
        self._clock = clock
        # what read_ahead read for the next start: name -> (when, what)
        self._ahead: dict[str, tuple[float, Any]] = {}

    def read_ahead(self) -> None:
        """The reads of Kafka alone a start makes (the positions kept there; a MirrorMaker 2's
        offsets topic, for a takeover), made now: while the Spark session starts, before the
        flow's first start, which uses them if it comes within :data:`READ_AHEAD_SECONDS`
        (about 0.2 s less from a process start to the first record). A read that fails here is
        made again by the start, which reports it."""
        reads: dict[str, Callable[[], Any]] = {}
        if self.kept is not None and self.target_ends is not None:
            reads["kept"] = self.kept.read
        if self.flow.takeover_mm2:
            reads["mm2"] = self._read_mm2
        for name, read in reads.items():
            try:
                self._ahead[name] = (self._clock(), read())
            except Exception as exc:
                log.debug("flow %s: %s not read ahead (%s)", self.flow.name, name, exc)

    def forget_read_ahead(self) -> None:
        """A start is over: what it did not use of what was read ahead goes."""
        self._ahead.clear()

    def _read(self, name: str, read: Callable[[], Any]) -> Any:
        """What ``read`` gives: read ahead a moment ago, or now."""
        when, value = self._ahead.pop(name, (float("-inf"), None))
        if self._clock() - when <= READ_AHEAD_SECONDS:
            return value
        return read()

    def _read_mm2(self) -> Positions:
        flow = self.flow
        topic = mm2_offsets_topic(self.raw_config, flow.source.alias, flow.target.alias)
        return self.read_mm2(flow.target, topic, flow.source.alias)

    def resume_positions(self, topic_ids: Mapping[str, str]) -> Positions | None:
        """Where the flow resumes: the positions of its last committed batch (in real-time
        mode, moved on to the acknowledged records), less those of source topics deleted and
        created again since (``topic_ids``: their IDs now; their new incarnation is mirrored
        from its start, and the old one's offset translation is forgotten)."""
        if self.flow.realtime:
            # the newest run may have committed no batch: its acknowledged positions too
            # belong to the topic IDs it started with
            self.forget_recreated(self.state.newest_topic_ids(), topic_ids)
        last = self.state.last_committed()
        if last is None:
            # a real-time run cut before its first batch ended resumes where it started,
            # moved on by what it copied
            return self.acked.resume(None) if self.flow.realtime else None
        known, known_ids = last
        recreated = self.forget_recreated(known_ids, topic_ids)
        known = {tp: offset for tp, offset in known.items() if tp[0] not in recreated}
        return self.acked.resume(known) if self.flow.realtime else known

    def forget_recreated(self, known_ids: Mapping[str, str], topic_ids: Mapping[str, str]
                         ) -> set[str]:
        """The source topics whose ID is no longer one of ``known_ids``: their positions and
        offset translation are dropped (reported once per new topic ID)."""
        recreated = recreated_topics(known_ids, topic_ids)
        for topic, (old, new) in recreated.items():
            self.ranges.drop_topic(topic)
            self.acked.drop_topic(topic)
            if self.target_ends is not None:
                self.target_ends.drop_topic(topic)
            if self.epochs is not None:
                self.epochs.drop_topic(topic)
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

    def drop_departed(self, assignment: dict[str, int], ids: dict[str, str]) -> dict[str, str]:
        """Drop what the flow keeps of the source topics out of it for
        ``mirror.topic.state.retention.ms`` (their offset translation, restart records,
        acknowledged positions); returns ``ids`` (the topic IDs the new generation records)
        without theirs."""
        kept = set(ids) | self.ranges.topics() | self.acked.topics()
        if self.target_ends is not None:
            kept |= self.target_ends.topics()
        if self.epochs is not None:
            kept |= self.epochs.topics()
        expired = self.departed.expired(assignment, kept, self.flow.topic_state_retention_ms)
        for topic in expired:
            self.ranges.drop_topic(topic)
            self.acked.drop_topic(topic)
            if self.target_ends is not None:
                self.target_ends.drop_topic(topic)
            if self.epochs is not None:
                self.epochs.drop_topic(topic)
        if expired:
            self.save_ranges()
            log.info("flow %s: the state of %s dropped: out of the flow for %d ms or more "
                     "(mirror.topic.state.retention.ms)", self.flow.name, ", ".join(expired),
                     self.flow.topic_state_retention_ms)
        return {topic: value for topic, value in ids.items() if topic not in expired}

    def with_kept_positions(self, known: Positions | None, assignment: Mapping[str, int],
                            topic_ids: Mapping[str, str]) -> Positions | None:
        """``known`` (the last committed batch's positions, None without one) moved on to the
        positions kept in Kafka where those are further (a batch written but not committed, a
        stale state dir, or none at all: a new host); their target ends go to the exactly-once
        restart, which proves from them what is on the target. ``known`` itself when nothing
        is further (or nothing is kept)."""
        if self.kept is None or self.target_ends is None:
            return known
        try:
            kept = self._read("kept", self.kept.read)
        except Exception as exc:
            log.warning("flow %s: the positions kept in Kafka were not read (%s); resuming from "
                        "the state dir alone", self.flow.name, reason(exc))
            return known
        ahead: dict[tuple[str, int], tuple[int, int]] = {}
        for (topic, partition), entry in kept.items():
            now = topic_ids.get(topic)
            if entry.target_end is None or partition >= assignment.get(topic, 0) or \
                    (entry.topic_id and now and entry.topic_id != now):
                continue  # MM2's own, a partition out of the flow, an earlier incarnation
            if known is not None and known.get((topic, partition), -1) >= entry.position:
                continue
            ahead[(topic, partition)] = (entry.position, entry.target_end)
        if not ahead:
            return known
        self.target_ends.record(ahead)
        self._rebuild_ranges(ahead)
        where = f"{self.kept.topic} on cluster '{self.flow.target.alias}'"
        if known is None:
            log.info("flow %s: the state dir holds no committed batch: %d partitions resume "
                     "from the positions kept in %s", self.flow.name, len(ahead), where)
        else:
            log.info("flow %s: %d partitions resume from the positions kept in %s, past the "
                     "state dir's last committed batch", self.flow.name, len(ahead), where)
        return {**(known or {}), **{tp: position for tp, (position, _) in ahead.items()}}

    def _rebuild_ranges(self, ahead: Mapping[tuple[str, int], tuple[int, int]]) -> None:
        """Offset translation for the partitions that resume from the positions kept in Kafka:
        the kept pairs at once, then (on a thread of its own: the start does not wait for it)
        the offset syncs the mirrors that copied them wrote."""
        # partitions whose own ranges stop short of the kept position (another writer copied
        # the rest, or the state dir is new): a restart on the same host usually has none
        pairs = {tp: pair for tp, pair in ahead.items()
                 if not self.ranges.reaches(tp[0], tp[1], pair[0])}
        for (topic, partition), (position, end) in pairs.items():
            self.ranges.merge(topic, partition, ranges_from_syncs((), position, end))
        read = self.read_syncs
        if read is None or not pairs:
            return

        def rebuild() -> None:
            try:
                self._rebuild_from(read, pairs)
            finally:
                self.rebuilt.set()

        self.rebuilt.clear()
        self.in_background(rebuild)

    def _rebuild_from(self, read: ReadOffsetSyncs,
                      pairs: Mapping[tuple[str, int], tuple[int, int]]) -> None:
        """The offset syncs of ``pairs``' partitions (below each kept pair) merged in."""
        try:
            syncs = read()
        except Exception as exc:
            log.warning("flow %s: offset syncs not read from %s (%s): offset translation "
                        "starts at the positions kept in Kafka", self.flow.name, read.where,
                        reason(exc))
            return
        rebuilt = used = 0
        for (topic, partition), (position, end) in pairs.items():
            facts = ranges_from_syncs(syncs.get((topic, partition), ()), position, end)
            if len(facts) > 1:
                self.ranges.merge(topic, partition, facts)
                rebuilt, used = rebuilt + 1, used + len(facts) - 1
        self.save_ranges()
        log.info("flow %s: offset translation rebuilt for %d of %d partitions from %d "
                 "offset syncs in %s (a group offset between two syncs translates to the "
                 "record after the earlier one)", self.flow.name, rebuilt, len(pairs), used,
                 read.where)

    def takeover_positions(self, assignment: Mapping[str, int] | None = None
                           ) -> Positions | None:
        """Where a first run starts when another mirror ran before: MirrorMaker 1's consumer
        group (``legacy``), or a MirrorMaker 2's positions in its Connect offsets topic (of the
        partitions in ``assignment``, when given; not those kafka-mirror kept there itself,
        which :meth:`with_kept_positions` uses)."""
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
            positions = {
                tp: offset for tp, offset in self._read("mm2", self._read_mm2).items()
                if assignment is None or tp[1] < assignment.get(tp[0], 0)
            }
            if positions:
                log.info(
                    "flow %s: taking over from MirrorMaker 2: %d partitions start where its "
                    "offsets topic %s says it stopped", flow.name, len(positions), topic,
                )
                return positions
        return None

    def data_loss(self, known: Positions, assignment: Mapping[str, int]) -> str | None:
        """Why the flow stops for good when records it has not mirrored yet were deleted on
        the source and ``mirror.fail.on.data.loss`` holds. Otherwise (None) they are reported
        and skipped (Spark starts each partition at its log start)."""
        resume = {
            (topic, partition): offset for (topic, partition), offset in known.items()
            if partition < assignment.get(topic, 0)
        }
        try:
            log_starts = self.source.log_start_offsets(sorted(resume))
        except Exception as exc:  # Spark's own check still applies
            log.warning("flow %s: cannot check for records deleted before they were mirrored: "
                        "%s", self.flow.name, reason(exc))
            return None
        gaps = deleted_ranges(resume, log_starts)
        if not gaps:
            return None
        if self.flow.fail_on_data_loss:
            return (
                f"records were deleted on cluster '{self.flow.source.alias}' (retention or "
                f"deleted records) before they were mirrored: {describe_all(gaps)}; "
                "mirror.fail.on.data.loss=true stops the flow (set it to false to skip them)"
            )
        log.warning(
            "flow %s: skipping records deleted on cluster '%s' before they were mirrored "
            "(mirror.fail.on.data.loss=false): %s",
            self.flow.name, self.flow.source.alias, describe_all(gaps),
        )
        return None


def assigned_partitions(assignment: Mapping[str, int]) -> list[tuple[str, int]]:
    """Every (topic, partition) of an assignment (topic to partition count), in order."""
    return [(topic, p) for topic, count in sorted(assignment.items()) for p in range(count)]
