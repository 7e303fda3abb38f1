"""Exactly once on the target without target transactions (``mirror.exactly.once.target``).

A micro-batch cut short (``kill -9``, a broker fault, a query restart) left, per partition, a
prefix of its records on the target: Spark's Kafka sink writes each partition's records in order
through an idempotent producer (``acks=all``, at most 5 requests in flight), so the target
partition holds the batch's first ``n`` records and nothing else. Spark replays the whole batch
from its last committed position ``S``; writing its first ``n`` records again would duplicate
them. So on every (re)start of a flow's query, per source partition:

1. ``T``, the target's end offset when the source position was ``S``, comes from
   :class:`TargetEnds`: the batch writer records ``(source start, target end before)`` before it
   writes a batch and ``(source end, target end after)`` after the write, both fsync'd inside
   ``foreachBatch``, i.e. before Spark can commit the batch.
2. ``E``, the target's end offset now. ``E - T = n`` records of the cut batch are there.
3. The source is read from ``S`` (read_committed, as Spark reads it; only the record count of
   each poll crosses py4j) until the ``n``-th record; offsets may have gaps (compaction,
   transaction markers, aborted records), so the count is of records, never of offsets.
4. The prefix is checked: the target records at ``T`` and ``E - 1`` must equal the first and the
   ``n``-th source record in key, value, headers and timestamp (the interceptor restores the
   source timestamp and removes its header, so they are equal when the mirror wrote them).
5. The query starts after the ``n``-th record; the range ``[S, S')`` maps to ``[T, E)`` for
   offset translation and offset syncs.

When the source no longer holds the records from ``S`` (retention or deleted records since the
cut), they cannot be read: the prefix is then the one the batch writer recorded after its write,
a pair ``(S', E)`` with the target's end ``E`` as it is now.

Whatever cannot be proven (no ``T`` recorded for ``S``; ``E < T``: the target was truncated or
recreated; the source has fewer records past ``S`` than the target past ``T``; a record that
differs) falls back to at-least-once for that partition with a warning: nothing is skipped that
is not on the target.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafka_mirror.engine.jvm_admin import java_properties
from kafka_mirror.state.files import read_json, write_json

log = logging.getLogger(__name__)

TARGET_ENDS_FILE = "target-ends.json"
# (source position, target end) pairs kept per partition: the start and end of the last batches
HISTORY = 6
POLL_RECORDS = 10_000
# a partition's count longer than this falls back to at-least-once (the restart runs on the
# flow's own thread; /health/live allows a restart 10 minutes)
COUNT_SECONDS = 25.0
WAIT_SECONDS = 20.0
# threads proving the prefixes of a restart's partitions, each with a source and a target reader
PROOF_THREADS = 8
Key = tuple[str, int]


class TargetEnds:
    """Per source partition, where the target partition ended when the flow's source position
    was a given offset: the last :data:`HISTORY` pairs, in a file of the flow's state."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self.pairs: dict[Key, list[tuple[int, int]]] = read_json(
            path, lambda entries: {(e["topic"], int(e["partition"])): [
                (int(s), int(t)) for s, t in e["pairs"]] for e in entries},
            "a batch cut short before this start resumes at-least-once") or {}

    def record(self, pairs: Mapping[Key, tuple[int, int]]) -> None:
        """Remember ``(source position, target end)`` per partition; on disk (fsync'd) when
        this returns."""
        if not pairs:
            return
        with self._lock:
            for tp, pair in pairs.items():
                known = [p for p in self.pairs.get(tp, []) if p[0] != pair[0]]
                known.append(pair)
                self.pairs[tp] = known[-HISTORY:]
            self._save()

    def target_end(self, tp: Key, source_position: int) -> int | None:
        with self._lock:
            for source, target in reversed(self.pairs.get(tp, [])):
                if source == source_position:
                    return target
        return None

    def pair_at_or_before(self, tp: Key, source_position: int) -> tuple[int, int] | None:
        """The newest pair recorded at or before ``source_position`` (real-time mode: a
        position Spark committed past the last drain resumes from the drain's pair)."""
        with self._lock:
            found = [pair for pair in self.pairs.get(tp, []) if pair[0] <= source_position]
        return max(found) if found else None

    def first_position(self, tp: Key) -> int | None:
        """The oldest source position recorded (where the partition's first query started,
        for one that never committed a batch)."""
        with self._lock:
            pairs = self.pairs.get(tp)
            return pairs[0][0] if pairs else None

    def position_at(self, tp: Key, target_end: int) -> int | None:
        """The newest source position recorded with ``target_end`` (after a write: every
        source record before it is on the target below ``target_end``)."""
        with self._lock:
            for source, target in reversed(self.pairs.get(tp, [])):
                if target == target_end:
                    return source
        return None

    def has(self, tp: Key) -> bool:
        with self._lock:
            return bool(self.pairs.get(tp))

    def topics(self) -> set[str]:
        with self._lock:
            return {topic for topic, _ in self.pairs}

    def drop_topic(self, topic: str) -> None:
        with self._lock:
            dropped = [k for k in self.pairs if k[0] == topic]
            for tp in dropped:
                del self.pairs[tp]
            if dropped:
                self._save()

    def _save(self) -> None:
        data = [{"topic": t, "partition": p, "pairs": pairs}
                for (t, p), pairs in sorted(self.pairs.items())]
        write_json(self.path, data, durable=True)


