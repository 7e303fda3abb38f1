"""Throughput benchmark: stock MirrorMaker 2 against kafka-mirror, on local loopback clusters.

One run:

1. starts a ``source`` cluster and a fresh destination cluster (real single-node KRaft Kafka
   4.3.1 brokers on 127.0.0.1, explicit heaps);
2. produces the workload (keyed records with 2 headers each, lz4 by default) into topic
   ``bench`` on the source with confluent-kafka producers (one process per CPU), timing it (the
   raw produce rate), and the same records into topic ``ceiling`` on the destination cluster
   (the raw produce rate there: "the ceiling");
3. runs stock MirrorMaker 2 (tuned for throughput) mirroring ``bench`` to ``source.bench`` and
   times it from process start until the destination's end offsets add up to the record count;
4. does the same with kafka-mirror (Spark startup included) into a fresh destination cluster;
5. prints a side-by-side table (and writes ``--json FILE``).

With ``--rounds N`` each mirror runs N times (order alternating, a fresh destination cluster
each time) and the table shows medians. CPU time and memory are those of the whole process tree
of each mirror (kafka-mirror: the Python process and its Spark driver JVM), sampled from
``/proc`` every 0.5 s. The CPU that other work on the machine used meanwhile is reported too.

Usage::

    .venv/bin/python bench/mirror_benchmark.py [--records N] [--record-size 1024] \
        [--partitions 8] [--rounds 1] [--json FILE] [--keep]

kafka-mirror knobs: ``--max-records-per-batch`` (``mirror.max.records.per.batch``, i.e. Spark's
``maxOffsetsPerTrigger``), ``--spark-conf KEY=VALUE``, ``--km-producer KEY=VALUE``
(``destination.producer.*``). Everything started is stopped by PID on exit, and the work
directory is removed unless ``--keep`` is given.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib.metadata
import json
import multiprocessing
import os
import platform
import queue
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from types import FrameType
from typing import Any

from confluent_kafka import Producer, TopicPartition, libversion
from confluent_kafka.admin import OffsetSpec

from kafka_mirror.testing.localcluster import (
    LocalKafkaCluster,
    free_port,
    stop_process,
    tail,
    write_properties,
)
from kafka_mirror.testing.stock_mm2 import StockMirrorMaker2, mm2_properties

SOURCE_TOPIC = "bench"
CEILING_TOPIC = "ceiling"
SOURCE_ALIAS = "source"
TARGET_ALIAS = "destination"
TARGET_TOPIC = f"{SOURCE_ALIAS}.{SOURCE_TOPIC}"
MB = 1_000_000
KM_METRICS = "kafka-mirror, metrics on"
CLK_TCK = os.sysconf("SC_CLK_TCK")
SAMPLE_INTERVAL = 0.5
POLL_INTERVAL = 0.2

# Client tuning applied identically to both mirrors (MirrorMaker 2 reads it from
# <cluster>.consumer.* / <cluster>.producer.*, kafka-mirror from the same keys): the usual
# throughput advice -- bigger batches with some linger, lz4, larger fetches -- while keeping the
# no-loss settings kafka-mirror always uses (acks=all, idempotence, 5 requests in flight).
CONSUMER_TUNING: dict[str, str] = {
    "fetch.min.bytes": "262144",
    "fetch.max.wait.ms": "100",
    "max.partition.fetch.bytes": "4194304",
    "fetch.max.bytes": "52428800",
    "max.poll.records": "5000",
    "receive.buffer.bytes": "1048576",
}
PRODUCER_TUNING: dict[str, str] = {
    "acks": "all",
    "enable.idempotence": "true",
    "max.in.flight.requests.per.connection": "5",
    "batch.size": "262144",
    "linger.ms": "20",
    "compression.type": "lz4",
    "buffer.memory": "134217728",
    "send.buffer.bytes": "1048576",
}


# --------------------------------------------------------------------------- workload
@dataclass(frozen=True)
class Workload:
    records: int
    record_size: int
    partitions: int
    compression: str

    def key(self, i: int) -> bytes:
        return b"key-%010d" % i

    def payload_bytes(self) -> int:
        """Key + value bytes of the whole workload (what the MB/s figures count)."""
        return sum(len(self.key(i)) for i in range(self.records)) + self.records * self.record_size


def _corpus(size: int, seed: int = 20240611) -> bytes:
    """Text-like bytes (random pseudo-words): compresses about as well as typical JSON/logs."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = ["".join(rng.choice(letters) for _ in range(rng.randint(2, 10))) for _ in range(4096)]
    parts: list[str] = []
    total = 0
    while total < size:
        word = rng.choice(words)
        parts.append(word)
        total += len(word) + 1
    return " ".join(parts).encode("ascii")[:size]


class RecordSource:
    """Deterministic records: key, value of ``record_size`` bytes, and 2 headers."""

    def __init__(self, workload: Workload) -> None:
        self.workload = workload
        self.corpus = _corpus(16 * 1024 * 1024 + workload.record_size)
        self.span = len(self.corpus) - workload.record_size

    def value(self, i: int) -> bytes:
        size = self.workload.record_size
        prefix = b"%012d|" % i
        start = (i * 104_729) % self.span
        return prefix + self.corpus[start : start + size - len(prefix)]

    @staticmethod
    def headers(i: int) -> list[tuple[str, str | bytes | None]]:
        return [("trace-id", i.to_bytes(16, "big")), ("origin", b"mirror-benchmark")]


