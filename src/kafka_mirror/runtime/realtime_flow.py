"""Real-time mode's side of a flow: where a run starts, and after every drain of acknowledged
records, where they landed (to the write hooks) and the flow's progress (to the batch
hooks); every few seconds, the source's leader epochs against unclean leader elections.

With ``mirror.exactly.once.target`` (the default) a real-time flow is exactly once as a
micro-batch flow is (:mod:`kafka_mirror.engine.exactly_once`): every run records, before it
starts, where the target ends at each partition's start position, and every drain records where
the target ends after the records it found acknowledged (:class:`RealTimeEnds`), before the
acknowledged positions move. A run cut short (``kill -9``, a host lost) left records on the
target past the last drain; the next start proves them against the source from the drain's pair
and skips them. The pairs are kept in Kafka too (:mod:`kafka_mirror.state.kept_positions`), so
a standby on another host proves its start from them."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Protocol

from kafka_mirror.config.model import FlowSpec
from kafka_mirror.engine.acked_positions import AckedPositions
from kafka_mirror.engine.batch_writer import BatchWriter, BatchWritten, WriteHook, run_write_hooks
from kafka_mirror.engine.batches import BatchHook, run_hooks
from kafka_mirror.engine.exactly_once import TargetEnds
from kafka_mirror.engine.leader_epochs import TruncatedRange, UncleanElections
from kafka_mirror.engine.positions import Positions
from kafka_mirror.engine.realtime import RealTimeProgress, RealTimeWriter
from kafka_mirror.errors import MirrorError, reason
from kafka_mirror.runtime.resume import SourceAdmin, assigned_partitions
from kafka_mirror.state.kept_positions import KeptPositions

log = logging.getLogger(__name__)
# real-time progress: how long the source's offsets may take to answer (the flow's upkeep waits)
PROGRESS_LOOKUP_SECONDS = 2.0
# how often a running real-time flow checks the source's leader epochs: with the first progress
# report due then, whose reading of the source's end offsets (one ListOffsets request) holds them
# too; by itself when no report came within EPOCH_CHECK_WAIT_SECONDS more
EPOCH_CHECK_SECONDS = 5.0
EPOCH_CHECK_WAIT_SECONDS = 6.0
# the progress (the source's end offsets read, then the lag, records and metrics per partition)
# goes with every drain (about once a second) for up to this many partitions; a flow of more
# reports it every partitions / this many seconds, at most every PROGRESS_MAX_SECONDS: its cost
# follows partitions, not records (an idle flow of 2,000 partitions reported every 5 s)
PROGRESS_PARTITIONS_PER_SECOND = 400
PROGRESS_MAX_SECONDS = 5.0
Pairs = dict[tuple[str, int], tuple[int, int]]


def report_interval(partitions: int) -> float:
    """Seconds between a real-time flow's progress reports for ``partitions`` partitions: none
    (every drain) up to :data:`PROGRESS_PARTITIONS_PER_SECOND`, then growing to
    :data:`PROGRESS_MAX_SECONDS`."""
    if partitions <= PROGRESS_PARTITIONS_PER_SECOND:
        return 0.0
    return min(PROGRESS_MAX_SECONDS, partitions / PROGRESS_PARTITIONS_PER_SECOND)


class EndOffsets(Protocol):
    def end_offsets(self, partitions: list[tuple[str, int]], timeout: float = 30.0
                    ) -> dict[tuple[str, int], int]: ...


class EndsAndEpochs(EndOffsets, Protocol):
    def latest(self, partitions: list[tuple[str, int]], timeout: float | None = None
               ) -> dict[tuple[str, int], tuple[int, int]]: ...


# a reading of the source's end offsets and leader epochs for the epoch check: when it was taken,
# the positions acknowledged before it, per partition (end offset, leader epoch)
SharedReading = tuple[float, Positions, dict[tuple[str, int], tuple[int, int]]]


class RealTimeEnds:
    """Real-time write hook, before the acknowledged positions: per partition of a drain, the
    position after its acknowledged records and the target's end after them (the end of the
    partition's newest range), recorded for the exactly-once restart; kept in Kafka too while
    ``may_keep`` (this instance holds the flow's lease: a writer that lost it keeps nothing
    there). A failure to keep them is reported once until they are kept again; the next drain
    tries again, and a restart proves from the pairs last kept."""

    def __init__(self, flow: FlowSpec, target_ends: TargetEnds, kept: KeptPositions | None,
                 topic_ids: Callable[[], Mapping[str, str]],
                 may_keep: Callable[[], bool] | None = None) -> None:
        self.flow = flow
        self.target_ends = target_ends
        self.kept = kept
        self.topic_ids = topic_ids
        self.may_keep = may_keep
        self._failing = False

    def on_written(self, event: BatchWritten) -> None:
        pairs: Pairs = {}
        for copy in event.copies:
            key = (copy.topic, copy.partition)
            if copy.copied.source_end > pairs.get(key, (-1, 0))[0]:
                pairs[key] = (copy.copied.source_end, copy.copied.target_end)
        if pairs:
            self.target_ends.record(pairs)
            self.keep(pairs)

    def keep(self, pairs: Pairs) -> None:
        """``pairs`` to the positions kept in Kafka (while the lease allows)."""
        if self.kept is None or (self.may_keep is not None and not self.may_keep()):
            return
        try:
            self.kept.keep(pairs, self.topic_ids())
        except Exception as exc:
            if not self._failing:
                self._failing = True
                log.warning("flow %s: positions not kept in %s (%s); a restart elsewhere proves "
                            "its start from the last ones kept", self.flow.name,
                            self.kept.topic, reason(exc))
            return
        if self._failing:
            self._failing = False
            log.info("flow %s: positions kept in %s again", self.flow.name, self.kept.topic)


class StartNotRecorded(MirrorError):
    """A real-time run's start positions (or the target's ends there) could not be read: the
    flow retries the start with backoff instead of starting unproven."""


class RealTimeFlow:
    """A real-time flow's runs: their start positions, drains and progress."""

    def __init__(self, flow: FlowSpec, source: SourceAdmin, acked: AckedPositions,
                 hooks: Sequence[WriteHook], ends: RealTimeEnds | None = None) -> None:
        """``ends``: with exactly once, the hook (among ``hooks``) that records where the
        target ended at the positions the flow reached."""
        self.flow = flow
        self.source = source
        self.acked = acked
        self.hooks = hooks
        self.ends = ends
        self.progress = RealTimeProgress(flow)
        # the source's end offsets after every drain: ``source`` until the flow gives the Java
        # client of the Spark driver (:meth:`read_ends_with`), which reads leader epochs too: the
        # report due with an epoch check reads both at once (the check takes the reading,
        # :attr:`_shared`)
        self._epochs: EndsAndEpochs | None = None
        self._shared: SharedReading | None = None
        # progress after every drain goes to these batch hooks (set by the Mirror)
        self.progress_hooks: Sequence[BatchHook] = ()
        self._drain_lock = threading.Lock()
        # where the running query started partitions it has copied nothing of yet
        self._run_start: Positions = {}
        # the positions acknowledged before the last epoch check, kept across query runs (None:
        # no check yet in this process; the first only reads the epochs, as the positions a
        # flow resumes at may hold records of an epoch newer than those kept)
        self._checked: Positions | None = None
        self._check_due = 0.0
        self._report_due = 0.0

    def read_ends_with(self, reader: EndsAndEpochs) -> None:
        """The source's end offsets for the progress from ``reader`` from now on: one py4j call
        to Kafka's Java client, where librdkafka's makes a Python future per partition (at 2,000
        partitions, read every second, most of an idle mirror's CPU). The report due when an
        epoch check is reads the leader epochs with them, for the check."""
        self._epochs = reader

    def new_run(self) -> None:
        """A query run starts: where the last one started partitions is forgotten."""
        self._run_start = {}

    def check_source(self, unclean: UncleanElections, assignment: Mapping[str, int]
                     ) -> list[TruncatedRange]:
        """Every :data:`EPOCH_CHECK_SECONDS`: the ranges an unclean leader election took out of
        the source's log below the positions acknowledged before the last check (see
        :mod:`kafka_mirror.engine.leader_epochs`)."""
        now = time.monotonic()
        shared, self._shared = self._shared, None
        if shared is not None and shared[0] + EPOCH_CHECK_SECONDS <= now:
            shared = None  # a reading of a report long ago (the check did not run since)
        # with a client that reads epochs for the progress, the check waits for the report due
        # next (one request for both), unless none came
        due = self._check_due + (EPOCH_CHECK_WAIT_SECONDS if self._epochs is not None else 0.0)
        if shared is None and now < due:
            return []
        self._check_due = (shared[0] if shared is not None else now) + EPOCH_CHECK_SECONDS
        partitions = set(assigned_partitions(assignment))
        acked = shared[1] if shared is not None else self.acked.positions()
        current = {tp: offset for tp, offset in acked.items() if tp in partitions}
        # partitions that left the flow (a topic deleted or deselected) are not asked about: a
        # deleted one fails the whole check, and the positions checked would stay put
        checked = {tp: offset for tp, offset in (self._checked or {}).items()
                   if tp in partitions}
        lost = unclean.check_positions(checked, current,
                                       None if shared is None else shared[2])
        self._checked = current
        # what the target acknowledged since the last check came from the old leader's log too
        # (the consumer fails on the truncation before it reads the new leader's records there)
        return [replace(r, last=max(r.last, current.get((r.topic, r.partition), 0) - 1))
                for r in lost]

    def proof_positions(self, known: Positions) -> Positions:
        """``known``, where a partition has no pair recorded at its position but one before it
        (Spark committed a batch past the last drain), moved back to that pair's position: the
        exactly-once restart proves from there what is on the target (never a position with
        nothing to prove from, which would write the records since the drain again)."""
        if self.ends is None:
            return known
        moved, recorded = dict(known), self.ends.target_ends
        for tp, position in known.items():
            if recorded.target_end(tp, position) is None:
                pair = recorded.pair_at_or_before(tp, position)
                if pair is not None:
                    moved[tp] = pair[0]
        return moved

    def start_positions(self, known: Positions | None, assignment: Mapping[str, int],
                        target_ends_now: Callable[[list[tuple[str, int]]], Positions]
                        | None = None) -> Positions | None:
        """Where the run starts is saved before it starts (a run cut before Spark committed a
        batch resumes there, moved on by what it copied); a first run from the latest offsets
        reads them now, for the same reason. With exactly once (``target_ends_now`` reads the
        target's end offsets, keyed by target partition) every partition's start is made
        explicit and the target's end there recorded: the pair a run cut before its first
        drain is proven from."""
        partitions = assigned_partitions(assignment)
        try:
            if known is None and self.flow.starting_offsets == "latest":
                known = self.source.end_offsets(partitions)
            if self.ends is not None and target_ends_now is not None:
                known = self._record_starts(known, partitions, target_ends_now)
        except Exception as exc:
            # a cluster busy or a target topic just created (2,000 new partitions on a loaded
            # target took longer than the read's 30 s): the start is retried with backoff
            raise StartNotRecorded(
                f"where the run starts was not recorded: end offsets of {len(partitions)} "
                f"partitions not read ({type(exc).__name__}: {reason(exc)}); "
                "not starting yet") from exc
        if known:
            self.acked.seed(known)
        return known

    def _record_starts(self, known: Positions | None, partitions: list[tuple[str, int]],
                       target_ends_now: Callable[[list[tuple[str, int]]], Positions]
                       ) -> Positions:
        assert self.ends is not None
        recorded = self.ends.target_ends
        positions = dict(known or {})
        new = [tp for tp in partitions if tp not in positions]
        if new:  # never mirrored: from the log start (the first run's "latest" is read above)
            positions |= self.source.log_start_offsets(new)
        unrecorded = [tp for tp in partitions
                      if recorded.target_end(tp, positions[tp]) is None]
        if unrecorded:
            target = self.flow.target_topic
            ends = target_ends_now(sorted({(target(t), p) for t, p in unrecorded}))
            pairs = {(t, p): (positions[(t, p)], ends[(target(t), p)]) for t, p in unrecorded}
            recorded.record(pairs)
            self.ends.keep(pairs)
        return positions

    def drain(self, writer: BatchWriter | RealTimeWriter | None, assignment: Mapping[str, int],
              ended: tuple[int, float] | None = None) -> None:
        """Where the records ``writer`` had acknowledged since the last drain landed, to the
        write hooks (offset translation, offset syncs, acknowledged positions); then the flow's
        progress over ``assignment`` to the batch hooks (``ended``: the id and duration of the
        batch Spark just committed)."""
        if not isinstance(writer, RealTimeWriter):
            return
        with self._drain_lock:
            batch_id, duration = ended or (-1, 0.0)
            written = writer.drain(batch_id)
            if written is not None:
                run_write_hooks(self.hooks, written)
            self.progress.add(written)  # reported with the next report when not now
            now = time.monotonic()
            if ended is None and now < self._report_due:
                return
            latest = self._source_ends(assignment, now)
            if latest is None:
                return
            self._report_due = now + report_interval(len(latest))
            event = self.progress.report(self._progress_positions(latest), latest, batch_id,
                                         duration)
        run_hooks(self.progress_hooks, event)

    def _source_ends(self, assignment: Mapping[str, int], now: float) -> Positions | None:
        """The source's end offsets of the partitions mirrored now; None when there are none
        or the source did not answer within :data:`PROGRESS_LOOKUP_SECONDS`. When an epoch check
        is due, read with the leader epochs, for the check (after the positions acknowledged
        so far: every record below them was read before the epochs were)."""
        partitions = assigned_partitions(assignment)
        if not partitions:
            return None
        try:
            if self._epochs is not None and now >= self._check_due:
                acked = self.acked.positions()
                read = self._epochs.latest(partitions, timeout=PROGRESS_LOOKUP_SECONDS)
                self._shared = (now, acked, read)
                return {tp: end for tp, (end, _) in read.items()}
            reader: EndOffsets = self._epochs or self.source
            return reader.end_offsets(partitions, timeout=PROGRESS_LOOKUP_SECONDS)
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
