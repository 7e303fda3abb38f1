"""The workload: deterministic records, the timed backlog produce, and the stamp that latency
mode's records carry (the fixed-rate producer that writes them: ``rate_producer``)."""

from __future__ import annotations

import gc
import multiprocessing
import queue
import random
import time
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Producer

from kafka_mirror_testing.localcluster import LocalKafkaCluster

from .clusters import admin_client, end_offsets
from .common import MB


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


def corpus(size: int, seed: int = 20240611) -> bytes:
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
        self.corpus = corpus(16 * 1024 * 1024 + workload.record_size)
        self.span = len(self.corpus) - workload.record_size

    def value(self, i: int) -> bytes:
        size = self.workload.record_size
        prefix = b"%012d|" % i
        start = (i * 104_729) % self.span
        return prefix + self.corpus[start : start + size - len(prefix)]

    @staticmethod
    def headers(i: int) -> list[tuple[str, str | bytes | None]]:
        return [("trace-id", i.to_bytes(16, "big")), ("origin", b"mirror-benchmark")]


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


# --------------------------------------------------------------------------- fixed rate
# Latency mode's records: the value starts with the phase number and the produce time (ns since
# the epoch, taken right before ``produce()``), so that a consumer anywhere on this machine can
# tell each record's replication latency from its receive time. Both mirrors copy values as
# bytes, so the method is the same for both and needs nothing from either.
STAMP_LEN = 24  # b"%03d|%019d|"


def stamp(phase: int, produce_ns: int) -> bytes:
    return b"%03d|%019d|" % (phase, produce_ns)


def read_stamp(value: bytes) -> tuple[int, int]:
    """(phase, produce time ns) of a latency-mode record."""
    return int(value[0:3]), int(value[4:23])