# --------------------------------------------------------------------------- produce
@dataclass
class ProduceResult:
    cluster: str
    topic: str
    records: int
    payload_bytes: int
    seconds: float
    compression: str
    producers: int
    producer_cpu_seconds: float  # all producer processes (Python + librdkafka threads)

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds

    @property
    def mb_per_s(self) -> float:
        return self.payload_bytes / MB / self.seconds


def end_offsets(admin: Any, topic: str, partitions: int, timeout: float = 10.0) -> list[int]:
    latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
    futures = admin.list_offsets(
        {TopicPartition(topic, p): latest for p in range(partitions)},
        request_timeout=timeout,
    )
    return [f.result().offset for f in futures.values()]


@contextlib.contextmanager
def admin_client(cluster: LocalKafkaCluster) -> Iterator[Any]:
    """An AdminClient that is really gone afterwards (its futures make reference cycles, and a
    forgotten client keeps reconnecting to a cluster that was stopped)."""
    admin = cluster.admin()
    try:
        yield admin
    finally:
        del admin
        gc.collect()


def _produce_share(
    bootstrap: str,
    topic: str,
    workload: Workload,
    index: int,
    count: int,
    barrier: Any,
    results: Any,
) -> None:
    """One producer process: records ``index, index + count, ...`` (own partitions when
    ``count`` divides the partition count). Waits at ``barrier`` before the timed part."""
    source = RecordSource(workload)
    errors: list[str] = []
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "compression.type": workload.compression,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "batch.num.messages": 100_000,
            "queue.buffering.max.kbytes": 512 * 1024,
            "queue.buffering.max.messages": 1_000_000,
            "error_cb": lambda err: errors.append(str(err)),
        }
    )
    key, value, headers = workload.key, source.value, source.headers
    parts = workload.partitions
    produce_one = producer.produce
    barrier.wait()
    cpu = time.process_time()
    for n, i in enumerate(range(index, workload.records, count)):
        while True:
            try:
                produce_one(topic, value(i), key(i), partition=i % parts, headers=headers(i))
                break
            except BufferError:
                producer.poll(0.01)
        if n % 20_000 == 0:
            producer.poll(0)
    remaining = producer.flush(600)
    results.put((index, remaining, time.process_time() - cpu, errors[:3]))


def produce(
    cluster: LocalKafkaCluster,
    topic: str,
    workload: Workload,
    payload_bytes: int,
    producers: int,
) -> ProduceResult:
    """Produce the workload with ``producers`` confluent-kafka producer processes; the time
    runs from when all are set up until the last one flushed."""
    cluster.create_topic(topic, partitions=workload.partitions)
    gc.collect()
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(producers + 1)
    results = ctx.Queue()
    procs = [
        ctx.Process(
            target=_produce_share,
            args=(cluster.bootstrap, topic, workload, index, producers, barrier, results),
            name=f"producer-{index}",
        )
        for index in range(producers)
    ]
    for proc in procs:
        proc.start()
    try:
        barrier.wait(timeout=120)
        start = time.monotonic()
        outcomes: list[tuple[int, int, float, list[str]]] = []
        while len(outcomes) < producers:
            try:
                outcomes.append(results.get(timeout=5))
            except queue.Empty:
                if not all(p.is_alive() for p in procs):
                    raise RuntimeError("a producer process died") from None
        seconds = time.monotonic() - start
    finally:
        for proc in procs:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.kill()
                proc.join()
    remaining = sum(o[1] for o in outcomes)
    if remaining:
        raise RuntimeError(f"{remaining} records to {cluster.name}/{topic} not delivered")
    with admin_client(cluster) as admin:
        total = sum(end_offsets(admin, topic, workload.partitions))
    if total != workload.records:
        errors = [e for o in outcomes for e in o[3]]
        raise RuntimeError(
            f"{cluster.name}/{topic} holds {total} records, expected {workload.records}: "
            f"{errors[:3]}"
        )
    return ProduceResult(
        cluster.name,
        topic,
        workload.records,
        payload_bytes,
        seconds,
        workload.compression,
        producers,
        sum(o[2] for o in outcomes),
    )


# --------------------------------------------------------------------------- /proc sampling
def _read_stat(pid: int) -> tuple[int, int, int] | None:
    """(ppid, starttime, utime+stime ticks) of a process, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    fields = data[data.rfind(b")") + 2 :].split()
    # fields[0] is state (field 3); utime, stime are fields 14, 15; starttime is field 22.
    return int(fields[1]), int(fields[19]), int(fields[11]) + int(fields[12])


def _read_rss_kb(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) in kB; zeros if the process is gone."""
    rss = hwm = 0
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"VmRSS:"):
                    rss = int(line.split()[1])
                elif line.startswith(b"VmHWM:"):
                    hwm = int(line.split()[1])
    except OSError:
        pass
    return rss, hwm


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text(encoding="utf-8").strip()
    except OSError:
        return "?"


