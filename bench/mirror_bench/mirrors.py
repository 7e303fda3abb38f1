"""The mirrors under test when they run at the same time, each into a destination cluster of
its own (latency and scale modes): stock MirrorMaker 2 and kafka-mirror (:class:`Mirror`), the
fixed-rate producer and the probe consumer processes that time every record."""

from __future__ import annotations

import argparse
import queue
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafka_mirror_testing.localcluster import LocalKafkaCluster
from kafka_mirror_testing.stock_mm2 import StockMirrorMaker2

from . import class_data, km_driver, mm2_driver
from .clusters import start_clusters, stop_clusters_and_clean
from .common import MirrorFailed, second_km_label
from .latency_probe import latency_probe
from .measures import TreeSampler
from .rate_producer import RateProducer
from .workload import Workload


class Probe:
    """A latency probe process (``latency_probe``) and its command and reply queues."""

    def __init__(self, ctx: Any, bootstrap: str, name: str) -> None:
        self.name = name
        self.commands = ctx.Queue()
        self.replies = ctx.Queue()
        self.process = ctx.Process(
            target=latency_probe,
            args=(bootstrap, name, self.commands, self.replies),
            name=f"latency-probe-{name}",
            daemon=True,
        )
        self.process.start()

    def assign(self, topic: str, partitions: Sequence[int]) -> None:
        self.commands.put(("assign", [(topic, p) for p in partitions]))

    def ask(self, *command: Any, timeout: float = 120.0) -> Any:
        self.commands.put(command)
        try:
            return self.replies.get(timeout=timeout)
        except queue.Empty:
            alive = self.process.is_alive()
            raise MirrorFailed(
                f"latency probe {self.name} did not answer {command[0]!r} "
                f"({'alive' if alive else 'dead'})"
            ) from None

    def stop(self) -> None:
        if self.process.is_alive():
            self.commands.put(("exit",))
            self.process.join(timeout=10)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(timeout=5)


@dataclass
class Mirror:
    """One mirror under test, writing into its own destination cluster."""

    label: str
    kind: str  # "mm2" | "kafka-mirror"
    destination: LocalKafkaCluster
    start: Callable[[], int]
    stop: Callable[[TreeSampler | None], None]
    alive: Callable[[], bool]
    log_path: Path
    ready_marker: str
    config: dict[str, str]
    probe: Probe | None = None
    sampler: TreeSampler | None = None
    started: float = 0.0  # monotonic
    started_wall: float = 0.0
    first_record_s: float | None = None
    results: dict[str, Any] = field(default_factory=dict)


def make_mirrors(
    ns: argparse.Namespace,
    workdir: Path,
    source: LocalKafkaCluster,
    destinations: Mapping[str, LocalKafkaCluster],
    workload: Workload,
    topics: str,
    consumer_tuning: Mapping[str, str],
    producer_tuning: Mapping[str, str],
    realtime: Mapping[str, str] | None,
    mm2_tasks: int | None = None,
) -> list[Mirror]:
    """One :class:`Mirror` per destination (its key the kind: ``mm2``, ``kafka-mirror`` or
    ``kafka-mirror-rt``), not started, with the command line's settings; ``mm2_tasks``: MM2's
    ``tasks.max`` (default one per partition of the workload)."""
    mirrors: list[Mirror] = []
    for kind, destination in destinations.items():
        run_dir = workdir / kind
        if kind == "mm2":
            props = mm2_driver.mm2_config(
                source,
                destination,
                workload,
                topics=topics,
                refresh_seconds=ns.refresh_seconds,
                consumer=consumer_tuning,
                producer=producer_tuning,
                tasks=mm2_tasks,
            )
            mm2 = StockMirrorMaker2(props, run_dir, heap=ns.mm2_heap)

            def start_mm2(mm2: StockMirrorMaker2 = mm2) -> int:
                mm2.start(wait_started=None)
                assert mm2.pid is not None
                return mm2.pid

            def stop_mm2(_s: TreeSampler | None, mm2: StockMirrorMaker2 = mm2) -> None:
                mm2.stop(timeout=30)

            mirrors.append(
                Mirror(
                    mm2_driver.NAME,
                    kind,
                    destination,
                    start_mm2,
                    stop_mm2,
                    mm2.alive,
                    mm2.log_path,
                    mm2_driver.READY_MARKER,
                    props,
                )
            )
        else:
            props = km_driver.kafka_mirror_config(
                source,
                destination,
                workload,
                ns.max_records_per_batch,
                dict(ns.km_producer),
                topics=topics,
                refresh_seconds=ns.refresh_seconds,
                consumer=consumer_tuning,
                producer=producer_tuning,
                consumer_extra=dict(ns.km_consumer),
                class_data_dir=ns.km_class_data_dir,
            )
            if kind == "kafka-mirror-rt":
                assert realtime is not None
                props.update(realtime)
            spark_conf = {"spark.driver.memory": ns.driver_memory, **dict(ns.spark_conf)}
            km = km_driver.KafkaMirrorProcess(props, run_dir, spark_conf)
            mirrors.append(
                Mirror(
                    second_km_label(props) if kind == "kafka-mirror-rt" else km_driver.NAME,
                    kind,
                    destination,
                    km.start,
                    km.stop,
                    km.alive,
                    km.log_path,
                    km_driver.READY_MARKER,
                    props,
                )
            )
    return mirrors


def mirror_cpu(mirror: Mirror) -> float:
    """CPU seconds of the mirror's processes so far."""
    assert mirror.sampler is not None
    mirror.sampler.sample()
    return mirror.sampler.cpu_seconds()


def stop_everything(mirrors: Sequence[Mirror], producer: RateProducer | None,
                    probes: Sequence[Probe], clusters: Sequence[LocalKafkaCluster],
                    workdir: Path, keep: bool) -> None:
    """Stop the mirrors, the producer, the probes and the clusters (each by its PID; an error
    stops none of the others), then remove the work directory unless ``keep``."""
    for mirror in mirrors:
        if mirror.sampler is not None:
            mirror.sampler.stop()
        try:
            mirror.stop(mirror.sampler)
        except Exception as exc:  # keep stopping the others
            print(f"stopping {mirror.label}: {exc}", flush=True)
    if producer is not None:
        producer.stop()
    for probe in probes:
        probe.stop()
    stop_clusters_and_clean(clusters, workdir, keep)


def start_source_and_destinations(
    ns: argparse.Namespace, workdir: Path, kinds: Sequence[str],
    clusters: list[LocalKafkaCluster],
) -> tuple[LocalKafkaCluster, dict[str, LocalKafkaCluster]]:
    """The source cluster and a destination cluster per mirror kind, started in parallel (and
    added to ``clusters``, which the caller stops); kafka-mirror's class data archive is built
    first when a kafka-mirror runs."""
    source = LocalKafkaCluster("source", workdir, heap=ns.broker_heap)
    clusters.append(source)
    destinations = {
        kind: LocalKafkaCluster(f"destination-{kind}", workdir, heap=ns.broker_heap)
        for kind in kinds
    }
    clusters.extend(destinations.values())
    if any(kind != "mm2" for kind in kinds):
        class_data.prime(ns.km_class_data_dir)
    print(f"starting {len(clusters)} clusters (broker heap {ns.broker_heap} each)", flush=True)
    start_clusters(clusters)
    return source, destinations
