"""What the fault suites share: a mirror configuration for clusters ``fsrc`` -> ``fdst``, a
producer of numbered records under which faults happen, and the checks that follow (nothing lost,
order kept, duplicates counted, time to catch up). The clusters are single-node
(:class:`LocalKafkaCluster`) or of several nodes (:class:`MultiNodeKafkaCluster`)."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from confluent_kafka import KafkaError, Producer
from mirror_process import (
    CLASS_DATA_DIR,
    MirrorProcess,
    committed_offsets,
    end_offsets,
    first_occurrences,
    read_partitions,
)

from kafka_mirror_testing.forms import MODE
from kafka_mirror_testing.localcluster import LocalKafkaCluster
from kafka_mirror_testing.multinode import MultiNodeKafkaCluster
from kafka_mirror_testing.waiting import wait_for

Cluster = LocalKafkaCluster | MultiNodeKafkaCluster
PARTITIONS = 3
BATCH = 1000


def mirror_config(path: Path, source: str, destination: str, topic: str, extra: str = "",
                  replicas: int = 1, realtime: bool | None = None) -> Path:
    """The flow fsrc -> fdst of ``topic``; the topics it creates with ``replicas`` replicas;
    ``realtime``: in real-time mode (no per-batch limit there); by default in the suite's mode
    (``KAFKA_MIRROR_MODE``)."""
    if realtime is None:
        realtime = MODE == "realtime"
    path.write_text(
        "clusters = fsrc, fdst\n"
        f"fsrc.bootstrap.servers = {source}\n"
        f"fdst.bootstrap.servers = {destination}\n"
        "fsrc->fdst.enabled = true\n"
        f"topics = {topic}\n"
        f"replication.factor = {replicas}\n"
        f"offset-syncs.topic.replication.factor = {replicas}\n"
        f"checkpoints.topic.replication.factor = {replicas}\n"
        f"heartbeats.topic.replication.factor = {replicas}\n"
        "emit.heartbeats.enabled = false\n"
        "sync.topic.acls.enabled = false\n"
        "refresh.topics.interval.seconds = 3\n"
        + ("" if realtime else  # real-time mode is the default
           f"mirror.mode = micro-batch\nmirror.max.records.per.batch = {BATCH}\n")
        + "mirror.lag.commit.interval.ms = 1000\n"
        "spark.driver.memory = 768m\nspark.master = local[2]\n"
        # the class data archive the test mirrors share (one built per machine, not one per test)
        f"mirror.class.data.dir = {CLASS_DATA_DIR}\n" + extra,
        encoding="utf-8",
    )
    return path


class ContinuousProducer:
    """Produces numbered records (keys and values unique) round robin over the partitions, about
    ``rate`` records/s (values padded with ``value_bytes`` random bytes), until ``total`` are sent
    or :meth:`stop`; ``sent`` counts acknowledged ones (a record the source refused is sent
    again: ``delivery_errors``)."""

    def __init__(self, cluster: Cluster, topic: str, *, total: int | None = None,
                 rate: int = 1250, value_bytes: int = 0) -> None:
        self.cluster, self.topic, self.total = cluster, topic, total
        self.rate, self.value_bytes = rate, value_bytes
        self.sent = 0
        # deliveries the source refused, each sent again (what and why, for the test's output)
        self.delivery_errors: list[str] = []
        self._stop = threading.Event()
        self._going = threading.Event()
        self._going.set()
        self._idle = threading.Event()  # paused, every record sent so far acknowledged
        self.done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> ContinuousProducer:
        self._thread.start()
        return self

    def _producer(self) -> Producer:
        return Producer(self.cluster.client_config(**{
            "enable.idempotence": "true", "acks": "all", "message.timeout.ms": "300000"}))

    def _run(self) -> None:
        producer = self._producer()
        failed: list[tuple[int, KafkaError]] = []  # delivery reports, served in flush()

        def send(i: int) -> None:
            def report(err: KafkaError | None, _msg: object, i: int = i) -> None:
                if err is not None:
                    failed.append((i, err))
            # padding is random: compression must not shrink it
            producer.produce(self.topic, key=f"k{i}".encode(),
                             value=f"v{i}:".encode() + os.urandom(self.value_bytes),
                             partition=i % PARTITIONS, on_delivery=report)

        def flush() -> None:
            """Every record sent so far acknowledged: one the source refused (a broker restart
            can end the idempotent producer with a fatal error) is sent again, by a new
            producer if need be, so the source holds every key (a refused one it kept after all
            is there twice: the mirror copies both, and compare() counts keys)."""
            nonlocal producer
            producer.flush(300)
            while failed:
                again = sorted({i for i, _ in failed})
                if any(err.fatal() for _, err in failed):
                    producer = self._producer()
                self.delivery_errors.append(f"{len(again)} records: {failed[0][1]}")
                failed.clear()
                for i in again:
                    send(i)
                producer.flush(300)

        chunk = max(1, self.rate // 4)
        i = 0
        while not self._stop.is_set() and (self.total is None or i < self.total):
            if not self._going.is_set():
                flush()
                self.sent = i
                self._idle.set()
                self._going.wait(0.25)
                continue
            self._idle.clear()
            for _ in range(chunk if self.total is None else min(chunk, self.total - i)):
                send(i)
                i += 1
            flush()
            self.sent = i
            time.sleep(0.25)
        flush()
        self.sent = i
        self.done.set()

    def pause(self) -> None:
        """No record is sent from the next round on (``sent`` is then final until resumed)."""
        self._idle.clear()
        self._going.clear()
        assert self._idle.wait(300), "the producer did not pause"

    def resume(self) -> None:
        self._going.set()

    def stop(self, timeout: float = 600) -> int:
        self._stop.set()
        self._thread.join(timeout)
        assert self.done.is_set(), "the producer did not finish"
        return self.sent


class LagGroup:
    """The mirror's committed positions (its lag group), read on a cluster that stays up."""

    def __init__(self, cluster: Cluster, topic: str,
                 group: str = "kafka-mirror.fsrc_to_fdst") -> None:
        self.cluster, self.group = cluster, group
        self.partitions = [(topic, p) for p in range(PARTITIONS)]

    def total(self) -> int:
        try:
            positions = committed_offsets(self.cluster, self.group, self.partitions, timeout=10)
            return sum(max(0, offset) for offset in positions.values())
        except Exception:
            return -1