def process_tree(root: int) -> list[int]:
    """``root`` and all its descendants (by scanning ``/proc``)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        stat = _read_stat(int(entry))
        if stat is not None:
            children.setdefault(stat[0], []).append(int(entry))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, ()))
    return tree


def machine_busy_ticks() -> int:
    """Busy (non-idle, non-iowait) CPU ticks of the whole machine, from /proc/stat."""
    with open("/proc/stat", encoding="ascii") as fh:
        values = [int(v) for v in fh.readline().split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = values[:8]
    return user + nice + system + irq + softirq + steal


class TreeSampler:
    """Samples CPU ticks and RSS of a process tree every ``interval`` seconds.

    Memory counts only processes that have lived for at least ``MIN_AGE`` seconds: a JVM that
    starts a helper (``chmod``, ``readlink``, ``jspawnhelper``) forks first, and until the exec
    the child shows the parent's whole RSS -- counting it would double the figure.
    """

    MIN_AGE = 0.4

    def __init__(self, root: int, interval: float = SAMPLE_INTERVAL) -> None:
        self.root = root
        self.interval = interval
        self.ticks: dict[tuple[int, int], int] = {}  # (pid, starttime) -> utime+stime
        self.hwm_kb: dict[tuple[int, int], int] = {}
        self.names: dict[tuple[int, int], str] = {}
        self.first_seen: dict[tuple[int, int], float] = {}
        self.peak_rss_kb = 0
        self.samples = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="tree-sampler", daemon=True)

    def start(self) -> TreeSampler:
        self.sample()
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def sample(self) -> None:
        rss_total = 0
        now = time.monotonic()
        with self._lock:
            for pid in process_tree(self.root):
                stat = _read_stat(pid)
                if stat is None:
                    continue
                ident = (pid, stat[1])
                self.ticks[ident] = max(self.ticks.get(ident, 0), stat[2])
                self.names[ident] = _comm(pid)  # latest: a launcher script may exec java
                if now - self.first_seen.setdefault(ident, now) < self.MIN_AGE:
                    continue
                rss, hwm = _read_rss_kb(pid)
                rss_total += rss
                self.hwm_kb[ident] = max(self.hwm_kb.get(ident, 0), hwm)
            self.peak_rss_kb = max(self.peak_rss_kb, rss_total)
            self.samples += 1

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def cpu_seconds(self) -> float:
        with self._lock:
            return sum(self.ticks.values()) / CLK_TCK

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {
                "cpu_seconds": sum(self.ticks.values()) / CLK_TCK,
                "peak_rss_mb": self.peak_rss_kb / 1024,
                "sum_vmhwm_mb": sum(self.hwm_kb.values()) / 1024,
                "processes": [
                    {
                        "pid": pid,
                        "name": self.names.get((pid, start), "?"),
                        "cpu_seconds": round(self.ticks[(pid, start)] / CLK_TCK, 2),
                        "vmhwm_mb": round(self.hwm_kb.get((pid, start), 0) / 1024, 1),
                    }
                    for pid, start in sorted(self.ticks)
                ],
                "samples": self.samples,
            }

    def live_descendants(self) -> list[int]:
        """PIDs seen in the tree (other than the root) that still run with the same start."""
        with self._lock:
            idents = list(self.ticks)
        alive = []
        for pid, start in idents:
            if pid == self.root:
                continue
            stat = _read_stat(pid)
            if stat is not None and stat[1] == start:
                alive.append(pid)
        return alive


def process_cpu_ticks(pid: int | None) -> int:
    stat = _read_stat(pid) if pid else None
    return stat[2] if stat else 0


# --------------------------------------------------------------------------- mirrors
@dataclass
class MirrorResult:
    name: str
    records: int
    payload_bytes: int
    wall_seconds: float  # process start until all records are on the destination
    first_record_seconds: float  # process start until the first record arrived
    cpu_seconds: float  # process tree CPU (user + system) from start until done
    peak_rss_mb: float  # max over samples of the summed VmRSS of the tree
    sum_vmhwm_mb: float  # sum of each process's own peak RSS (an upper bound)
    cpu_seconds_at_first_record: float = 0.0  # startup cost
    destination_records: int = 0
    ready_seconds: float | None = None  # start until the mirror logged that it runs
    brokers_cpu_seconds: float = 0.0  # both brokers, same interval
    machine_busy_cpu_seconds: float = 0.0  # the whole machine, same interval
    loadavg_before: tuple[float, float, float] = (0.0, 0.0, 0.0)
    round: int = 1
    processes: list[dict[str, Any]] = field(default_factory=list)
    timeline: list[tuple[float, int]] = field(default_factory=list)
    config: dict[str, str] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def steady_seconds(self) -> float:
        return max(self.wall_seconds - self.first_record_seconds, 1e-9)

    @property
    def records_per_s(self) -> float:
        return self.records / self.wall_seconds

    @property
    def mb_per_s(self) -> float:
        return self.payload_bytes / MB / self.wall_seconds

    @property
    def steady_records_per_s(self) -> float:
        return self.records / self.steady_seconds

    @property
    def steady_mb_per_s(self) -> float:
        return self.payload_bytes / MB / self.steady_seconds

    @property
    def steady_cpu_per_gb(self) -> float:
        """CPU seconds per GB of key+value between the first and the last record."""
        return (self.cpu_seconds - self.cpu_seconds_at_first_record) / (self.payload_bytes / 1e9)

    @property
    def other_cpu_seconds(self) -> float:
        """CPU the rest of the machine (other work, not this benchmark) used meanwhile."""
        return max(0.0, self.machine_busy_cpu_seconds - self.cpu_seconds - self.brokers_cpu_seconds)

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(
            records_per_s=self.records_per_s,
            mb_per_s=self.mb_per_s,
            steady_seconds=self.steady_seconds,
            steady_records_per_s=self.steady_records_per_s,
            steady_mb_per_s=self.steady_mb_per_s,
            other_cpu_seconds=self.other_cpu_seconds,
            steady_cpu_per_gb=self.steady_cpu_per_gb,
        )
        return data


class MirrorFailed(RuntimeError):
    pass


def wait_for_records(
    admin: Any,
    topic: str,
    partitions: int,
    expected: int,
    started: float,
    alive: Callable[[], bool],
    timeout: float,
    label: str,
    log_path: Path,
    on_first: Callable[[], None],
    timeline: list[tuple[float, int]],
) -> tuple[float, float]:
    """Poll the destination's end offsets; (first record, all records) seconds after start.

    ``on_first`` runs when the first records show up; ``timeline`` gets (seconds, records)
    about once a second."""
    first: float | None = None
    last_report = time.monotonic()
    while True:
        now = time.monotonic()
        try:
            total = sum(end_offsets(admin, topic, partitions, timeout=5.0))
        except Exception:  # topic not created yet
            total = 0
        stamp = time.monotonic() - started
        if total > 0 and first is None:
            first = stamp
            on_first()
            print(f"  [{label}] first records after {stamp:.1f} s", flush=True)
        if not timeline or stamp - timeline[-1][0] >= 1.0 or total >= expected:
            timeline.append((round(stamp, 2), total))
        if total >= expected:
            return (first if first is not None else stamp), stamp
        if not alive():
            raise MirrorFailed(f"{label} exited early; last lines of {log_path}:\n{tail(log_path)}")
        if stamp > timeout:
            raise MirrorFailed(f"{label}: only {total}/{expected} records after {timeout:.0f} s")
        if now - last_report >= 10.0:
            last_report = now
            print(f"  [{label}] {stamp:6.1f} s: {total:,}/{expected:,} records", flush=True)
        time.sleep(POLL_INTERVAL)


def log_time(log_path: Path, marker: str, started_wall: float) -> float | None:
    """Seconds from ``started_wall`` to the first log line holding ``marker`` (log4j's
    ``[YYYY-mm-dd HH:MM:SS,mmm]`` or Python's ``YYYY-mm-dd HH:MM:SS,mmm`` at the line start)."""
    try:
        text = log_path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        if marker in line:
            stamp = line.lstrip("[")[:23]
            try:
                when = datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()
            except ValueError:
                continue
            return when - started_wall
    return None


@dataclass
class Measurement:
    result: MirrorResult
    sampler: TreeSampler
    started_wall: float


def measure(
    label: str,
    start: Callable[[], int],
    alive: Callable[[], bool],
    log_path: Path,
    source: LocalKafkaCluster,
    destination: LocalKafkaCluster,
    workload: Workload,
    payload_bytes: int,
    timeout: float,
    on_started: Callable[[Measurement], None],
) -> MirrorResult:
    """Start a mirror, wait until every record is on the destination, account its resources.

    ``on_started`` receives the measurement as soon as the process runs (so that the caller
    can stop the whole tree even when waiting fails).
    """
    loadavg = os.getloadavg()
    with admin_client(destination) as admin:
        brokers_before = process_cpu_ticks(source.pid) + process_cpu_ticks(destination.pid)
        busy_before = machine_busy_ticks()
        started = time.monotonic()
        started_wall = time.time()
        root = start()
        sampler = TreeSampler(root).start()
        result = MirrorResult(label, workload.records, payload_bytes, 0.0, 0.0, 0.0, 0.0, 0.0)
        on_started(Measurement(result, sampler, started_wall))
        cpu_at_first: list[float] = []

        def on_first() -> None:
            sampler.sample()
            cpu_at_first.append(sampler.cpu_seconds())

        timeline: list[tuple[float, int]] = []
        try:
            first, done = wait_for_records(
                admin,
                TARGET_TOPIC,
                workload.partitions,
                workload.records,
                started,
                alive,
                timeout,
                label,
                log_path,
                on_first,
                timeline,
            )
            sampler.sample()
        finally:
            sampler.stop()
        busy = (machine_busy_ticks() - busy_before) / CLK_TCK
        brokers = (
            process_cpu_ticks(source.pid) + process_cpu_ticks(destination.pid) - brokers_before
        ) / CLK_TCK
        snap = sampler.snapshot()
        result.wall_seconds = done
        result.first_record_seconds = first
        result.cpu_seconds = snap["cpu_seconds"]
        result.cpu_seconds_at_first_record = cpu_at_first[0] if cpu_at_first else 0.0
        result.timeline = timeline
        result.peak_rss_mb = snap["peak_rss_mb"]
        result.sum_vmhwm_mb = snap["sum_vmhwm_mb"]
        result.brokers_cpu_seconds = brokers
        result.machine_busy_cpu_seconds = busy
        result.loadavg_before = loadavg
        result.processes = snap["processes"]
        print(
            f"  [{label}] all {workload.records:,} records after {done:.1f} s (steady "
            f"{result.steady_records_per_s:,.0f} rec/s); CPU {result.cpu_seconds:.1f} s, "
            f"peak RSS {result.peak_rss_mb:,.0f} MB; other work on the machine used "
            f"{result.other_cpu_seconds:.0f} CPU s meanwhile",
            flush=True,
        )
        # Settled count: shows duplicates, if any.
        time.sleep(2.0)
        result.destination_records = sum(end_offsets(admin, TARGET_TOPIC, workload.partitions))
    return result


def mm2_config(
    source: LocalKafkaCluster, destination: LocalKafkaCluster, workload: Workload
) -> dict[str, str]:
    extra: dict[str, str] = {
        "tasks.max": str(workload.partitions),
        "refresh.topics.interval.seconds": "1",
        "offset.flush.interval.ms": "10000",
    }
    extra.update({f"{SOURCE_ALIAS}.consumer.{k}": v for k, v in CONSUMER_TUNING.items()})
    extra.update({f"{TARGET_ALIAS}.producer.{k}": v for k, v in PRODUCER_TUNING.items()})
    return mm2_properties(
        source.bootstrap,
        destination.bootstrap,
        topics=SOURCE_TOPIC,
        source_alias=SOURCE_ALIAS,
        target_alias=TARGET_ALIAS,
        extra=extra,
    )


def run_mm2(
    workdir: Path,
    source: LocalKafkaCluster,
    destination: LocalKafkaCluster,
    workload: Workload,
    payload_bytes: int,
    heap: str,
    timeout: float,
) -> MirrorResult:
    props = mm2_config(source, destination, workload)
    mm2 = StockMirrorMaker2(props, workdir, heap=heap)
    started: list[Measurement] = []

    def start() -> int:
        mm2.start(wait_started=None)
        assert mm2.pid is not None
        return mm2.pid

    try:
        result = measure(
            "MirrorMaker 2",
            start,
            mm2.alive,
            mm2.log_path,
            source,
            destination,
            workload,
            payload_bytes,
            timeout,
            started.append,
        )
    finally:
        mm2.stop(timeout=30)
    result.ready_seconds = log_time(
        mm2.log_path, "Kafka MirrorMaker started", started[0].started_wall
    )
    result.config = dict(props)
    result.extra["heap"] = heap
    return result


def kafka_mirror_executable() -> list[str]:
    script = Path(sys.executable).parent / "kafka-mirror"
    if script.is_file():
        return [str(script)]
    found = shutil.which("kafka-mirror")
    return [found] if found else [sys.executable, "-m", "kafka_mirror.cli"]


def kafka_mirror_config(
    source: LocalKafkaCluster,
    destination: LocalKafkaCluster,
    workload: Workload,
    max_records_per_batch: int | None,
    producer_extra: Mapping[str, str],
) -> dict[str, str]:
    props: dict[str, str] = {
        "clusters": f"{SOURCE_ALIAS}, {TARGET_ALIAS}",
        f"{SOURCE_ALIAS}.bootstrap.servers": source.bootstrap,
        f"{TARGET_ALIAS}.bootstrap.servers": destination.bootstrap,
        f"{SOURCE_ALIAS}->{TARGET_ALIAS}.enabled": "true",
        f"{SOURCE_ALIAS}->{TARGET_ALIAS}.topics": SOURCE_TOPIC,
        f"{TARGET_ALIAS}->{SOURCE_ALIAS}.enabled": "false",
        "replication.factor": "1",
        "refresh.topics.interval.seconds": "5",
    }
    if max_records_per_batch is not None:
        props["mirror.max.records.per.batch"] = str(max_records_per_batch)
    props.update({f"{SOURCE_ALIAS}.consumer.{k}": v for k, v in CONSUMER_TUNING.items()})
    producer = PRODUCER_TUNING | dict(producer_extra)
    props.update({f"{TARGET_ALIAS}.producer.{k}": v for k, v in producer.items()})
    return props


class KafkaMirrorProcess:
    """``kafka-mirror run`` as a child process, stopped by PID (SIGTERM, then SIGKILL)."""

    def __init__(self, props: Mapping[str, str], workdir: Path, spark_conf: Mapping[str, str]):
        self.workdir = workdir
        self.config_path = workdir / "mm2.properties"
        self.state_dir = workdir / "state"
        self.log_path = workdir / "kafka-mirror.log"
        self.props = dict(props)
        self.spark_conf = dict(spark_conf)
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: Any = None

    def argv(self) -> list[str]:
        argv = [
            *kafka_mirror_executable(),
            "run",
            str(self.config_path),
            "--state-dir",
            str(self.state_dir),
        ]
        for key, value in self.spark_conf.items():
            argv += ["--spark-conf", f"{key}={value}"]
        return argv

    def start(self) -> int:
        self.workdir.mkdir(parents=True, exist_ok=True)
        write_properties(self.config_path, self.props)
        self._log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            self.argv(),
            cwd=self.workdir,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, sampler: TreeSampler | None, timeout: float = 60.0) -> None:
        proc = self.proc
        if proc is not None:
            stop_process(proc, timeout)
            # The Spark driver JVM exits when its Python parent does; make sure, by PID.
            if sampler is not None:
                deadline = time.monotonic() + 15
                while sampler.live_descendants() and time.monotonic() < deadline:
                    time.sleep(0.2)
                for pid in sampler.live_descendants():
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
        if self._log is not None:
            self._log.close()
            self._log = None