@dataclass(frozen=True)
class RecordView:
    """What the prefix check compares of one record."""

    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int

    def same_as(self, other: RecordView) -> bool:
        return (self.key, self.value, self.headers, self.timestamp) == (
            other.key, other.value, other.headers, other.timestamp)


@dataclass(frozen=True)
class Counted:
    """The first record at or after the start, and the ``n``-th one."""

    first: RecordView
    nth: RecordView


class JvmRecordReader:
    """Reads a few records of one cluster with a Java ``KafkaConsumer`` (byte arrays) in the
    Spark driver's JVM, through py4j; no group, no commits."""

    def __init__(self, spark: Any, props: Mapping[str, str]) -> None:
        jvm = spark._jvm
        settings = dict(props) | {
            "key.deserializer": "org.apache.kafka.common.serialization.ByteArrayDeserializer",
            "value.deserializer": "org.apache.kafka.common.serialization.ByteArrayDeserializer",
            "enable.auto.commit": "false",
            "auto.offset.reset": "none",
            "max.poll.records": str(POLL_RECORDS),
        }
        # large fetches: counting reads whole record batches, only counts cross py4j
        for key, value in (("max.partition.fetch.bytes", "8388608"),
                           ("fetch.max.bytes", "67108864")):
            settings.setdefault(key, value)
        for name in ("group.id", "group.instance.id", "interceptor.classes"):
            settings.pop(name, None)
        self._jvm = jvm
        self._consumer = jvm.org.apache.kafka.clients.consumer.KafkaConsumer(
            java_properties(jvm, settings))

    def _assign(self, topic: str, partition: int, offset: int) -> Any:
        jvm = self._jvm
        tp = jvm.org.apache.kafka.common.TopicPartition(topic, partition)
        self._consumer.assign(jvm.java.util.Collections.singletonList(tp))
        self._consumer.seek(tp, offset)
        return tp

    def _poll(self, tp: Any) -> Any:
        duration = self._jvm.java.time.Duration.ofMillis(500)
        return self._consumer.poll(duration).records(tp)

    def end_offset(self, topic: str, partition: int) -> int:
        """The partition's end offset (also what a standby asks once, so that the consumer's
        code is loaded before a takeover's proof needs it)."""
        return self._end(self._jvm.org.apache.kafka.common.TopicPartition(topic, partition))

    def _end(self, tp: Any) -> int:
        ends = self._consumer.endOffsets(self._jvm.java.util.Collections.singletonList(tp))
        return int(ends.get(tp))

    @staticmethod
    def view(record: Any) -> RecordView:
        headers = tuple(
            (str(h.key()), None if h.value() is None else bytes(h.value()))
            for h in record.headers().toArray()
        )
        key, value = record.key(), record.value()
        return RecordView(
            int(record.offset()),
            None if key is None else bytes(key),
            None if value is None else bytes(value),
            headers,
            int(record.timestamp()),
        )

    def count(self, topic: str, partition: int, start: int, n: int,
              timeout: float = COUNT_SECONDS) -> Counted | str:
        """The first record at or after ``start`` and the ``n``-th (n >= 1); or why not."""
        tp = self._assign(topic, partition, start)
        end = self._end(tp)
        seen = 0
        first: RecordView | None = None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            records = self._poll(tp)
            size = int(records.size())
            if size:
                if first is None:
                    first = self.view(records.get(0))
                if seen + size >= n:
                    return Counted(first, self.view(records.get(n - seen - 1)))
                seen += size
            elif int(self._consumer.position(tp)) >= end:
                return (f"the source holds {seen} records from offset {start} to its end "
                        f"{end}, fewer than the {n} on the target")
        return f"timed out after {timeout:.0f} s counting {n} records from offset {start}"

    def record_at(self, topic: str, partition: int, offset: int,
                  timeout: float = 30.0) -> RecordView | None:
        """The first record at or after ``offset``."""
        tp = self._assign(topic, partition, offset)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            records = self._poll(tp)
            if int(records.size()):
                return self.view(records.get(0))
            if int(self._consumer.position(tp)) >= self._end(tp):
                return None
        return None

    def close(self) -> None:
        self._consumer.close(self._jvm.java.time.Duration.ofSeconds(5))


