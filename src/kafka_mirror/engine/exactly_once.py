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
3. The source is read from ``S`` (read_committed, as Spark reads it) until the ``n``-th record;
   offsets may have gaps (compaction, transaction markers, aborted records), so the count is of
   records, never of offsets.
4. The prefix is checked: the target records at ``T`` and ``E - 1`` must equal the first and the
   ``n``-th source record in key, value, headers and timestamp (the interceptor restores the
   source timestamp and removes its header, so they are equal when the mirror wrote them).
5. The query starts after the ``n``-th record; the range ``[S, S')`` maps to ``[T, E)`` for
   offset translation and offset syncs.

Steps 3 and 4 read every partition of the restart together, in the driver's JVM
(``io.kafkamirror.RecordDigests``: one consumer per cluster and one pass over each, the target
read from ``T`` to its ``n``-th record, which must be the one at ``E - 1``; only SHA-256 digests
of the compared records cross py4j): a takeover at 2,000 partitions proves them in about the
time one partition took, not 2,000 times that.

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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafka_mirror.engine.jvm_admin import java_properties, number_list, partition_list
from kafka_mirror.state.files import EncodedRows, read_json

log = logging.getLogger(__name__)

TARGET_ENDS_FILE = "target-ends.json"
# (source position, target end) pairs kept per partition: the start and end of the last batches
HISTORY = 6
POLL_RECORDS = 10_000
# a proof's read that makes no progress for this long: the partitions it has not finished fall
# back to at-least-once (the restart runs on the flow's own thread; /health/live allows a restart
# 10 minutes)
COUNT_SECONDS = 25.0
WAIT_SECONDS = 20.0
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
        self._rows = EncodedRows()
        for tp in self.pairs:
            self._encode(tp)

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
                self._encode(tp)
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
                self._rows.drop(tp)
            if dropped:
                self._save()

    def _encode(self, tp: Key) -> None:
        self._rows.set(tp, {"topic": tp[0], "partition": tp[1], "pairs": self.pairs[tp]})

    def _save(self) -> None:
        self._rows.save(self.path, durable=True)


@dataclass(frozen=True)
class RecordView:
    """What the prefix check compares of one record: its offset, and a digest of its timestamp,
    key, value and headers (``io.kafkamirror.RecordDigests.digest``)."""

    offset: int
    digest: str

    def same_as(self, other: RecordView) -> bool:
        return self.digest == other.digest


@dataclass(frozen=True)
class Counted:
    """The first record at or after the start, and the ``n``-th one."""

    first: RecordView
    nth: RecordView


@dataclass(frozen=True)
class Short:
    """Fewer than ``n`` records from the start to the partition's end: ``seen`` of them."""

    seen: int
    end: int


@dataclass(frozen=True)
class Read:
    """One partition's request of :meth:`JvmRecordReader.first_and_nth`: from offset ``start``,
    the first record and the ``n``-th."""

    topic: str
    partition: int
    start: int
    n: int


# what a read of one partition found: the records, too few of them, or a timeout (str)
Found = Counted | Short | str


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
        # large fetches: a proof reads whole record batches; only digests cross py4j
        for key, value in (("max.partition.fetch.bytes", "8388608"),
                           ("fetch.max.bytes", "67108864")):
            settings.setdefault(key, value)
        for name in ("group.id", "group.instance.id", "interceptor.classes"):
            settings.pop(name, None)
        self._jvm = jvm
        self._consumer = jvm.org.apache.kafka.clients.consumer.KafkaConsumer(
            java_properties(jvm, settings))

    def end_offset(self, topic: str, partition: int) -> int:
        """The partition's end offset (also what a standby asks once, so that the consumer's
        code is loaded before a takeover's proof needs it)."""
        jvm = self._jvm
        tp = jvm.org.apache.kafka.common.TopicPartition(topic, partition)
        ends = self._consumer.endOffsets(jvm.java.util.Collections.singletonList(tp))
        return int(ends.get(tp))

    def first_and_nth(self, reads: Sequence[Read], timeout: float = COUNT_SECONDS
                      ) -> dict[Key, Found]:
        """Per partition of ``reads`` (each partition once): the first record at or after its
        start and the ``n``-th, all partitions in one pass (one py4j call, one consumer
        fetching them together); a timeout when the pass made no progress for ``timeout`` s."""
        if not reads:
            return {}
        text = str(self._jvm.io.kafkamirror.RecordDigests.firstAndNth(
            self._consumer, partition_list((r.topic, r.partition) for r in reads),
            number_list(r.start for r in reads), number_list(r.n for r in reads),
            int(timeout * 1000)))
        found: dict[Key, Found] = {}
        for read, line in zip(reads, text.split("\n"), strict=True):
            kind, *fields = line.split(" ")
            key = (read.topic, read.partition)
            if kind == "ok":
                found[key] = Counted(RecordView(int(fields[0]), fields[1]),
                                     RecordView(int(fields[2]), fields[3]))
            elif kind == "short":
                found[key] = Short(int(fields[0]), int(fields[1]))
            else:
                found[key] = (f"timed out after {timeout:.0f} s without progress, reading "
                              f"{read.n} records from offset {read.start} ({fields[0]} read)")
        return found

    def close(self) -> None:
        """At once: the reader has no group to leave and nothing to commit (a close that waits
        for its fetch sessions to end took 0.45 s, twice per takeover)."""
        self._consumer.close(self._jvm.java.time.Duration.ZERO)


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
) -> RestartPlan:
    """Per partition with a committed position ``S`` and a recorded target end ``T``: skip the
    records of the cut batch that are on the target (module docstring). ``end_offsets`` reads
    the target's end offsets (keys are target topic partitions); the readers are created only
    when a partition needs them; ``log_starts`` are the source's (records below them are gone:
    the prefix is the recorded one), read only for partitions whose target grew. The prefixes of
    all partitions are proven together: one pass over each cluster."""
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
    proofs: list[_Proof] = []
    for (ttopic, partition), tp in sorted(by_target.items()):
        now = ends.get((ttopic, partition))
        if now is None or now == wanted[tp]:
            continue
        if now < wanted[tp]:
            outcomes[tp] = (f"target {ttopic}[{partition}] ends at {now}, before offset "
                            f"{wanted[tp]} where the mirror left it (truncated, recreated or an "
                            "unclean leader election)")
        elif starts.get(tp, -1) > known[tp]:
            outcomes[tp] = _recorded_prefix(target_ends, tp, known[tp], wanted[tp], now,
                                            starts[tp])
        else:
            proofs.append(_Proof(tp, ttopic, known[tp], wanted[tp], now))
    if proofs:
        outcomes |= _prove_all(proofs, source, target)
    for tp, outcome in sorted(outcomes.items()):
        if isinstance(outcome, str):
            plan.fallbacks[tp] = outcome
            plan.fallback_ends[tp] = ends[(target_topic(tp[0]), tp[1])]
        else:
            plan.positions[tp] = outcome.resume
            plan.skips.append(outcome)
    return plan