class MetricsScraper:
    """Scrapes kafka-mirror's ``/metrics`` at a fixed interval, as Prometheus would, so that the
    "metrics on" run pays for serving them too."""

    def __init__(self, url: str, interval: float = 5.0) -> None:
        self.url = url
        self.interval = interval
        self.scrapes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="metrics-scraper", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            with contextlib.suppress(OSError):
                with urllib.request.urlopen(self.url, timeout=self.interval) as response:
                    response.read()
                self.scrapes += 1

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self.interval + 1)


def run_kafka_mirror(
    workdir: Path,
    source: LocalKafkaCluster,
    destination: LocalKafkaCluster,
    workload: Workload,
    payload_bytes: int,
    driver_memory: str,
    max_records_per_batch: int | None,
    spark_extra: Mapping[str, str],
    producer_extra: Mapping[str, str],
    timeout: float,
    metrics: bool = False,
) -> MirrorResult:
    props = kafka_mirror_config(
        source, destination, workload, max_records_per_batch, producer_extra
    )
    scraper: MetricsScraper | None = None
    if metrics:
        port = free_port()
        props["mirror.metrics.port"] = str(port)
        props["mirror.metrics.bind.address"] = "127.0.0.1"
        scraper = MetricsScraper(f"http://127.0.0.1:{port}/metrics")
    spark_conf = {"spark.driver.memory": driver_memory, **spark_extra}
    mirror = KafkaMirrorProcess(props, workdir, spark_conf)
    started: list[Measurement] = []
    if scraper is not None:
        scraper.start()
    try:
        result = measure(
            KM_METRICS if metrics else "kafka-mirror",
            mirror.start,
            mirror.alive,
            mirror.log_path,
            source,
            destination,
            workload,
            payload_bytes,
            timeout,
            started.append,
        )
    finally:
        if scraper is not None:
            scraper.stop()
        mirror.stop(started[0].sampler if started else None)
    if scraper is not None:
        result.extra["metrics_scrapes"] = scraper.scrapes
        result.extra["metrics_scrape_seconds"] = scraper.interval
    result.ready_seconds = log_time(
        mirror.log_path, "partitions (checkpoint", started[0].started_wall
    )
    result.config = dict(props)
    result.extra["spark_conf"] = spark_conf
    result.extra["progress_log"] = [
        line for line in tail(mirror.log_path, 400).splitlines() if "records," in line
    ][-5:]
    return result