@dataclass(frozen=True)
class Skip:
    """Source records ``[source_start, resume)`` of ``topic[partition]`` are already at target
    offsets ``[target_start, target_end)``."""

    topic: str
    partition: int
    source_start: int
    resume: int
    target_start: int
    target_end: int

    @property
    def records(self) -> int:
        return self.target_end - self.target_start

    @property
    def exact(self) -> bool:
        """Offsets map one to one (no gap among the skipped source offsets)."""
        return self.resume - self.source_start == self.records


@dataclass
class RestartPlan:
    """Where each partition resumes, what is skipped, and the partitions that fall back."""

    positions: dict[Key, int]
    skips: list[Skip]
    fallbacks: dict[Key, str]
    # the target's end of each partition that falls back (where the next batch starts writing)
    fallback_ends: dict[Key, int] = field(default_factory=dict)


def plan_restart(
    known: Mapping[Key, int],
    target_topic: Callable[[str], str],
    target_ends: TargetEnds,
    end_offsets: Callable[[list[Key]], dict[Key, int]],
    source: Callable[[], JvmRecordReader],
    target: Callable[[], JvmRecordReader],
    log_starts: Callable[[list[Key]], Mapping[Key, int]] | None = None,
    threads: int = PROOF_THREADS,
) -> RestartPlan:
    """Per partition with a committed position ``S`` and a recorded target end ``T``: skip the
    records of the cut batch that are on the target (module docstring). ``end_offsets`` reads
    the target's end offsets (keys are target topic partitions); the readers are created only
    when a partition needs them; ``log_starts`` are the source's (records below them are gone:
    the prefix is the recorded one), read only for partitions whose target grew. The prefixes are
    proven on up to ``threads`` threads."""
    recorded = {tp: target_ends.target_end(tp, s) for tp, s in known.items()}
    wanted = {tp: t for tp, t in recorded.items() if t is not None}
    plan = RestartPlan(dict(known), [], {})
    if not wanted:
        return plan
    by_target = {(target_topic(t), p): (t, p) for t, p in wanted}
    ends = end_offsets(sorted(by_target))
    grown = sorted(tp for target_tp, tp in by_target.items()
                   if ends.get(target_tp) not in (None, wanted[tp]))
    starts = log_starts(grown) if log_starts is not None and grown else {}
    outcomes: dict[Key, Skip | str] = {}
    proofs: list[tuple[Key, str, int]] = []
    for (ttopic, partition), tp in sorted(by_target.items()):
        now = ends.get((ttopic, partition))
        if now is None or now == wanted[tp]:
            continue
        if starts.get(tp, -1) > known[tp]:
            outcomes[tp] = _recorded_prefix(target_ends, tp, ttopic, known[tp], wanted[tp], now,
                                            starts[tp])
        else:
            proofs.append((tp, ttopic, now))
    outcomes |= _prove_all(proofs, known, wanted, source, target, threads)
    for tp, outcome in sorted(outcomes.items()):
        if isinstance(outcome, str):
            plan.fallbacks[tp] = outcome
            plan.fallback_ends[tp] = ends[(target_topic(tp[0]), tp[1])]
        else:
            plan.positions[tp] = outcome.resume
            plan.skips.append(outcome)
    return plan