def compare(source: Cluster, topic: str, destination: Cluster,
            expected: int) -> int:
    """Nothing lost and source order kept on the target (once replayed duplicates are set
    aside), partition by partition; returns the number of duplicates. The source holds
    ``expected`` keys (a record its producer sent again after a refused delivery that the
    source kept after all is there twice, and so must be on the target)."""
    # both clusters able to give every partition's end offset (a node restarted by the test
    # leaves a leader moving for a while: read then, a topic of records read as no partition)
    for cluster, name in ((source, topic), (destination, f"fsrc.{topic}")):
        wait_for(lambda c=cluster, n=name: bool(end_offsets(c, n)), 120,
                 f"the end offsets of {name}")
    src = read_partitions(source, topic)
    dst = read_partitions(destination, f"fsrc.{topic}")
    keys = {record[0] for records in src.values() for record in records}
    counts = {p: len(r) for p, r in src.items()}
    assert len(keys) == expected, (
        f"the source {topic} holds {len(keys)} keys, not {expected}: records per partition "
        f"{counts}, ends {end_offsets(source, topic)}")
    duplicates = 0
    for partition, records in src.items():
        assert first_occurrences(dst[partition]) == first_occurrences(records), \
            f"partition {partition}"
        duplicates += len(dst[partition]) - len(records)
    return duplicates


def assert_no_duplicates(duplicates: int, *logs: str) -> None:
    """Exactly once on the target; on failure, the mirrors' at-least-once fallbacks say why."""
    fallbacks = [line for log in logs for line in log.splitlines()
                 if " WARNING " in line and ("at-least-once" in line or "twice" in line)]
    assert duplicates == 0, f"{duplicates} duplicates; fallbacks: {fallbacks[-10:]}"


def wait_caught_up(copied: Callable[[], int], expected: int, mirror: MirrorProcess,
                   timeout: float = 300) -> float:
    """Seconds until the mirror's positions reach ``expected``."""
    began = time.monotonic()
    wait_for(lambda: copied() >= expected, timeout, f"all {expected} records mirrored", mirror)
    return time.monotonic() - began


def finish(mirror: MirrorProcess, writer: ContinuousProducer, copied: Callable[[], int]
           ) -> tuple[int, float]:
    """Once the fault is over: the producer ends, the mirror catches up by itself and stops
    cleanly on SIGTERM. Returns the records produced and the seconds it took to catch up."""
    back = time.monotonic()
    total = writer.stop()
    for error in writer.delivery_errors:
        print(f"the source refused and got again {error}")
    wait_caught_up(copied, total, mirror)
    resumed = time.monotonic() - back
    code, _ = mirror.terminate()
    assert code == 0, mirror.output()[-3000:]
    return total, resumed


@contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted on ``path`` (needs root), unmounted after."""
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                   check=True, capture_output=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False, capture_output=True)
