"""Writes each micro-batch of a flow and measures exactly where its records landed.

The flow's query hands every micro-batch to :class:`BatchWriter` (Spark's ``foreachBatch``),
which writes it with Spark's Kafka writer: records stay in the JVM; Python sees one call per
batch. Around the write, with no other batch of the flow running, it reads the target
partitions' end offsets; Spark's offset log gives the source range. So each batch yields, per
source partition, the source range read and the target range written, measured without racing
the next batch (Spark's progress events arrive asynchronously, while the next batch writes).
Hooks (offset syncs, the translation ranges) run once Spark committed the batch and reported its
record count.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn, Protocol

from kafka_mirror.config.model import FlowSpec
from kafka_mirror.engine.exactly_once import TargetEnds
from kafka_mirror.engine.leader_epochs import UncleanElections, skip_notice, stop_reason
from kafka_mirror.engine.positions import batch_end_positions, batch_start_positions
from kafka_mirror.errors import MirrorError, reason
from kafka_mirror.state.kept_positions import KeptPositions
from kafka_mirror.state.offset_ranges import CopiedRange

log = logging.getLogger(__name__)

# how long a refused batch waits for the flow to stop its query (flows stop one after another,
# each within its grace period)
REFUSAL_WAIT_SECONDS = 120.0


class TargetOffsets(Protocol):
    def end_offsets(
        self, partitions: list[tuple[str, int]], timeout: float = 30.0
    ) -> dict[tuple[str, int], int]: ...


@dataclass(frozen=True)
class PartitionCopy:
    """One source partition's share of a written batch."""

    topic: str
    partition: int
    target_topic: str
    copied: CopiedRange


@dataclass(frozen=True)
class BatchWritten:
    """A batch of ``flow`` on the target (acknowledged by every in-sync replica)."""

    flow: FlowSpec
    batch_id: int
    copies: tuple[PartitionCopy, ...]
    records: int
    bytes: int
    # milliseconds the writer spent on each step (sourceEpochs, targetEndsBefore, write,
    # targetEndsAfter)
    timings: Mapping[str, float] = field(default_factory=dict)
    # real-time mode: the largest age (ms) a record had when the target acknowledged it
    # (-1: unknown)
    age_max_ms: float = -1.0

    @property
    def target_end(self) -> dict[tuple[str, int], int]:
        return {(c.target_topic, c.partition): c.copied.target_end for c in self.copies}


class WriteHook(Protocol):
    def on_written(self, event: BatchWritten) -> None: ...


def partition_copies(
    flow: FlowSpec,
    source_start: Mapping[tuple[str, int], int],
    source_end: Mapping[tuple[str, int], int],
    target_before: Mapping[tuple[str, int], int],
    target_after: Mapping[tuple[str, int], int],
    records: int,
) -> list[PartitionCopy]:
    """Per moved partition, the ranges, and whether offsets map one to one.

    The target spans add up to the batch's records plus whatever else was written to those
    partitions meanwhile (another writer, a stopped query's producer). When that surplus is 0,
    each partition's target span is exactly its record count, so a partition whose target span
    equals its source span had no offset gap: its offsets map one to one. Otherwise no
    partition of the batch is taken as exact.
    """
    moved = [
        (tp, source_start.get(tp, end), end)
        for tp, end in sorted(source_end.items())
        if end > source_start.get(tp, end)
    ]
    spans: dict[tuple[str, int], tuple[int, int]] = {}
    for (topic, partition), _, _ in moved:
        target_tp = (flow.target_topic(topic), partition)
        if target_tp in target_before and target_tp in target_after:
            spans[target_tp] = (target_before[target_tp], target_after[target_tp])
    surplus = sum(after - before for before, after in spans.values()) - records
    copies = []
    for (topic, partition), start, end in moved:
        target_topic = flow.target_topic(topic)
        if (target_topic, partition) not in spans or len(spans) != len(moved):
            continue
        before, after = spans[(target_topic, partition)]
        exact = surplus == 0 and after - before == end - start
        copies.append(
            PartitionCopy(topic, partition, target_topic,
                          CopiedRange(start, end, before, after, exact))
        )
    return copies


