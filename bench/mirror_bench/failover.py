"""Failover mode (``--failover``): one flow served by two instances under a steady produce, the one
that writes killed half-way (``kill -9`` of its whole process tree, as when its host is lost).
Records lost, records written twice and how long the target stalled, side by side for:

- kafka-mirror: an active instance and a standby of the same flow, each with a state dir of its
  own (as on two hosts); the active one is killed and the standby takes the lease over;
- stock MirrorMaker 2: two dedicated-mode nodes of one Connect cluster per flow (internal REST on,
  as KIP-710 needs for more than one node), both started before the produce; the first node is
  killed and the Connect group moves its tasks to the other.

They run one after the other, each into a destination cluster of its own, from one source cluster,
each on a topic of its own with the same workload. Issue 28's form: 5,000 records/s into 4
partitions for 60 s, the kill at 30 s (``--failover-rate``, ``--partitions``, ``--duration``).

The figures: per partition, the target's end offsets sampled every 0.1 s from the produce's
start; *target stall*: the longest time the whole target did not grow while records were
waiting; *longest partition stall*: the same per partition (MirrorMaker 2's surviving node keeps
its own tasks' partitions going, the killed node's wait for the group to give them out again:
Connect's ``scheduled.rebalance.max.delay.ms``, 5 minutes by default); *all across*: when the
target held every record sent, from the end of the produce. Lost and duplicates come from reading
the whole target topic at the end (every record's key is its sequence number).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import psutil

from kafka_mirror_testing.localcluster import LocalKafkaCluster, free_port
from kafka_mirror_testing.stock_mm2 import StockMirrorMaker2

from . import class_data, km_driver, mm2_driver
from .clusters import present_end_offsets, start_clusters, stop_clusters_and_clean
from .common import (
    LATENCY_CONSUMER_TUNING,
    SCALE_PRODUCER_TUNING,
    SOURCE_ALIAS,
    MirrorFailed,
)
from .rate_producer import RateProducer
from .report import machine_info
from .workload import Workload

KM_STANDING_BY = "standing by: the lease is held by"
KM_WRITING = "this instance holds the lease now"
KM_FIRST_LEASE = "lease taken (epoch"
MM2_TASK = "Creating task MirrorSourceConnector-"
SAMPLE_SECONDS = 0.1


def add_failover_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "failover mode",
        "a flow on two instances under steady produce, the writing one killed (kill -9 of its "
        "process tree) half-way: lost, duplicates, stall; kafka-mirror (active + standby; with "
        "--km-micro-batch its micro-batch mode too) and MirrorMaker 2 (two dedicated-mode "
        "nodes) one after the other")
    group.add_argument("--failover", action="store_true", help="run the failover mode")
    group.add_argument("--failover-rate", type=float, default=5000.0,
                       help="records/s over the topic's partitions (default 5000)")
    group.add_argument("--failover-kill-at", type=float, default=None,
                       help="seconds into the produce when the writer is killed (default: half "
                       "of --duration)")
    group.add_argument("--mm2-setting", type=_key_value, action="append", default=[],
                       metavar="KEY=VALUE",
                       help="a setting of both MirrorMaker 2 nodes (e.g. "
                       "scheduled.rebalance.max.delay.ms=10000)")


def failover_defaults(ns: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """What the failover mode changes of the common options' defaults: issue 28's 4 partitions
    and a 10-minute limit per mirror (MirrorMaker 2's killed tasks wait 5 minutes)."""
    for key, value in (("partitions", 4), ("timeout", 600.0)):
        if getattr(ns, key) == parser.get_default(key):
            setattr(ns, key, value)


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


@dataclass
class Node:
    """One instance of a mirror under test: started, killed (its process tree), stopped."""

    name: str
    start: Callable[[], int]
    stop: Callable[[], object]
    log_path: Path
    pid: int | None = None

    def launch(self) -> None:
        self.pid = self.start()

    def output(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def kill_tree(self) -> int:
        """kill -9 of the process and every descendant (the Spark driver's JVM included), all
        at once; how many processes."""
        assert self.pid is not None
        try:
            root = psutil.Process(self.pid)
            tree = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return 0
        for proc in tree:
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.send_signal(signal.SIGKILL)
        psutil.wait_procs(tree, timeout=10)
        return len(tree)


@dataclass
class Run:
    """What one mirror's run measured."""

    label: str
    sent: int = 0
    lost: int = 0
    duplicates: int = 0
    target_stall_s: float = 0.0
    partition_stall_s: float = 0.0
    all_across_s: float | None = None
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class SteadyProducer:
    """Records at a fixed rate into every partition of a topic, round robin: the benchmark's
    fixed-rate producer (:mod:`.rate_producer`, Kafka's Java producer), whose keys are
    ``key-%010d`` of a running sequence. librdkafka, the producer here until stop 63, sends a
    ProduceRequest per partition: at 2,000 partitions its requests to the source broker timed
    out in flight (60 s, 760-829 of them) during the failover, loading the box the takeover was
    measured on."""

    STREAM = "failover"

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: float,
                 record_size: int, compression: str, workdir: Path) -> None:
        self.topic, self.partitions, self.rate = topic, partitions, rate
        self.producer = RateProducer(bootstrap, record_size, compression, workdir)

    @staticmethod
    def key(i: int) -> bytes:
        """The key of the ``i``-th record sent."""
        return b"key-%010d" % i

    def start(self) -> None:
        self.producer.stream(self.STREAM, self.topic, range(self.partitions), self.rate, 0)

    def stop(self) -> int:
        """Ends the stream; the number of records sent, each acknowledged by the source."""
        self.producer.stop_stream(self.STREAM)
        return int(self.producer.counts()["sent"]["records"])

    def close(self) -> None:
        """Ends the producer's JVM (whether or not the stream ran)."""
        self.producer.stop()


class TargetWatch:
    """The source topic's and the target topic's end offsets per partition, sampled together
    every 0.1 s from a thread: (time, target ends, source ends)."""

    def __init__(self, source: LocalKafkaCluster, source_topic: str, cluster: LocalKafkaCluster,
                 topic: str, partitions: int) -> None:
        self.source_admin, self.admin = source.admin(), cluster.admin()
        self.source_topic, self.topic = source_topic, topic
        self.partitions = list(range(partitions))
        self.samples: list[tuple[float, dict[int, int], dict[int, int]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="target-watch", daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(SAMPLE_SECONDS):
            source = present_end_offsets(self.source_admin, self.source_topic, self.partitions)
            ends = present_end_offsets(self.admin, self.topic, self.partitions)
            if len(ends) == len(source) == len(self.partitions):
                self.samples.append((time.monotonic(), ends, source))

    def start(self) -> TargetWatch:
        self._thread.start()
        return self

    def total(self) -> int:
        return sum(self.samples[-1][1].values()) if self.samples else 0

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def longest_stall(samples: list[tuple[float, int, int]], begin: float) -> float:
    """The longest time from ``begin`` on that a sampled target count stood still while the
    source's was ahead of it (``(time, target, source)`` samples): a mirror's stall, not the
    producer's (a partition the producer does not write to for a while is not stalled). A
    stall under way at ``begin`` counts from ``begin``; one that begins later, from the first
    sample that shows it."""
    longest, since, previous, first = 0.0, None, None, True
    for at, target, source in samples:
        grew = previous is not None and target > previous
        previous = target
        if at < begin:
            continue
        if since is not None and (grew or target >= source):
            longest = max(longest, at - since)
            since = None
        if target < source and since is None:
            since = begin if first and not grew else at
        first = False
    if since is not None:
        longest = max(longest, samples[-1][0] - since)
    return longest


def count_target(cluster: LocalKafkaCluster, topic: str, ends: Mapping[int, int]
                 ) -> collections.Counter[bytes]:
    """How often each key is in ``topic`` up to ``ends``."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "failover-count",
                         "enable.auto.commit": False, "fetch.max.bytes": 52428800})
    counts: collections.Counter[bytes] = collections.Counter()
    left = {p: end for p, end in ends.items() if end > 0}
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in left])
        deadline = time.monotonic() + 300
        while left and time.monotonic() < deadline:
            for msg in consumer.consume(10_000, 1.0):
                if not msg.error():
                    counts[msg.key() or b""] += 1
            positions = consumer.position([TopicPartition(topic, p) for p in left])
            for tp in positions:
                if tp.offset >= left[tp.partition]:
                    del left[tp.partition]
    finally:
        consumer.close()
    if left:
        raise MirrorFailed(f"could not read the target {topic} to its end: {left}")
    return counts


def measure_failover(label: str, nodes: list[Node], ready: Callable[[], str | None],
                     source: LocalKafkaCluster, destination: LocalKafkaCluster, topic: str,
                     ns: argparse.Namespace, workdir: Path) -> Run:
    """Start ``nodes`` (the first one writes), produce from the second one's start on, wait until
    ``ready`` says both serve the flow, go on producing for ``ns.duration`` s, kill the first node
    at ``kill_at`` of those, wait until every record is across (or ``ns.timeout``), count."""
    run = Run(label)
    partitions = ns.partitions
    source.create_topic(topic, partitions)
    target = f"{SOURCE_ALIAS}.{topic}"
    # one record in each partition first: the first node writes the flow when they are across
    from confluent_kafka import Producer

    warm = Producer({"bootstrap.servers": source.bootstrap})
    for p in range(partitions):
        warm.produce(topic, key=b"warm", value=b"w", partition=p)
    # every one delivered before anything is measured (at 2,000 partitions, one request each,
    # some took over 30 s: the producer went on retrying them through the measurement)
    if left := warm.flush(ns.timeout):
        raise MirrorFailed(f"{label}: {left} of the {partitions} first records not delivered to "
                           f"the source in {ns.timeout:.0f} s")
    del warm
    deadline = time.monotonic() + ns.timeout
    watch = TargetWatch(source, topic, destination, target, partitions).start()
    # its JVM starts while the first node does
    producer = SteadyProducer(source.bootstrap, topic, partitions, ns.failover_rate,
                              ns.record_size, ns.compression, workdir / f"{topic}-producer")
    try:
        nodes[0].launch()
        while watch.total() < partitions:
            if time.monotonic() > deadline:
                raise MirrorFailed(f"{label}: {nodes[0].name} mirrored nothing in "
                                   f"{ns.timeout:.0f} s")
            time.sleep(0.5)
        # the produce starts here: the standby's start is its warm-up (a fresh Java producer's
        # first tens of seconds at 2,000 partitions are acknowledged late); measured from below
        producer.start()
        nodes[1].launch()
        while (why := ready()) is not None:
            if time.monotonic() > deadline:
                raise MirrorFailed(f"{label}: not ready in {ns.timeout:.0f} s: {why}")
            time.sleep(0.5)
        kill_at = ns.failover_kill_at if ns.failover_kill_at is not None else ns.duration / 2
        began = time.monotonic()
        time.sleep(kill_at)
        killed_at = time.monotonic()
        killed = nodes[0].kill_tree()
        print(f"{label}: {nodes[0].name} killed ({killed} processes) at "
              f"{killed_at - began:.1f} s", flush=True)
        time.sleep(max(0.0, began + ns.duration - time.monotonic()))
        run.sent = producer.stop()
        produced_until = time.monotonic()
        # every partition's records across: its end on the target at least the source's (a
        # partition with records written twice gets there first; the count below is exact)
        source_ends = present_end_offsets(source.admin(), topic, list(range(partitions)))

        def complete(ends: Mapping[int, int]) -> bool:
            return all(ends.get(p, 0) >= end for p, end in source_ends.items())

        while not (watch.samples and complete(watch.samples[-1][1])) \
                and time.monotonic() < produced_until + ns.timeout:
            time.sleep(0.5)
        across = next((at for at, ends, _ in watch.samples if complete(ends)), None)
        time.sleep(3)  # late copies, if any, land before the count
    finally:
        producer.close()
        watch.stop()
    final = watch.samples[-1][1] if watch.samples else {}
    counts = count_target(destination, target, final)
    counts.pop(b"warm", None)
    run.lost = sum(1 for i in range(run.sent) if counts.get(SteadyProducer.key(i), 0) == 0)
    run.duplicates = sum(n - 1 for n in counts.values() if n > 1)
    # stalls count only while the source held records the target lacked
    run.target_stall_s = round(longest_stall(
        [(at, sum(ends.values()), sum(src.values())) for at, ends, src in watch.samples],
        killed_at), 1)
    stalls = {p: longest_stall([(at, ends[p], src[p]) for at, ends, src in watch.samples],
                               killed_at) for p in range(partitions)}
    worst = max(stalls, key=lambda p: stalls[p])
    run.partition_stall_s = round(stalls[worst], 1)
    run.notes.append(f"longest partition stall in partition {worst}; sampled every "
                     f"{_interval(watch.samples):.2f} s on average")
    if across is not None:
        run.all_across_s = round(max(0.0, across - produced_until), 1)
    else:
        run.notes.append(f"not every record across {ns.timeout:.0f} s after the produce")
    return run


def _interval(samples: list[tuple[float, dict[int, int], dict[int, int]]]) -> float:
    """The mean time between two samples (each reads both clusters' end offsets)."""
    if len(samples) < 2:
        return 0.0
    return (samples[-1][0] - samples[0][0]) / (len(samples) - 1)


def _km_nodes(ns: argparse.Namespace, workdir: Path, source: LocalKafkaCluster,
              destination: LocalKafkaCluster, topic: str, realtime: bool = False) -> list[Node]:
    props = km_driver.kafka_mirror_config(
        source, destination, Workload(0, ns.record_size, ns.partitions, ns.compression),
        None if realtime else ns.max_records_per_batch, dict(ns.km_producer), topics=topic,
        consumer=LATENCY_CONSUMER_TUNING, producer=SCALE_PRODUCER_TUNING,
        consumer_extra=dict(ns.km_consumer), class_data_dir=ns.km_class_data_dir)
    if realtime:
        props.update(km_driver.realtime_settings(ns.km_realtime_setting))
    spark_conf = {"spark.driver.memory": ns.driver_memory, **dict(ns.spark_conf)}
    nodes = []
    kind = "kafka-mirror-rt" if realtime else "kafka-mirror"
    for name in ("a", "b"):
        km = km_driver.KafkaMirrorProcess(props, workdir / f"{kind}-{name}", spark_conf)
        nodes.append(Node(f"kafka-mirror {name}", km.start, partial(km.stop, None), km.log_path))
    return nodes


def _mm2_nodes(ns: argparse.Namespace, workdir: Path, source: LocalKafkaCluster,
               destination: LocalKafkaCluster, topic: str) -> list[Node]:
    props = mm2_driver.mm2_config(
        source, destination, Workload(0, ns.record_size, ns.partitions, ns.compression),
        topics=topic, consumer=LATENCY_CONSUMER_TUNING, producer=SCALE_PRODUCER_TUNING)
    props["dedicated.mode.enable.internal.rest"] = "true"
    props.update(dict(ns.mm2_setting))
    nodes = []
    for name in ("1", "2"):
        mm2 = StockMirrorMaker2(props | {"listeners": f"http://127.0.0.1:{free_port()}"},
                                workdir / f"mm2-{name}", heap=ns.mm2_heap)

        def start(mm2: StockMirrorMaker2 = mm2) -> int:
            mm2.start(wait_started=None)
            assert mm2.pid is not None
            return mm2.pid

        nodes.append(Node(f"MirrorMaker 2 node {name}", start, partial(mm2.stop, timeout=30),
                          mm2.log_path))
    return nodes


def run_failover(ns: argparse.Namespace, command: str) -> dict[str, Any]:
    workdir = (ns.workdir.resolve() if ns.workdir
               else Path(tempfile.mkdtemp(prefix="mirror-bench-failover-")))
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"work directory {workdir}", flush=True)
    kinds = ["kafka-mirror", "mm2"] if ns.only == "both" else [ns.only]
    if ns.km_realtime and ns.only != "mm2":
        kinds.insert(1, "kafka-mirror-rt")
    report: dict[str, Any] = {
        "command": command, "mode": "failover",
        "settings": {"rate": ns.failover_rate, "partitions": ns.partitions,
                     "duration_s": ns.duration, "record_size": ns.record_size,
                     "kill_at_s": ns.failover_kill_at or ns.duration / 2,
                     "mm2_settings": dict(ns.mm2_setting), "second_mode": ns.km_second_mode},
        "machine": machine_info(), "loadavg": {"start": os.getloadavg()}, "runs": {},
    }
    source = LocalKafkaCluster("source", workdir, heap=ns.broker_heap)
    destinations = {kind: LocalKafkaCluster(f"destination-{kind}", workdir, heap=ns.broker_heap)
                    for kind in kinds}
    clusters = [source, *destinations.values()]
    nodes: list[Node] = []
    try:
        if "kafka-mirror" in kinds or "kafka-mirror-rt" in kinds:
            class_data.prime(ns.km_class_data_dir)
        start_clusters(clusters)
        for kind in kinds:
            topic = f"failover-{kind}"
            if kind in ("kafka-mirror", "kafka-mirror-rt"):
                realtime = kind == "kafka-mirror-rt"
                nodes = _km_nodes(ns, workdir, source, destinations[kind], topic, realtime)
                label = (f"kafka-mirror{f' {ns.km_second_mode}' if realtime else ''} "
                         "(active + standby)")
                marker = KM_STANDING_BY
            else:
                nodes = _mm2_nodes(ns, workdir, source, destinations[kind], topic)
                label, marker = "MirrorMaker 2 (2 nodes)", MM2_TASK

            def ready(nodes: list[Node] = nodes, marker: str = marker) -> str | None:
                """None once the second node serves the flow (its log says so)."""
                if marker in nodes[1].output():
                    return None
                return f"{nodes[1].name} logged no {marker!r}"

            try:
                run = measure_failover(label, nodes, ready, source, destinations[kind], topic, ns,
                                       workdir)
            finally:
                for node in nodes:
                    with contextlib.suppress(Exception):
                        node.stop()
            report["runs"][kind] = run.as_dict()
            print(f"{label}: {run.as_dict()}", flush=True)
    finally:
        stop_clusters_and_clean(clusters, workdir, ns.keep)
    report["loadavg"]["end"] = os.getloadavg()
    print(format_failover(report), flush=True)
    return report


def format_failover(report: dict[str, Any]) -> str:
    """The runs side by side."""
    runs = report["runs"]
    s = report["settings"]
    rows: list[tuple[str, str]] = [
        ("records sent", "sent"), ("lost", "lost"), ("duplicates", "duplicates"),
        ("target stall after the kill (s)", "target_stall_s"),
        ("longest partition stall (s)", "partition_stall_s"),
        ("all across, after the produce ended (s)", "all_across_s"),
    ]
    second = s.get("second_mode", "real-time")
    labels = {"kafka-mirror": "kafka-mirror", "kafka-mirror-rt": f"km {second}",
              "mm2": "MirrorMaker 2"}
    width = 42
    lines = [f"failover: {s['rate']:,.0f} records/s into {s['partitions']} partitions for "
             f"{s['duration_s']:.0f} s, the writer killed (kill -9 of its process tree) at "
             f"{s['kill_at_s']:.0f} s",
             "".ljust(width) + "".join(labels[k].rjust(16) for k in runs)]
    for title, key in rows:
        cells = []
        for run in runs.values():
            value = run.get(key)
            cells.append("-" if value is None else f"{value:,}" if isinstance(value, int)
                         else f"{value:.1f}")
        lines.append(title.ljust(width) + "".join(c.rjust(16) for c in cells))
    for kind, run in runs.items():
        lines.extend(f"{labels[kind]}: {note}" for note in run["notes"])
    return "\n".join(lines)
