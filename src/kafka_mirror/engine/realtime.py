"""Real-time mode (``mirror.mode = realtime``): where each record landed, without batch
boundaries to measure the target around.

In Spark's real-time mode every task reads its group of source partitions and Spark's Kafka sink
sends each record as soon as it is read; every ``mirror.realtime.batch.duration.ms`` the tasks
flush and Spark commits the positions they reached. There is no ``foreachBatch`` (Spark refuses
it in this mode), so the flow's producer interceptor does what :class:`BatchWriter` does around
a micro-batch: each record carries its source offset in a header, and when the target
acknowledges it the interceptor pairs that offset with the record's target offset
(``io.kafkamirror.CopiedRanges``). Consecutive pairs form ranges that map one to one;
:class:`RealTimeWriter` drains them into :class:`BatchWritten` events for offset translation and
offset syncs, like the batch writer's.

The ranges also say where a run may resume: after the last record the target acknowledged
(:mod:`kafka_mirror.engine.acked_positions`), not at the last batch Spark committed; and they
count the records and bytes acknowledged, so the flow's progress (metrics, lag, readiness) is
reported at every drain (:class:`RealTimeProgress`), not once per batch. The batch duration is
then only a checkpoint interval: Spark's default of 5 minutes.

Trade-offs, against micro-batch mode: a task slot per group of source partitions (one per
two cores by default, :func:`realtime_groups`) for as long as the flow runs (tasks never end
between records), and exactly once only through the flow's restart proof
(``mirror.exactly.once.target``, the default: every drain records the target's ends after the
acknowledged records, and a restart after ``kill -9`` proves and skips what the target got
since); without it a crash re-sends the records acknowledged since the last drain (about a
second's worth). A stop re-sends none either way.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kafka_mirror.config.model import FlowSpec
from kafka_mirror.engine.batch_writer import BatchWritten, PartitionCopy
from kafka_mirror.engine.batches import BatchCommitted
from kafka_mirror.engine.jvm_statics import JvmStatics
from kafka_mirror.engine.positions import Positions
from kafka_mirror.engine.quiet_stop import REALTIME_STOP_NOISE, stop_quietly
from kafka_mirror.errors import MirrorError
from kafka_mirror.state.offset_ranges import CopiedRange

log = logging.getLogger(__name__)

# where the interceptor records the ranges the target acknowledged (jvm/interceptor)
COPIED_RANGES = "io.kafkamirror.CopiedRanges"
# the source's readers open per run (jvm/source): a stopped run's tasks may still be sending
OPEN_READERS = "io.kafkamirror.source.OpenReaders"


def new_run_key(flow: FlowSpec) -> str:
    """The interceptor's key for one query run of ``flow`` (a producer of its own)."""
    return f"{flow.path_name}:{uuid.uuid4().hex}"


def parse_ranges(flow: FlowSpec, assignment: Mapping[str, int], text: str,
                 batch_id: int = -1) -> BatchWritten:
    """The interceptor's lines (target topic, partition, source start/end, target start/end,
    exact, records, bytes, largest age in ms) as copies of the flow's source partitions, with
    the records and bytes acknowledged and the largest age one had then; lines of other topics
    are dropped."""
    sources = {flow.target_topic(topic): topic for topic in assignment}
    copies = []
    records = size = 0
    oldest = -1
    for line in text.splitlines():
        fields = line.split("\t")
        if len(fields) != 10 or fields[0] not in sources:
            continue
        (partition, source_start, source_end, target_start, target_end, exact, count, nbytes,
         age) = (int(value) for value in fields[1:])
        copies.append(PartitionCopy(
            sources[fields[0]], partition, fields[0],
            CopiedRange(source_start, source_end, target_start, target_end, exact == 1)))
        records += count
        size += nbytes
        oldest = max(oldest, age)
    return BatchWritten(flow, batch_id, tuple(copies), records, size, age_max_ms=float(oldest))