@dataclass(frozen=True)
class WrittenRanges:
    """What one batch's write measured: source offsets from Spark's log, target end offsets
    right before and right after the write."""

    source_start: dict[tuple[str, int], int]
    source_end: dict[tuple[str, int], int]
    target_before: dict[tuple[str, int], int]
    target_after: dict[tuple[str, int], int]
    timings: dict[str, float] = field(default_factory=dict)


def _interruption(message: str, interrupted: Exception) -> StoppingBetweenBatches:
    """``message`` with the first two lines of ``interrupted`` (py4j's text of a Java
    ``InterruptedException``), not its whole traceback: Spark matches the text it is given with a
    backtracking regular expression whose recursion grows with the text after the match's start
    (a Java stack trace there overflowed the stream thread's stack: StackOverflowError)."""
    kind = type(interrupted)
    first = "\n".join(str(interrupted).strip().splitlines()[:2])
    return StoppingBetweenBatches(f"{message}; {kind.__module__}.{kind.__name__}: {first}")


class StoppingBetweenBatches(RuntimeError):
    """Raised instead of writing a batch once the flow is stopping: Spark then ends the query
    with the previous batch as the last one committed (the refused batch is read again on the
    next start), rather than being interrupted in the middle of a write.

    It is raised once the query's stop is under way, caused by a Java ``InterruptedException``:
    Spark takes such an error of a ``foreachBatch`` function, in a query being stopped, for the
    stop's own interruption (``StreamExecution.isInterruptionException``, SPARK-39218) and ends
    the query as stopped, not as failed (no ERROR line, no stack trace)."""