def _prove_all(proofs: list[tuple[Key, str, int]], known: Mapping[Key, int],
               wanted: Mapping[Key, int], source: Callable[[], JvmRecordReader],
               target: Callable[[], JvmRecordReader], threads: int) -> dict[Key, Skip | str]:
    """The prefixes of ``proofs`` (source partition, target topic, target end now), proven on
    up to ``threads`` threads, each with readers of its own (a consumer is one thread's): each
    proof waits on fetches, so a takeover after kill -9 proves every partition of the cut batch
    in about the time of one."""
    lanes = [proofs[i::threads] for i in range(min(threads, len(proofs)))]

    def prove(lane: list[tuple[Key, str, int]]) -> dict[Key, Skip | str]:
        with _Readers(source, target) as readers:
            return {tp: _prove_prefix(readers, tp, ttopic, known[tp], wanted[tp], now)
                    for tp, ttopic, now in lane}

    if len(lanes) <= 1:
        return prove(proofs)
    outcomes: dict[Key, Skip | str] = {}
    with ThreadPoolExecutor(len(lanes), thread_name_prefix="exactly-once-proof") as pool:
        for done in pool.map(prove, lanes):
            outcomes |= done
    return outcomes


class _Readers:
    """The source's and the target's record readers, each created when first needed and
    closed at the end (closing must not hide the plan)."""

    def __init__(self, source: Callable[[], JvmRecordReader],
                 target: Callable[[], JvmRecordReader]) -> None:
        self._make = {"source": source, "target": target}
        self._open: dict[str, JvmRecordReader] = {}

    def get(self, side: str) -> JvmRecordReader:
        if side not in self._open:
            self._open[side] = self._make[side]()
        return self._open[side]

    def __enter__(self) -> _Readers:
        return self

    def __exit__(self, *_: object) -> None:
        for reader in self._open.values():
            try:
                reader.close()
            except Exception:  # closing must not hide the plan
                log.debug("reader not closed", exc_info=True)


def _recorded_prefix(target_ends: TargetEnds, tp: Key, ttopic: str, start: int, before: int,
                     now: int, log_start: int) -> Skip | str:
    """The skip of one partition whose source records from ``start`` are gone (the log starts
    at ``log_start``): what the batch writer recorded after its last write, when the target
    still ends there."""
    partition = tp[1]
    if now < before:
        return (f"target {ttopic}[{partition}] ends at {now}, before offset {before} where "
                "the mirror left it (truncated, recreated or an unclean leader election)")
    resume = target_ends.position_at(tp, now)
    if resume is None or resume <= start:
        return (f"the source's records of {tp[0]}[{partition}] from offset {start} are gone "
                f"(its log starts at {log_start}) and no write of the mirror's is recorded up "
                f"to target offset {now}")
    return Skip(tp[0], partition, start, resume, before, now)


