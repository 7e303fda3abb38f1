"""Scale mode: many topics and partitions with a steady rate spread over all of them; stock
MirrorMaker 2 and kafka-mirror at the same time, each into a destination cluster of its own (the
latency mode's producer, probes and mirrors).

Steps of one run (``--scale TxP``: T topics ``bench-scale-0000``... of P partitions each):

1. seed: the topics are created and every partition gets ``--scale-seed`` records, before the
   mirrors start;
2. catch-up: the mirrors start together; for each, the time until every topic exists on its
   destination and every partition holds a record ("all across"), checked every second with one
   metadata and one ListOffsets request (``--timeout`` at most);
3. steady: ``--scale-rate`` records/s spread over every partition (a stream per topic) for
   ``--duration`` s; the producer then stops and the probes wait (``--drain-timeout``) for every
   record; per mirror the replication latency (p50/p99/max), the records received, its CPU
   seconds per 1,000 records and its TCP connections to the two clusters (sampled every 5 s);
4. idle: ``--scale-idle`` s with nothing produced: each mirror's CPU seconds per minute, over
   the whole idle phase and over its second half.

A mirror that does not get every partition across in time is measured anyway (its row says so):
the steady phase then shows what it delivers.
"""

from __future__ import annotations

import argparse
import gc
import multiprocessing
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException, Producer, TopicPartition
from confluent_kafka.admin import OffsetSpec

from kafka_mirror_testing.localcluster import LocalKafkaCluster, tail

from . import km_driver
from .common import LATENCY_CONSUMER_TUNING, SCALE_PRODUCER_TUNING, SOURCE_ALIAS, MirrorFailed
from .latency import NO_MIRROR, drain
from .measures import TreeSampler
from .mirrors import (
    Mirror,
    Probe,
    make_mirrors,
    mirror_cpu,
    start_source_and_destinations,
    stop_everything,
)
from .rate_producer import RateProducer
from .report import machine_info
from .workload import Workload, stamp

SCALE_PREFIX = "bench-scale-"
SEED_PHASE, STEADY_PHASE, WARMUP_PHASE = 0, 1, 2
CONNECTION_SAMPLE_SECONDS = 5.0


def parse_scale(text: str) -> tuple[int, int]:
    """``TxP`` (for example ``200x10``) as (topics, partitions per topic)."""
    try:
        topics, partitions = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected TOPICSxPARTITIONS like 200x10, got {text!r}") from None
    if topics < 1 or partitions < 1:
        raise argparse.ArgumentTypeError("topics and partitions must be at least 1")
    return topics, partitions


def topic_names(count: int) -> list[str]:
    return [f"{SCALE_PREFIX}{i:04d}" for i in range(count)]


def across(admin: Any, topics: Sequence[str], partitions: int) -> int:
    """How many of the ``topics`` x ``partitions`` partitions (named as on a destination) exist
    and hold a record, with one metadata and one ListOffsets request."""
    try:
        metadata = admin.list_topics(timeout=10.0).topics
    except Exception:
        return 0
    present = [TopicPartition(topic, p) for topic in topics
               if topic in metadata and metadata[topic].error is None
               for p in range(partitions) if p in metadata[topic].partitions]
    if not present:
        return 0
    latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
    try:
        futures = admin.list_offsets({tp: latest for tp in present}, request_timeout=20.0)
    except Exception:
        return 0
    held = 0
    for future in futures.values():
        try:
            held += future.result().offset > 0
        except Exception:
            continue
    return held