class RealTimeProgress:
    """A real-time flow's progress after every drain (about once a second), not only at Spark's
    batch ends: the records and bytes the target acknowledged since the last report, the
    positions they reached and the source's end offsets, as the :class:`BatchCommitted` events
    micro-batch mode reports per batch (metrics, readiness, the progress log). So the batch
    duration, which sets how rarely Spark pauses every partition to commit, is free to be long.
    A batch end adds its id and duration; counts of a drain whose report failed (the source's
    end offsets not read) go with the next report."""

    def __init__(self, flow: FlowSpec) -> None:
        self.flow = flow
        self.records = 0
        self.bytes = 0
        self.oldest_ms = -1.0
        self._position: Positions = {}
        self._at = time.monotonic()

    def add(self, written: BatchWritten | None) -> None:
        if written is not None:
            self.records += written.records
            self.bytes += written.bytes
            self.oldest_ms = max(self.oldest_ms, written.age_max_ms)

    def report(self, positions: Positions, latest: Positions, batch_id: int = -1,
               duration: float = 0.0) -> BatchCommitted:
        """The event since the last report (``batch_id`` -1: a drain, not a batch end)."""
        now = time.monotonic()
        elapsed = now - self._at
        rate = self.records / elapsed if elapsed > 0 else 0.0
        event = BatchCommitted(
            flow=self.flow, batch_id=batch_id,
            source_start=self._position if self.records else dict(positions),
            source_end=dict(positions), source_latest=dict(latest), target_end={},
            records=self.records, bytes=self.bytes, input_rate=rate, process_rate=rate,
            duration=duration, planned=time.time(),
            observed={"age_max_ms": self.oldest_ms} if self.oldest_ms >= 0 else {})
        self.records = self.bytes = 0
        self.oldest_ms = -1.0
        self._position = dict(positions)
        self._at = now
        return event