class _QuietStop(logging.Filter):
    """py4j logs the refusal with its traceback (``logger.exception``): not an error."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        text = record.getMessage() + (f"{type(error).__name__}: {error}" if error else "")
        return StoppingBetweenBatches.__name__ not in text


logging.getLogger("py4j.clientserver").addFilter(_QuietStop())


class BatchWriter:
    """``foreachBatch`` function of one flow's query (one checkpoint generation).

    The number of records a batch held (needed to tell whether its offsets had gaps) arrives
    with Spark's progress event, after the commit: :meth:`completed` then builds the
    :class:`BatchWritten` event from what the write measured.
    """

    def __init__(
        self,
        flow: FlowSpec,
        checkpoint: Path,
        sink_options: Mapping[str, str],
        target: TargetOffsets,
        target_ends: TargetEnds | None = None,
        unclean: UncleanElections | None = None,
        recount: bool = True,
        kept: KeptPositions | None = None,
        topic_ids: Mapping[str, str] | None = None,
        may_write: Callable[[], bool] | None = None,
    ) -> None:
        """``recount``: records found on the target past where the flow last saw its end (a
        cut batch's, landing late) refuse the batch (``late_writes``), so that the flow counts
        them again before writing; otherwise they are reported. ``kept``: where the pairs
        (source position, target end) after each write are kept in Kafka, with the source
        topics' ``topic_ids``. ``may_write``: whether this instance holds the flow's lease (a
        batch is refused without it, as at a stop)."""
        self.flow = flow
        self.checkpoint = checkpoint
        self.sink_options = dict(sink_options)
        self.target = target
        # exactly once on the target: where the target ended at each source position
        self.target_ends = target_ends
        # the check for unclean leader elections on the source, and what it found that stops
        # the flow (mirror.fail.on.data.loss=true)
        self.unclean = unclean
        self.source_lost: str | None = None
        self.recount = recount
        self.kept = kept
        self.topic_ids = dict(topic_ids or {})
        # one writer per flow: whether this instance holds the flow's lease
        self.may_write = may_write
        # what reached the target late (the flow restarts the query, counting it again)
        self.late_writes: str | None = None
        self._written: dict[int, WrittenRanges] = {}
        self._lock = threading.Lock()
        self.stopping = threading.Event()
        self.refused = threading.Event()
        # set while a write runs, and left set when it did not end normally: records of it may
        # still be in the producer's buffer
        self.writing = threading.Event()
        # set while Spark runs this function for a batch (planning a batch, or waiting for
        # the source's offsets, is not writing one: a stop need not wait for it)
        self.in_batch = threading.Event()
        # per target partition: (source position, target end) read right after the last batch
        # this writer wrote; the next batch starts there unless something else wrote meanwhile
        self._last_after: dict[tuple[str, int], tuple[int, int]] = {}
        self._java_options: Any = None
        # set by the flow once its query runs: whether the query is still active (not stopped)
        self.query_active: Callable[[], bool] | None = None

    def __call__(self, frame: Any, batch_id: int) -> None:
        self.in_batch.set()
        try:
            self._write(frame, batch_id)
        except StoppingBetweenBatches:
            raise
        except Exception as exc:
            if not self.stopping.is_set():
                raise
            # the stop interrupted the write past its grace period (the Java
            # InterruptedException): the query ends as stopped
            raise _interruption(
                f"flow {self.flow.name}: batch {batch_id} interrupted by the stop", exc) from None
        finally:
            self.in_batch.clear()

    def _write(self, frame: Any, batch_id: int) -> None:
        if self.stopping.is_set() or (self.may_write is not None and not self.may_write()):
            self.refused.set()
            self._refuse(frame, batch_id)
        start = batch_start_positions(self.checkpoint, batch_id) or {}
        end = batch_end_positions(self.checkpoint, batch_id) or {}
        clock = time.perf_counter()
        self._check_source(frame, start, end, batch_id)
        timings = {"sourceEpochs": _ms_since(clock)}
        moved = [tp for tp, offset in end.items() if offset > start.get(tp, offset)]
        partitions = sorted({(self.flow.target_topic(t), p) for t, p in moved})
        clock = time.perf_counter()
        before = self._ends_before(moved, start)
        if before is None:
            before = self._end_offsets(partitions, batch_id)
            late = self._late_writes(moved, start, before, batch_id)
            if late and self.recount:
                self.late_writes = late
                self.refused.set()
                self._refuse(frame, batch_id)
            self._record_target_ends(moved, start, before, batch_id, "before")
        timings["targetEndsBefore"] = _ms_since(clock)
        # the options as one Java map built once: a py4j round trip per option and batch would
        # cost tens of ms on the hot path
        if self._java_options is None:
            self._java_options = frame.sparkSession._jvm.java.util.HashMap(self.sink_options)
        writer = frame._jdf.write().format("kafka").options(self._java_options)
        clock = time.perf_counter()
        self.writing.set()
        writer.save()
        self.writing.clear()
        timings["write"] = _ms_since(clock)
        clock = time.perf_counter()
        after = self._end_offsets(partitions, batch_id) if before or self.target_ends else {}
        self._report_foreign_writes(moved, start, end, before, after, batch_id)
        self._record_target_ends(moved, end, after, batch_id, "after")
        timings["targetEndsAfter"] = _ms_since(clock)
        self._last_after = {
            tp: (end[(topic, partition)], after[tp])
            for topic, partition in moved
            if (tp := (self.flow.target_topic(topic), partition)) in after
        }
        if self.kept is not None and self.target_ends is not None:
            clock = time.perf_counter()
            self._keep(moved, end, after, batch_id)
            timings["keptPositions"] = _ms_since(clock)
        with self._lock:
            self._written[batch_id] = WrittenRanges(start, end, before, after, timings)
            for old in [b for b in self._written if b < batch_id - 100]:
                del self._written[old]

    def _check_source(self, frame: Any, start: Mapping[tuple[str, int], int],
                      end: Mapping[tuple[str, int], int], batch_id: int) -> None:
        """Before the batch reads the source: records an unclean leader election took out of
        the source's log stop the flow (``source_lost`` says why; the batch is refused once the
        flow stopped the query) or are reported."""
        if self.unclean is None:
            return
        try:
            lost = self.unclean.check_batch(dict(start), dict(end))
        except Exception as exc:
            log.warning("flow %s: batch %d: the source's leader epochs were not read (%s); "
                        "the next batch checks again", self.flow.name, batch_id, reason(exc))
            return
        if not lost:
            return
        source = self.flow.source.alias
        if self.flow.fail_on_data_loss:
            self.source_lost = stop_reason(source, lost)
            self.refused.set()
            self._refuse(frame, batch_id)
        log.warning("flow %s: batch %d: %s", self.flow.name, batch_id, skip_notice(source, lost))

    def _refuse(self, frame: Any, batch_id: int) -> NoReturn:
        """Refuse the batch once the flow stopped the query (or after REFUSAL_WAIT_SECONDS):
        see :class:`StoppingBetweenBatches`."""
        deadline = time.monotonic() + REFUSAL_WAIT_SECONDS
        while self.query_active is not None and time.monotonic() < deadline:
            try:
                if not self.query_active():
                    break
            except Exception:  # the query is gone
                break
            time.sleep(0.02)
        message = f"flow {self.flow.name}: stopping before batch {batch_id}"
        log.info("flow %s: batch %d not written (stopping); it is read again on the next start",
                 self.flow.name, batch_id)
        thread = frame.sparkSession._jvm.java.lang.Thread
        try:
            thread.currentThread().interrupt()
            thread.sleep(1)  # throws the InterruptedException (and clears the interrupt)
        except Exception as interrupted:
            raise _interruption(message, interrupted) from None
        raise StoppingBetweenBatches(message)

    def _ends_before(self, moved: list[tuple[str, int]], start: Mapping[tuple[str, int], int]
                     ) -> dict[tuple[str, int], int] | None:
        """The target's end offsets before this batch without asking the target, when the
        previous batch of this writer ended every moved partition exactly where this one starts
        (read right after that write, and already recorded for exactly once); None otherwise.
        Records another producer appended to those partitions in between are not seen: offset
        translation then counts them in the batch's span and takes the batch as inexact, and a
        restart after a cut batch resumes that partition at-least-once (never loses records)."""
        last, self._last_after = self._last_after, {}
        before = {}
        for topic, partition in moved:
            tp = (self.flow.target_topic(topic), partition)
            known = last.get(tp)
            if known is None or (topic, partition) not in start or \
                    known[0] != start[(topic, partition)]:
                return None
            before[tp] = known[1]
        return before

    def _late_writes(self, moved: list[tuple[str, int]], start: Mapping[tuple[str, int], int],
                     before: Mapping[tuple[str, int], int], batch_id: int) -> str:
        """Exactly once on the target: records that reached a target partition after the flow
        last saw where it ended at this batch's source position (the last committed batch, or
        the restart that counted a cut batch), named; empty when none did. They are a cut
        batch's that landed late (a request a throttling broker held back; records a broker
        that stopped mid-write finds in its log at its next start, below its end offset for a
        while) or another writer's. With ``recount`` the batch is refused and the flow counts
        them at its restart (a cut batch's are skipped, another writer's make the partition
        at-least-once); without, they are reported: if they are this flow's, they are on the
        target twice."""
        if self.target_ends is None:
            return ""
        found = []
        for topic, partition in moved:
            target = (self.flow.target_topic(topic), partition)
            expected = self.target_ends.target_end((topic, partition), start[(topic, partition)])
            if expected is not None and target in before and before[target] > expected:
                found.append(f"{target[0]}[{partition}] holds {before[target] - expected} "
                             f"records more (offsets {expected}..{before[target] - 1}) than when "
                             f"the flow last saw its end at source offset "
                             f"{start[(topic, partition)]}")
        if not found:
            return ""
        late = "; ".join(found)
        if self.recount:
            log.warning("flow %s: batch %d: %s: written after the flow counted what the target "
                        "held (a cut batch's records landing late, or another writer); the "
                        "query restarts to count them before writing", self.flow.name, batch_id,
                        late)
        else:
            log.warning("flow %s: batch %d: %s: written by another producer (an earlier run's "
                        "requests the broker held back, e.g. under a quota throttle, or another "
                        "writer); if they are this flow's, they are on the target twice",
                        self.flow.name, batch_id, late)
        return late

    def _report_foreign_writes(
        self, moved: list[tuple[str, int]], start: Mapping[tuple[str, int], int],
        end: Mapping[tuple[str, int], int], before: Mapping[tuple[str, int], int],
        after: Mapping[tuple[str, int], int], batch_id: int,
    ) -> None:
        """A target partition that grew by more offsets than the batch read from its source
        partition took records of another producer meanwhile (see :meth:`_late_writes`)."""
        for topic, partition in moved:
            target = (self.flow.target_topic(topic), partition)
            if target not in before or target not in after:
                continue
            extra = (after[target] - before[target]) - (end[(topic, partition)]
                                                        - start[(topic, partition)])
            if extra > 0:
                log.warning(
                    "flow %s: batch %d: %s[%d] grew by %d records more than the batch copied "
                    "(offsets %d..%d): written by another producer (an earlier run's requests "
                    "the broker held back, e.g. under a quota throttle, or another writer); if "
                    "they are this flow's, they are on the target twice", self.flow.name,
                    batch_id, target[0], partition, extra, before[target], after[target] - 1)

    def _record_target_ends(
        self, moved: list[tuple[str, int]], source: Mapping[tuple[str, int], int],
        target: Mapping[tuple[str, int], int], batch_id: int, when: str,
    ) -> None:
        """Exactly once on the target: store, before Spark can commit the batch, where each
        moved partition's target ended at the given source position. Without them a restart
        could not tell what a cut batch wrote, so the batch fails instead (it is retried, and
        the retry skips what is already on the target)."""
        if self.target_ends is None or not moved:
            return
        pairs = {}
        for topic, partition in moved:
            ended = target.get((self.flow.target_topic(topic), partition))
            if ended is None or (topic, partition) not in source:
                raise MirrorError(
                    f"flow {self.flow.name}: batch {batch_id}: the target's end offsets {when} "
                    "the write were not read; the batch is retried (mirror.exactly.once.target)")
            pairs[(topic, partition)] = (source[(topic, partition)], ended)
        self.target_ends.record(pairs)

    def _keep(self, moved: list[tuple[str, int]], end: Mapping[tuple[str, int], int],
              after: Mapping[tuple[str, int], int], batch_id: int) -> None:
        """The pairs after the write to the positions kept in Kafka; a failure fails the batch
        (retried) so that what Kafka holds never falls far behind."""
        assert self.kept is not None
        pairs = {(topic, partition): (end[(topic, partition)], ended) for topic, partition in moved
                 if (ended := after.get((self.flow.target_topic(topic), partition))) is not None}
        try:
            self.kept.keep(pairs, self.topic_ids)
        except MirrorError as exc:
            raise MirrorError(
                f"flow {self.flow.name}: batch {batch_id}: {exc}; the batch is retried "
                "(mirror.positions.in.kafka=false keeps the positions in the state dir alone)"
            ) from exc

    def _end_offsets(
        self, partitions: list[tuple[str, int]], batch_id: int
    ) -> dict[tuple[str, int], int]:
        """The target's end offsets; {} when the target does not answer (then this batch
        records no ranges: translation stays conservative, never wrong)."""
        try:
            return self.target.end_offsets(partitions, timeout=10.0)
        except Exception as exc:
            log.warning("flow %s: batch %d: target offsets not read (%s); no offset sync for "
                        "this batch", self.flow.name, batch_id, exc)
            return {}

    def completed(self, batch_id: int, records: int, size: int) -> BatchWritten | None:
        """The batch's event once Spark committed it and reported how many records it held."""
        with self._lock:
            ranges = self._written.pop(batch_id, None)
        if ranges is None:
            return None
        copies = partition_copies(
            self.flow, ranges.source_start, ranges.source_end, ranges.target_before,
            ranges.target_after, records,
        )
        return BatchWritten(self.flow, batch_id, tuple(copies), records, size, ranges.timings)


def _ms_since(clock: float) -> float:
    return (time.perf_counter() - clock) * 1000.0


def run_write_hooks(hooks: Sequence[WriteHook], event: BatchWritten) -> None:
    """Each hook in turn; one that fails does not stop the others. A named failure (a cluster
    that did not answer, e.g. offset syncs not acknowledged in time) is a warning; anything else
    is a defect, logged with its stack."""
    for hook in hooks:
        try:
            hook.on_written(event)
        except MirrorError as exc:
            log.warning("flow %s: batch hook %s failed: %s", event.flow.name,
                        type(hook).__name__, exc)
        except Exception:
            log.exception("flow %s: batch hook %s failed", event.flow.name, type(hook).__name__)