def _prove_prefix(readers: _Readers, tp: Key, ttopic: str, start: int, before: int, now: int
                  ) -> Skip | str:
    """The skip of one partition whose target grew from ``before`` to ``now`` since the batch
    that starts at source offset ``start`` was cut, or why it cannot be proven (a string)."""
    partition = tp[1]
    if now < before:
        return (f"target {ttopic}[{partition}] ends at {now}, before offset {before} where "
                "the mirror left it (truncated, recreated or an unclean leader election)")
    counted = readers.get("source").count(tp[0], partition, start, now - before)
    if isinstance(counted, str):
        return counted
    last = readers.get("target").record_at(ttopic, partition, now - 1)
    if last is None or last.offset != now - 1 or not last.same_as(counted.nth):
        return (f"target record {ttopic}[{partition}]@{now - 1} is not source record "
                f"{tp[0]}[{partition}]@{counted.nth.offset} (key, value, headers or "
                "timestamp differ): another writer, or not the mirror's batch")
    first = readers.get("target").record_at(ttopic, partition, before)
    if first is not None and first.offset == before and not first.same_as(counted.first):
        return (f"target record {ttopic}[{partition}]@{before} is not source record "
                f"{tp[0]}[{partition}]@{counted.first.offset}: another writer, or not the "
                "mirror's batch")
    return Skip(tp[0], partition, start, counted.nth.offset + 1, before, now)


def producer_buffered(spark: Any, client_id: str) -> int | None:
    """Bytes the producers with ``client_id`` in the driver's JVM hold, sent or not, but not
    acknowledged yet (their buffer memory in use, from the producer's JMX metrics); None when
    the JVM has no such producer (not created yet, or on executors elsewhere)."""
    jvm = spark._jvm
    gateway = spark.sparkContext._gateway
    server = jvm.java.lang.management.ManagementFactory.getPlatformMBeanServer()
    # called through the interface: py4j's reflection on the server's own class (in a package
    # java.management does not export) is refused
    interface = jvm.java.lang.Class.forName("javax.management.MBeanServerConnection")

    def method(name: str, *types: str) -> Any:
        params = gateway.new_array(jvm.java.lang.Class, len(types))
        for index, type_name in enumerate(types):
            params[index] = jvm.java.lang.Class.forName(type_name)
        return interface.getMethod(name, params)

    def call(target: Any, *args: Any) -> Any:
        array = gateway.new_array(jvm.java.lang.Object, len(args))
        for index, arg in enumerate(args):
            array[index] = arg
        return target.invoke(server, array)

    query = method("queryNames", "javax.management.ObjectName", "javax.management.QueryExp")
    attribute = method("getAttribute", "javax.management.ObjectName", "java.lang.String")
    pattern = jvm.javax.management.ObjectName(
        f"kafka.producer:type=producer-metrics,client-id={client_id}")
    names = list(call(query, pattern, None))
    if not names:
        return None
    held = 0
    for bean in names:
        total = float(call(attribute, bean, "buffer-total-bytes"))
        available = float(call(attribute, bean, "buffer-available-bytes"))
        held += int(max(0.0, total - available))
    return held


def wait_producer_idle(spark: Any, client_id: str, timeout: float = WAIT_SECONDS
                       ) -> bool | None:
    """Wait until the flow's producer holds no record that is not acknowledged (or failed):
    True; False after ``timeout``; None when it is not in this JVM."""
    deadline = time.monotonic() + timeout
    while True:
        held = producer_buffered(spark, client_id)
        if held is None:
            return None
        if held == 0:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)


def settle(end_offsets: Callable[[], dict[Key, int]], quiet: float = 3.0,
           timeout: float = WAIT_SECONDS) -> bool:
    """Wait until the target's end offsets stood still for ``quiet`` seconds (records of an
    interrupted write still in a producer's buffer land meanwhile); False after ``timeout``."""
    deadline = time.monotonic() + timeout
    last = end_offsets()
    since = time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = end_offsets()
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return True
    return False