@dataclass(frozen=True)
class _Proof:
    """One partition to prove: source ``tp`` from offset ``start``; its target partition
    ``ttopic[tp[1]]`` grew from ``before`` to ``now`` since the cut batch began."""

    tp: Key
    ttopic: str
    start: int
    before: int
    now: int


def _prove_all(proofs: list[_Proof], source: Callable[[], JvmRecordReader],
               target: Callable[[], JvmRecordReader]) -> dict[Key, Skip | str]:
    """The skips of ``proofs`` (each a partition whose target grew by ``n = now - before``), or
    why one cannot be proven (a string): one pass over the source for all partitions, each from
    its start to its ``n``-th record, then one over the target, each from ``before`` to its
    ``n``-th record, which must be the one at ``now - 1`` (the mirror's writes leave no gaps)
    and equal the source's; the first records compared too. One pass per cluster: a second
    pass on the same consumer would wait behind the first pass's last fetch (the broker holds
    it up to ``fetch.max.wait.ms``)."""
    outcomes: dict[Key, Skip | str] = {}
    with _Readers(source, target) as readers:
        counted = readers.get("source").first_and_nth(
            [Read(p.tp[0], p.tp[1], p.start, p.now - p.before) for p in proofs])
        ok: list[tuple[_Proof, Counted]] = []
        for p in proofs:
            found = counted[p.tp]
            if isinstance(found, Counted):
                ok.append((p, found))
            elif isinstance(found, Short):
                outcomes[p.tp] = (f"the source holds {found.seen} records from offset {p.start} "
                                  f"to its end {found.end}, fewer than the {p.now - p.before} "
                                  "on the target")
            else:
                outcomes[p.tp] = found
        if not ok:
            return outcomes
        written = readers.get("target").first_and_nth(
            [Read(p.ttopic, p.tp[1], p.before, p.now - p.before) for p, _ in ok])
    for p, source_records in ok:
        on_target = written[(p.ttopic, p.tp[1])]
        if not isinstance(on_target, Counted) or on_target.nth.offset != p.now - 1 \
                or not on_target.nth.same_as(source_records.nth):
            outcomes[p.tp] = (f"target record {p.ttopic}[{p.tp[1]}]@{p.now - 1} is not source "
                              f"record {p.tp[0]}[{p.tp[1]}]@{source_records.nth.offset} (key, "
                              "value, headers or timestamp differ): another writer, or not the "
                              "mirror's batch")
        elif on_target.first.offset == p.before \
                and not on_target.first.same_as(source_records.first):
            outcomes[p.tp] = (f"target record {p.ttopic}[{p.tp[1]}]@{p.before} is not source "
                              f"record {p.tp[0]}[{p.tp[1]}]@{source_records.first.offset}: "
                              "another writer, or not the mirror's batch")
        else:
            outcomes[p.tp] = Skip(p.tp[0], p.tp[1], p.start, source_records.nth.offset + 1,
                                  p.before, p.now)
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


def _recorded_prefix(target_ends: TargetEnds, tp: Key, start: int, before: int, now: int,
                     log_start: int) -> Skip | str:
    """The skip of one partition whose source records from ``start`` are gone (the log starts
    at ``log_start``): what the batch writer recorded after its last write, when the target
    still ends there (``now``, past ``before``)."""
    partition = tp[1]
    resume = target_ends.position_at(tp, now)
    if resume is None or resume <= start:
        return (f"the source's records of {tp[0]}[{partition}] from offset {start} are gone "
                f"(its log starts at {log_start}) and no write of the mirror's is recorded up "
                f"to target offset {now}")
    return Skip(tp[0], partition, start, resume, before, now)


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