# --------------------------------------------------------------------------- report
ROWS: list[tuple[str, Callable[[MirrorResult], float | None], str]] = [
    ("records/s (start to done)", lambda r: r.records_per_s, "{:,.0f}"),
    ("MB/s (start to done)", lambda r: r.mb_per_s, "{:.1f}"),
    ("records/s (first to last record)", lambda r: r.steady_records_per_s, "{:,.0f}"),
    ("MB/s (first to last record)", lambda r: r.steady_mb_per_s, "{:.1f}"),
    ("wall time s (start to done)", lambda r: r.wall_seconds, "{:.1f}"),
    ("  of which: until it logs 'running' s", lambda r: r.ready_seconds, "{:.1f}"),
    ("  of which: until first record s", lambda r: r.first_record_seconds, "{:.1f}"),
    ("CPU s (process tree, start to done)", lambda r: r.cpu_seconds, "{:.1f}"),
    ("  of which: until first record", lambda r: r.cpu_seconds_at_first_record, "{:.1f}"),
    ("CPU s per GB, start to done", lambda r: r.cpu_seconds / (r.payload_bytes / 1e9), "{:.1f}"),
    ("CPU s per GB, first to last record", lambda r: r.steady_cpu_per_gb, "{:.1f}"),
    ("peak RSS MB (tree, sampled)", lambda r: r.peak_rss_mb, "{:,.0f}"),
    ("sum of per-process VmHWM MB", lambda r: r.sum_vmhwm_mb, "{:,.0f}"),
    ("both brokers' CPU s (same interval)", lambda r: r.brokers_cpu_seconds, "{:.1f}"),
    ("other work's CPU s (same interval)", lambda r: r.other_cpu_seconds, "{:.1f}"),
]


