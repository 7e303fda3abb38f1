"""Real-time mode's side of a flow: where a run starts, and after every drain of acknowledged
records, where they landed (to the write hooks) and the flow's progress (to the batch
hooks); every few seconds, the source's leader epochs against unclean leader elections."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence

from kafka_mirror.config.model import FlowSpec
from kafka_mirror.engine.acked_positions import AckedPositions
from kafka_mirror.engine.batch_writer import BatchWriter, WriteHook, run_write_hooks
from kafka_mirror.engine.batches import BatchHook, run_hooks
from kafka_mirror.engine.leader_epochs import TruncatedRange, UncleanElections
from kafka_mirror.engine.positions import Positions
from kafka_mirror.engine.realtime import RealTimeProgress, RealTimeWriter
from kafka_mirror.runtime.resume import SourceAdmin, assigned_partitions

log = logging.getLogger(__name__)
# real-time progress: how long the source's offsets may take to answer (the flow's upkeep waits)
PROGRESS_LOOKUP_SECONDS = 2.0
# how often a running real-time flow reads the source's leader epochs (one ListOffsets request)
EPOCH_CHECK_SECONDS = 5.0


class RealTimeFlow:
    """A real-time flow's runs: their start positions, drains and progress."""

    def __init__(self, flow: FlowSpec, source: SourceAdmin, acked: AckedPositions,
                 hooks: Sequence[WriteHook]) -> None:
        self.flow = flow
        self.source = source
        self.acked = acked
        self.hooks = hooks
        self.progress = RealTimeProgress(flow)
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

    def new_run(self) -> None:
        """A query run starts: where the last one started partitions is forgotten."""
        self._run_start = {}

    def check_source(self, unclean: UncleanElections, assignment: Mapping[str, int]
                     ) -> list[TruncatedRange]:
        """Every :data:`EPOCH_CHECK_SECONDS`: the ranges an unclean leader election took out of
        the source's log below the positions acknowledged before the last check (see
        :mod:`kafka_mirror.engine.leader_epochs`)."""
        now = time.monotonic()
        if now < self._check_due:
            return []
        self._check_due = now + EPOCH_CHECK_SECONDS
        partitions = set(assigned_partitions(assignment))
        current = {tp: offset for tp, offset in self.acked.positions().items()
                   if tp in partitions}
        lost = unclean.check_positions(self._checked or {}, current)
        self._checked = current
        return lost

    def start_positions(self, known: Positions | None, assignment: Mapping[str, int]
                        ) -> Positions | None:
        """Where the run starts is saved before it starts (a run cut before Spark committed a
        batch resumes there, moved on by what it copied); a first run from the latest offsets
        reads them now, for the same reason."""
        if known is None and self.flow.starting_offsets == "latest":
            known = self.source.end_offsets(assigned_partitions(assignment))
        if known:
            self.acked.seed(known)
        return known

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
            self.progress.add(written)
            latest = self._source_ends(assignment)
            if latest is None:
                return
            event = self.progress.report(self._progress_positions(latest), latest, batch_id,
                                         duration)
        run_hooks(self.progress_hooks, event)

    def _source_ends(self, assignment: Mapping[str, int]) -> Positions | None:
        """The source's end offsets of the partitions mirrored now; None when there are none
        or the source did not answer within :data:`PROGRESS_LOOKUP_SECONDS`."""
        partitions = assigned_partitions(assignment)
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