def seed(bootstrap: str, topics: Sequence[str], partitions: int, per_partition: int,
         record_size: int) -> int:
    """``per_partition`` stamped records in every partition; the number acknowledged. Records
    refused while a new topic's partitions are still unknown to the producer are sent again
    (up to 10 rounds)."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20,
                         "enable.idempotence": True})
    value_tail = b"s" * max(0, record_size - 16)
    delivered = 0
    failed: list[tuple[str, int]] = []

    def acked(where: tuple[str, int], err: Any, _msg: Any) -> None:
        nonlocal delivered
        if err is None:
            delivered += 1
        else:
            failed.append(where)

    wanted = [(t, p) for t in topics for p in range(partitions) for _ in range(per_partition)]
    for _round in range(10):
        for where in wanted:
            while True:
                try:
                    producer.produce(where[0], stamp(SEED_PHASE, time.time_ns()) + value_tail,
                                     b"seed", partition=where[1],
                                     on_delivery=partial(acked, where))
                    break
                except BufferError:
                    producer.poll(0.05)
                except KafkaException:  # a partition the producer has no metadata for yet
                    producer.list_topics(where[0], timeout=10)
                    producer.poll(0.1)
        if producer.flush(300):
            raise MirrorFailed("seed records not acknowledged")
        if not failed:
            break
        wanted, failed = failed, []
        producer.list_topics(timeout=30)  # fresh metadata of every topic
    if failed:
        raise MirrorFailed(f"{len(failed)} seed records not acknowledged")
    return delivered


def tcp_connections(pids: Sequence[int], ports: set[int]) -> int:
    """Established TCP connections of the processes ``pids`` to any of the remote ``ports``
    (their socket inodes in ``/proc/<pid>/fd``, the connections in ``/proc/net/tcp*``)."""
    inodes: set[str] = set()
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text(encoding="ascii").splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            remote_port = int(fields[2].rsplit(":", 1)[1], 16)
            if fields[3] == "01" and fields[9] in inodes and remote_port in ports:
                count += 1
    return count


class ConnectionSampler:
    """The largest number of TCP connections a mirror's processes had open to the given broker
    ports, sampled every :data:`CONNECTION_SAMPLE_SECONDS` while running."""

    def __init__(self, sampler: TreeSampler, ports: Sequence[int]) -> None:
        self.sampler = sampler
        self.ports = set(ports)
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="connections")

    def start(self) -> ConnectionSampler:
        self._thread.start()
        return self

    def count(self) -> int:
        pids = [self.sampler.root, *self.sampler.live_descendants()]
        return tcp_connections(pids, self.ports)

    def _loop(self) -> None:
        while not self._stop.wait(CONNECTION_SAMPLE_SECONDS):
            self.peak = max(self.peak, self.count())

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(timeout=30)
        return self.peak


def run_scale(ns: argparse.Namespace, command: str) -> dict[str, Any]:
    topics_count, partitions = ns.scale
    topics = topic_names(topics_count)
    workdir: Path = (
        ns.workdir.resolve() if ns.workdir else Path(tempfile.mkdtemp(prefix="mirror-bench-"))
    )
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"work directory {workdir}", flush=True)
    report: dict[str, Any] = {
        "command": command,
        "mode": "scale",
        "settings": {
            "topics": topics_count, "partitions_per_topic": partitions,
            "partitions": topics_count * partitions, "seed_per_partition": ns.scale_seed,
            "rate": ns.scale_rate, "duration_s": ns.duration, "idle_s": ns.scale_idle,
            "record_size": ns.record_size, "refresh_topics_interval_s": ns.refresh_seconds,
            "mm2_tasks": ns.mm2_tasks, "consumer_tuning": LATENCY_CONSUMER_TUNING,
            "producer_tuning": SCALE_PRODUCER_TUNING,
            "kafka_mirror_realtime": bool(ns.km_realtime),
            "target_topics_created_first": bool(ns.scale_target_topics),
        },
        "machine": machine_info(),
        "loadavg": {"start": os.getloadavg()},
    }
    kinds = ["mm2", "kafka-mirror"] if ns.only == "both" else [ns.only]
    if ns.km_realtime:
        kinds.append("kafka-mirror-rt")
    report["mirrors"] = {}
    if ns.scale_apart:
        # one mirror per pass, each with clusters of its own: fewer processes on the box
        report["settings"]["passes"] = [[kind] for kind in kinds]
        for kind in kinds:
            print(f"pass: {kind} alone", flush=True)
            report["mirrors"].update(_pass(ns, report, [kind], workdir / kind, topics,
                                           partitions))
    else:
        report["settings"]["passes"] = [kinds]
        report["mirrors"].update(_pass(ns, report, kinds, workdir, topics, partitions))
    report["loadavg"]["end"] = os.getloadavg()
    labels = list(report["mirrors"])
    report["table"] = render_scale_table(report, labels)
    print()
    print(report["table"], flush=True)
    if not ns.keep and ns.scale_apart:
        shutil.rmtree(workdir, ignore_errors=True)
    return report


def _pass(ns: argparse.Namespace, report: dict[str, Any], kinds: list[str], workdir: Path,
          topics: list[str], partitions: int) -> dict[str, dict[str, Any]]:
    """Clusters, ``kinds`` of mirror side by side, the workload and its measures: each mirror's
    results (the source probe's latency and the records produced of the same pass in each)."""
    workdir.mkdir(parents=True, exist_ok=True)
    ctx = multiprocessing.get_context("spawn")
    clusters: list[LocalKafkaCluster] = []
    mirrors: list[Mirror] = []
    probes: list[Probe] = []
    producer: RateProducer | None = None
    failed = False
    workload = Workload(0, ns.record_size, partitions, ns.compression)
    try:
        realtime = km_driver.realtime_settings(ns.km_realtime_setting) if ns.km_realtime else None
        source, destinations = start_source_and_destinations(ns, workdir, kinds, clusters)
        mirrors = make_mirrors(ns, workdir, source, destinations, workload,
                               f"{SCALE_PREFIX}.*", LATENCY_CONSUMER_TUNING,
                               SCALE_PRODUCER_TUNING, realtime, mm2_tasks=ns.mm2_tasks)
        began = time.monotonic()
        _create_topics(source, topics, partitions)
        if ns.scale_target_topics:
            for destination in {m.destination.bootstrap: m.destination for m in mirrors}.values():
                _create_topics(destination, [f"{SOURCE_ALIAS}.{t}" for t in topics], partitions)
        seeded = seed(source.bootstrap, topics, partitions, ns.scale_seed, ns.record_size)
        print(f"{len(topics)} topics x {partitions} partitions created, {seeded:,} records "
              f"seeded in {time.monotonic() - began:.0f} s", flush=True)
        report["seeded"] = seeded
        gc.collect()
        for mirror in mirrors:
            mirror.probe = Probe(ctx, mirror.destination.bootstrap, mirror.label)
            probes.append(mirror.probe)
        # the same probe on the source topics: the latency of the producer, the source broker
        # and the probe themselves, which every mirror's figure includes
        source_probe = Probe(ctx, source.bootstrap, NO_MIRROR)
        probes.append(source_probe)
        producer = RateProducer(source.bootstrap, ns.record_size, ns.compression, workdir,
                                partitions=len(topics) * partitions)
        return _measure(ns, report, source, mirrors, probes, source_probe, producer, topics,
                        partitions)
    except BaseException:
        failed = True  # the logs of a failed pass stay for a look
        print(f"work directory kept: {workdir}", flush=True)
        raise
    finally:
        stop_everything(mirrors, producer, probes, clusters, workdir, ns.keep or failed)


def _create_topics(cluster: LocalKafkaCluster, topics: list[str], partitions: int) -> None:
    """``topics`` of ``partitions`` each on ``cluster``, 100 to a request."""
    admin = cluster.admin()
    for chunk in range(0, len(topics), 100):
        for future in admin.create_topics(
                [_new_topic(t, partitions) for t in topics[chunk:chunk + 100]],
                request_timeout=120).values():
            future.result()


def _new_topic(name: str, partitions: int) -> Any:
    from confluent_kafka.admin import NewTopic

    return NewTopic(name, num_partitions=partitions, replication_factor=1)


def _measure(
    ns: argparse.Namespace,
    report: dict[str, Any],
    source: LocalKafkaCluster,
    mirrors: list[Mirror],
    probes: list[Probe],
    source_probe: Probe,
    producer: RateProducer,
    topics: list[str],
    partitions: int,
) -> dict[str, dict[str, Any]]:
    total = len(topics) * partitions
    targets = [f"{SOURCE_ALIAS}.{t}" for t in topics]
    admins = {m.label: m.destination.admin() for m in mirrors}
    connections: dict[str, ConnectionSampler] = {}
    results: dict[str, dict[str, Any]] = {m.label: {} for m in mirrors}
    try:
        # 2. catch-up
        print(f"starting {', '.join(m.label for m in mirrors)}", flush=True)
        for mirror in mirrors:
            mirror.started = time.monotonic()
            mirror.started_wall = time.time()
            mirror.sampler = TreeSampler(mirror.start()).start()
            ports = [int(c.bootstrap.rsplit(":", 1)[1]) for c in (source, mirror.destination)]
            connections[mirror.label] = ConnectionSampler(mirror.sampler, ports).start()
        waiting = {m.label: m for m in mirrors}
        last_print = 0.0
        while waiting:
            now = time.monotonic()
            for label, mirror in list(waiting.items()):
                held = across(admins[label], targets, partitions)
                results[label]["across_partitions"] = held
                if held >= total:
                    results[label]["all_across_s"] = now - mirror.started
                    print(f"  [{label}] all {total:,} partitions across after "
                          f"{now - mirror.started:.1f} s", flush=True)
                    del waiting[label]
                elif not mirror.alive():
                    raise MirrorFailed(f"{label} exited; last lines of {mirror.log_path}:\n"
                                       f"{tail(mirror.log_path)}")
                elif now - mirror.started > ns.timeout:
                    print(f"  [{label}] {held:,} of {total:,} partitions across after "
                          f"{ns.timeout:.0f} s: measured anyway", flush=True)
                    results[label]["all_across_s"] = None
                    del waiting[label]
            if waiting and now - last_print > 30:
                last_print = now
                print("  across so far: " + ", ".join(
                    f"{label} {results[label]['across_partitions']:,}" for label in waiting),
                    flush=True)
            time.sleep(1.0)
        for mirror in mirrors:
            assert mirror.probe is not None
            mirror.probe.commands.put(("assign", [(t, p) for t in targets
                                                  for p in range(partitions)]))
        source_probe.commands.put(("assign", [(t, p) for t in topics for p in range(partitions)]))
        # 3. warm-up, then steady
        per_topic = ns.scale_rate / len(topics)
        if ns.scale_warmup > 0:
            # The same streams, not measured: a fresh producer's first minute at 2,000
            # partitions is slow to be acknowledged (its own and the source broker's start),
            # with no mirror at all (docs/benchmarks.md, "The benchmark's producer").
            print(f"warm-up: {ns.scale_rate:,.0f} records/s for {ns.scale_warmup:.0f} s, "
                  "not measured", flush=True)
            for i, topic in enumerate(topics):
                producer.stream(f"t{i}", topic, list(range(partitions)), per_topic, WARMUP_PHASE)
            time.sleep(ns.scale_warmup)
        report["warmup_s"] = ns.scale_warmup
        print(f"steady: {ns.scale_rate:,.0f} records/s over {total:,} partitions for "
              f"{ns.duration:.0f} s", flush=True)
        cpu_before = {m.label: mirror_cpu(m) for m in mirrors}
        for i, topic in enumerate(topics):  # replaces the warm-up's streams
            producer.stream(f"t{i}", topic, list(range(partitions)), per_topic, STEADY_PHASE)
        time.sleep(ns.duration)
        for i in range(len(topics)):
            producer.stop_stream(f"t{i}")
        produced = producer.counts()
        # from each record's produce time to the source's acknowledgement (warm-up included)
        report["producer_acked_ms"] = produced["acked_ms"]
        expected = sum(v for (phase, _t, _p), v in produced["counts"].items()
                       if phase == STEADY_PHASE)
        seen = drain(probes, {STEADY_PHASE: expected}, ns.drain_timeout)
        for mirror in mirrors:
            cpu = mirror_cpu(mirror) - cpu_before[mirror.label]
            received = seen[mirror.label].get(STEADY_PHASE, 0)
            results[mirror.label].update(
                steady_received=received,
                steady_cpu_seconds=cpu,
                cpu_s_per_1000_records=cpu / received * 1000 if received else None,
            )
        report["steady_produced"] = expected
        print(f"  produced {expected:,}; received " + ", ".join(
            f"{m.label} {results[m.label]['steady_received']:,}" for m in mirrors), flush=True)
        # 4. idle
        print(f"idle: {ns.scale_idle:.0f} s with nothing to copy", flush=True)
        # and over its second half alone: what goes on after the load (the JIT compiling what
        # the load made hot, a last checkpoint) is left out there
        idle_before = {m.label: mirror_cpu(m) for m in mirrors}
        time.sleep(ns.scale_idle / 2)
        idle_half = {m.label: mirror_cpu(m) for m in mirrors}
        time.sleep(ns.scale_idle / 2)
        for mirror in mirrors:
            now = mirror_cpu(mirror)
            results[mirror.label].update(
                idle_cpu_s_per_minute=(now - idle_before[mirror.label]) / ns.scale_idle * 60,
                idle_late_cpu_s_per_minute=(now - idle_half[mirror.label]) / ns.scale_idle * 120)
    finally:
        admins.clear()
        gc.collect()
    summaries = {p.name: p.ask("report", timeout=300) for p in probes}
    for mirror in mirrors:
        assert mirror.sampler is not None
        mirror.sampler.sample()
        snap = mirror.sampler.snapshot()
        latency = summaries[mirror.label]["phases"].get(STEADY_PHASE, {}).get("latency_ms", {})
        results[mirror.label].update(
            latency_ms={k: latency.get(k) for k in ("p50", "p99", "max")},
            peak_rss_mb=snap["peak_rss_mb"],
            cpu_seconds=snap["cpu_seconds"],
            broker_connections_peak=connections[mirror.label].stop(),
            config=mirror.config,
        )
    source_latency = summaries[NO_MIRROR]["phases"].get(STEADY_PHASE, {}).get("latency_ms", {})
    report["no_mirror_latency_ms"] = {k: source_latency.get(k) for k in ("p50", "p99", "max")}
    for mirror in mirrors:
        results[mirror.label].update(no_mirror_latency_ms=report["no_mirror_latency_ms"],
                                     steady_produced=report["steady_produced"],
                                     producer_acked_ms=report["producer_acked_ms"])
    return results


def _fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return f"{value:,}"


def render_scale_table(report: dict[str, Any], labels: Sequence[str]) -> str:
    """The side-by-side table of one scale run."""
    settings = report["settings"]
    mirrors = report["mirrors"]
    width = 44
    header = f"{'':{width}}" + "".join(f" {label:>16}" for label in labels)

    def row(name: str, key: str, digits: int = 1) -> str:
        return f"{name:{width}}" + "".join(
            f" {_fmt(mirrors[label].get(key), digits):>16}" for label in labels)

    def latency(name: str, key: str = "latency_ms", what: str = "") -> str:
        return f"{'  ' + (what or name):{width}}" + "".join(
            f" {_fmt((mirrors[label].get(key) or {}).get(name), 0):>16}" for label in labels)

    return "\n".join([
        f"Scale: {settings['topics']:,} topics x {settings['partitions_per_topic']} partitions "
        f"({settings['partitions']:,}), {settings['seed_per_partition']} records seeded in each, "
        f"then {settings['rate']:,.0f} records/s over all of them for {settings['duration_s']:g} s",
        header,
        "-" * len(header),
        row("every partition across (s from start)", "all_across_s"),
        row("partitions across at that time", "across_partitions", 0),
        row("steady records received", "steady_received", 0),
        f"{'replication latency, steady (ms)':{width}}",
        latency("p50"), latency("p99"), latency("max"),
        latency("p50", "no_mirror_latency_ms", "p50, no mirror (source probe)"),
        latency("p99", "no_mirror_latency_ms", "p99, no mirror (source probe)"),
        latency("p99", "producer_acked_ms", "p99, produce to ack (with warm-up)"),
        row("CPU s per 1,000 records (steady)", "cpu_s_per_1000_records", 3),
        row("CPU s per minute, idle", "idle_cpu_s_per_minute"),
        row("  the same, its second half", "idle_late_cpu_s_per_minute"),
        row("peak RSS of its processes (MB)", "peak_rss_mb", 0),
        row("TCP connections to the brokers (peak)", "broker_connections_peak", 0),
        row("records produced in the steady phase", "steady_produced", 0),
        "(" + ("each mirror in a pass of its own, on clusters of its own"
               if len(settings.get("passes", [])) > 1 else "all mirrors in one pass") + ")",
    ])


def add_scale_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "scale mode",
        "many topics and partitions, a steady rate over all of them: time until every "
        "partition is across, latency, CPU per record and when idle, RSS, connections")
    group.add_argument("--scale", type=parse_scale, default=None, metavar="TxP",
                       help="run the scale mode with T topics of P partitions (e.g. 200x10)")
    group.add_argument("--scale-seed", type=int, default=3,
                       help="records in every partition before the mirrors start (default 3)")
    group.add_argument("--scale-rate", type=float, default=2000.0,
                       help="records/s spread over every partition (default 2000)")
    group.add_argument("--scale-warmup", type=float, default=90.0,
                       help="seconds of the same rate before the measured steady part "
                            "(default 90)")
    group.add_argument("--scale-idle", type=float, default=60.0,
                       help="seconds with nothing produced, for the idle CPU (default 60)")
    group.add_argument("--scale-apart", action="store_true",
                       help="run each mirror in a pass of its own (fresh clusters, the same "
                            "workload), one after the other, instead of side by side")
    group.add_argument("--scale-target-topics", action="store_true",
                       help="create the mirrored topics on every destination before the "
                            "mirrors start (MirrorMaker 2 asks for all missing topics in one "
                            "request, which a KRaft controller refuses above 10,000 "
                            "partitions)")
    group.add_argument("--mm2-tasks", type=int, default=None,
                       help="MirrorMaker 2's tasks.max in the scale mode (default: the CPU count)")


def scale_defaults(ns: argparse.Namespace) -> None:
    """What the scale mode changes of the common options' defaults."""
    if ns.mm2_tasks is None:
        ns.mm2_tasks = os.cpu_count() or 2