def _median(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def _ratio(a: float | None, b: float | None) -> str:
    return f"{b / a:.2f}x" if a and b is not None else "-"


def render_table(
    workload: Workload,
    produce_source: ProduceResult,
    produce_ceiling: ProduceResult | None,
    results: Sequence[MirrorResult],
) -> str:
    mm2 = [r for r in results if r.name == "MirrorMaker 2"]
    km = [r for r in results if r.name == "kafka-mirror"]
    km_metrics = [r for r in results if r.name == KM_METRICS]
    rounds = max(len(mm2), len(km), len(km_metrics))
    width = 38
    header = f"{'':{width}} {'MirrorMaker 2':>14} {'kafka-mirror':>14} {'kafka-mirror/MM2':>17}"
    if km_metrics:
        header += f" {'metrics on':>14} {'on/off':>8}"
    lines = [
        f"workload: {workload.records:,} records, {workload.record_size} B values + keys + "
        f"2 headers, {workload.partitions} partitions, {produce_source.payload_bytes / MB:,.0f} "
        f"MB key+value; benchmark producer compression {workload.compression}"
        + (f"; median of {rounds} rounds" if rounds > 1 else ""),
        header,
        "-" * len(header),
    ]
    for label, get, fmt in ROWS:
        a = _median([get(r) for r in mm2])
        b = _median([get(r) for r in km])
        line = (
            f"{label:{width}} {fmt.format(a) if a is not None else '-':>14} "
            f"{fmt.format(b) if b is not None else '-':>14} {_ratio(a, b):>17}"
        )
        if km_metrics:
            c = _median([get(r) for r in km_metrics])
            line += f" {fmt.format(c) if c is not None else '-':>14} {_ratio(b, c):>8}"
        lines.append(line)
    lines.append("-" * len(header))
    produces = [("raw produce into the source", produce_source)]
    if produce_ceiling is not None:
        produces.append(("raw produce into dest. (ceiling)", produce_ceiling))
    for label, p in produces:
        lines.append(
            f"{label:{width}} {p.records_per_s:>14,.0f} rec/s {p.mb_per_s:>6.1f} MB/s "
            f"({p.seconds:.1f} s; {p.producers} confluent-kafka producers, {p.compression}, "
            f"{p.producer_cpu_seconds:.0f} CPU s)"
        )
    if rounds > 1:
        for name, runs in (("MirrorMaker 2", mm2), ("kafka-mirror", km), (KM_METRICS, km_metrics)):
            if not runs:
                continue
            lines.append(
                f"{name} per round (rec/s start-to-done / first-to-last): "
                + ", ".join(f"{r.records_per_s:,.0f}/{r.steady_records_per_s:,.0f}" for r in runs)
            )
    for r in results:
        if r.destination_records != r.records:
            lines.append(
                f"NOTE: {r.name} (round {r.round}) left {r.destination_records:,} records on "
                f"the destination (expected {r.records:,})"
            )
    return "\n".join(lines)


def machine_info() -> dict[str, Any]:
    mem_kb = 0
    with open("/proc/meminfo", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("MemTotal:"):
                mem_kb = int(line.split()[1])
    java = subprocess.run(
        ["java", "-version"], capture_output=True, text=True, check=False
    ).stderr.splitlines()
    return {
        "cpus": os.cpu_count(),
        "memory_gib": round(mem_kb / 1024 / 1024, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "java": java[0] if java else "?",
        "confluent_kafka": importlib.metadata.version("confluent-kafka"),
        "librdkafka": libversion()[0],
        "loadavg_at_start": os.getloadavg(),
    }


# --------------------------------------------------------------------------- main
def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--record-size", type=int, default=1024, help="value bytes")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument(
        "--compression",
        default="lz4",
        choices=("lz4", "none", "zstd"),
        help="compression of the benchmark's own producer (default lz4)",
    )
    parser.add_argument(
        "--producers",
        type=int,
        default=os.cpu_count() or 2,
        help="producer processes for the raw produce (default: CPU count)",
    )
    parser.add_argument("--broker-heap", default="1g")
    parser.add_argument("--mm2-heap", default="1g")
    parser.add_argument("--driver-memory", default="1g", help="kafka-mirror spark.driver.memory")
    parser.add_argument(
        "--max-records-per-batch",
        type=int,
        default=None,
        help="kafka-mirror mirror.max.records.per.batch (default: its own)",
    )
    parser.add_argument(
        "--spark-conf",
        type=_key_value,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra Spark setting for kafka-mirror",
    )
    parser.add_argument(
        "--km-producer",
        type=_key_value,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra destination.producer.* setting for kafka-mirror only",
    )
    parser.add_argument("--only", choices=("both", "mm2", "kafka-mirror"), default="both")
    parser.add_argument(
        "--km-metrics",
        action="store_true",
        help="also run kafka-mirror with its metrics endpoint on (scraped every 5 s) and "
        "report the ratio to metrics off",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="run each mirror this many times (fresh destination each time, "
        "order alternating); the table shows medians",
    )
    parser.add_argument(
        "--skip-ceiling",
        action="store_true",
        help="do not measure the raw produce rate into the destination",
    )
    parser.add_argument(
        "--timeout", type=float, default=1800.0, help="per-mirror limit in seconds (default 1800)"
    )
    parser.add_argument(
        "--workdir",
        type=Path,
        default=None,
        help="work directory (default: a new temporary directory)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument("--json", type=Path, default=None, metavar="FILE")
    return parser


def _start_clusters(clusters: Sequence[LocalKafkaCluster]) -> None:
    with ThreadPoolExecutor(max_workers=len(clusters)) as pool:
        for future in [pool.submit(c.start, 120.0) for c in clusters]:
            future.result()


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    def on_term(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _produce_json(result: ProduceResult) -> dict[str, Any]:
    return asdict(result) | {"records_per_s": result.records_per_s, "mb_per_s": result.mb_per_s}


def run(ns: argparse.Namespace) -> dict[str, Any]:
    workload = Workload(ns.records, ns.record_size, ns.partitions, ns.compression)
    payload_bytes = workload.payload_bytes()
    workdir: Path = (
        ns.workdir.resolve() if ns.workdir else Path(tempfile.mkdtemp(prefix="mirror-bench-"))
    )
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"work directory {workdir}", flush=True)
    report: dict[str, Any] = {
        "command": " ".join(["bench/mirror_benchmark.py", *sys.argv[1:]]),
        "workload": asdict(workload) | {"payload_bytes": payload_bytes},
        "machine": machine_info(),
    }
    clusters: list[LocalKafkaCluster] = []
    results: list[MirrorResult] = []
    counter = iter(range(1, 1000))

    def new_destination() -> LocalKafkaCluster:
        cluster = LocalKafkaCluster(f"destination-{next(counter)}", workdir, heap=ns.broker_heap)
        clusters.append(cluster)
        return cluster

    def drop(cluster: LocalKafkaCluster) -> None:
        cluster.stop()
        clusters.remove(cluster)
        if not ns.keep:
            shutil.rmtree(cluster.home, ignore_errors=True)

    try:
        source = LocalKafkaCluster("source", workdir, heap=ns.broker_heap)
        clusters.append(source)
        destination: LocalKafkaCluster | None = new_destination()
        print(f"starting clusters (broker heap {ns.broker_heap} each)", flush=True)
        _start_clusters(clusters)

        print(
            f"producing {workload.records:,} records into {SOURCE_TOPIC} on the source", flush=True
        )
        produce_source = produce(source, SOURCE_TOPIC, workload, payload_bytes, ns.producers)
        print(
            f"  {produce_source.records_per_s:,.0f} records/s, {produce_source.mb_per_s:.1f} MB/s",
            flush=True,
        )
        report["produce"] = {"source": _produce_json(produce_source)}
        produce_ceiling: ProduceResult | None = None
        if not ns.skip_ceiling:
            assert destination is not None
            print(
                f"producing the same records into {CEILING_TOPIC} on a destination cluster",
                flush=True,
            )
            produce_ceiling = produce(
                destination, CEILING_TOPIC, workload, payload_bytes, ns.producers
            )
            print(
                f"  {produce_ceiling.records_per_s:,.0f} records/s, "
                f"{produce_ceiling.mb_per_s:.1f} MB/s",
                flush=True,
            )
            report["produce"]["ceiling"] = _produce_json(produce_ceiling)

        mirrors = ["mm2", "kafka-mirror"] if ns.only == "both" else [ns.only]
        if ns.km_metrics and ns.only != "mm2":
            mirrors.append("kafka-mirror+metrics")
        for round_no in range(1, ns.rounds + 1):
            # Alternate the order between rounds, so neither always runs first.
            order = mirrors if round_no % 2 else list(reversed(mirrors))
            for kind in order:
                # Each mirror writes into a fresh destination cluster: same topic name,
                # nothing left over from the other one.
                if destination is None:
                    destination = new_destination()
                    _start_clusters([destination])
                run_dir = workdir / f"{kind}-{round_no}"
                if kind == "mm2":
                    print(
                        f"round {round_no}: stock MirrorMaker 2 (heap {ns.mm2_heap}, "
                        f"tasks.max={workload.partitions})",
                        flush=True,
                    )
                    result = run_mm2(
                        run_dir,
                        source,
                        destination,
                        workload,
                        payload_bytes,
                        ns.mm2_heap,
                        ns.timeout,
                    )
                else:
                    print(
                        f"round {round_no}: kafka-mirror (spark.driver.memory {ns.driver_memory}"
                        + (", metrics endpoint on)" if kind == "kafka-mirror+metrics" else ")"),
                        flush=True,
                    )
                    result = run_kafka_mirror(
                        run_dir,
                        source,
                        destination,
                        workload,
                        payload_bytes,
                        ns.driver_memory,
                        ns.max_records_per_batch,
                        dict(ns.spark_conf),
                        dict(ns.km_producer),
                        ns.timeout,
                        metrics=kind == "kafka-mirror+metrics",
                    )
                result.round = round_no
                results.append(result)
                drop(destination)
                destination = None
        report["mirrors"] = [r.as_json() for r in results]
        report["machine"]["loadavg_at_end"] = os.getloadavg()
        table = render_table(workload, produce_source, produce_ceiling, results)
        report["table"] = table
        print()
        print(table, flush=True)
        return report
    finally:
        for cluster in reversed(clusters):
            with contextlib.suppress(Exception):
                cluster.stop()
        if ns.keep:
            print(f"kept {workdir}", flush=True)
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    ns = build_parser().parse_args(argv)
    if min(ns.records, ns.partitions, ns.rounds, ns.producers) < 1 or ns.record_size < 32:
        print(
            "need --records, --partitions, --rounds, --producers >= 1 and --record-size >= 32",
            file=sys.stderr,
        )
        return 2
    with _terminate_as_interrupt():
        try:
            report = run(ns)
        except KeyboardInterrupt:
            print("interrupted; stopped everything", file=sys.stderr)
            return 130
        except MirrorFailed as exc:
            print(f"mirror failed: {exc}", file=sys.stderr)
            return 1
    if ns.json:
        ns.json.write_text(json.dumps(report, indent=2, default=str) + "\n", encoding="utf-8")
        print(f"wrote {ns.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