def realtime_groups(flow: FlowSpec, assignment: Mapping[str, int], slots: int, taken: int,
                    cores: int) -> int:
    """How many groups of partitions a real-time query reads: one long-running task each (one
    Kafka consumer for the group's partitions): ``mirror.realtime.groups``, or by default one per
    two cores (at least one), never more than the partitions or the task slots other real-time
    flows left free (``taken``: theirs, and one for micro-batch flows' tasks if there are any);
    fails naming ``spark.master`` when none is free.

    Half the cores, not all of them: each task reads and sends on one thread, while the sink's
    producer sends from a thread of its own and the driver works beside them; on 2 cores one
    group had a lower replication latency tail than two at 5,000 records/s over 8 partitions
    (docs/benchmarks.md, "Real-time groups"), at no more CPU."""
    free = slots - taken
    if free < 1:
        raise MirrorError(
            f"flow {flow.name}: real-time mode needs a free Spark task slot: all {slots} are "
            "held by other real-time flows (or kept for micro-batch flows' tasks); give Spark "
            "more slots (spark.master local[N] or "
            "more executor cores) or use mirror.mode = micro-batch")
    wanted = flow.realtime_groups or max(1, cores // 2)
    return max(1, min(sum(assignment.values()), free, wanted))


class RealTimeWriter:
    """Stands where a flow's :class:`BatchWriter` stands in micro-batch mode: the sink options
    of one query run, and its :class:`BatchWritten` events, built from the ranges the
    interceptor recorded (drained on every tick of the flow's upkeep and at every committed
    batch)."""

    def __init__(self, flow: FlowSpec, checkpoint: Path, sink_options: Mapping[str, str],
                 run_key: str, assignment: Mapping[str, int]) -> None:
        self.flow = flow
        self.checkpoint = checkpoint
        self.sink_options = dict(sink_options)
        self.run_key = run_key
        self.assignment = dict(assignment)
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._jvm: Any = None
        self._ranges: JvmStatics | None = None
        self._readers: JvmStatics | None = None
        self._local = True  # the run's tasks run in the driver's JVM (Spark's local mode)
        # after the stop: the run's tasks ended and the target acknowledged what they sent,
        # everywhere (not known with executors in other JVMs)
        self.settled_everywhere = False

    def attach(self, spark: Any) -> None:
        self._jvm = spark.sparkContext._jvm
        self._ranges = JvmStatics(self._jvm, COPIED_RANGES)
        self._readers = JvmStatics(self._jvm, OPEN_READERS)
        self._local = str(spark.sparkContext.master).startswith("local")

    def drain(self, batch_id: int = -1) -> BatchWritten | None:
        """The ranges recorded since the last drain, as one event with the records and bytes
        they hold; None when there are none (or the JVM does not answer: translation then
        stays where it was, never wrong, and the counts wait for the next drain)."""
        if self._ranges is None:
            return None
        with self._lock:
            try:
                text = str(self._ranges.call("drain", self.run_key))
            except Exception as exc:
                log.debug("flow %s: copied ranges not read (%s)", self.flow.name, exc)
                return None
        written = parse_ranges(self.flow, self.assignment, text, batch_id)
        return written if written.copies else None

    def failure(self) -> str | None:
        """The first record of the run the target failed (the producer gave up on it), as
        ``cluster '<target>' refused <source topic>[p] offset N -> <target topic>[p]:
        <Exception>: <message>``; None while none failed (or the JVM does not answer). Spark's
        sink would report it only with the task's next record or at the batch's end, minutes
        later when no record follows; executors in other JVMs report theirs that way."""
        if self._ranges is None:
            return None
        try:
            text = str(self._ranges.call("failure", self.run_key))
        except Exception as exc:
            log.debug("flow %s: failed sends not read (%s)", self.flow.name, exc)
            return None
        fields = text.split("\t", 3)
        if len(fields) != 4:
            return None
        target, partition, offset, reason = fields
        sources = {self.flow.target_topic(topic): topic for topic in self.assignment}
        where = (f"{sources.get(target, target)}[{partition}] "
                 + (f"offset {offset}" if offset != "-1" else "a record")
                 + f" -> {target}[{partition}]")
        return f"cluster '{self.flow.target.alias}' refused {where}: {reason}"

    def settle(self, timeout: float) -> bool:
        """After the query stopped: waits (at most ``timeout`` seconds) until the run's tasks in
        this JVM ended and the target acknowledged or failed every record its producer had sent,
        so the last drain holds them all and nothing of the run reaches the target after it.
        ``query.stop()`` returns before that: Spark cancels the query's job and its scheduler
        interrupts the tasks later, and a task goes on copying records until then. Executors in
        other JVMs are not waited for (:attr:`settled_everywhere` stays false: the restart then
        waits until the target's end offsets stand still)."""
        if self._ranges is None or self._readers is None:
            return True
        began = deadline = time.monotonic()
        deadline += timeout
        for statics, name, what in ((self._readers, "open", "tasks"),
                                    (self._ranges, "pending", "records in flight")):
            while True:
                try:
                    left = int(statics.call(name, self.run_key))
                except Exception as exc:
                    log.debug("flow %s: %s not read (%s)", self.flow.name, what, exc)
                    return False
                if left == 0:
                    break
                if time.monotonic() >= deadline:
                    return False
                time.sleep(0.02)
        log.debug("flow %s: the stopped run's tasks ended and its records were acknowledged "
                  "%.3f s after the stop", self.flow.name, time.monotonic() - began)
        self.settled_everywhere = self._local
        return True

    def stop_quietly(self, query: Any) -> None:
        """Stops the query; the interrupted tasks' errors are not logged (they are expected)."""
        stop_quietly(self._jvm, query, REALTIME_STOP_NOISE)

    def forget(self) -> None:
        """The run's query stopped: its producer's ranges are drained, then dropped."""
        if self._ranges is not None:
            with contextlib.suppress(Exception):
                self._ranges.call("forget", self.run_key)
