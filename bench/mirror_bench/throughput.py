"""Throughput mode: a backlog mirrored by each mirror in turn, into a fresh destination cluster
each time, timed from process start until the destination holds every record."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

from kafka_mirror_testing.localcluster import LocalKafkaCluster
from kafka_mirror_testing.spark_standalone import SparkStandalone

from . import class_data
from .clusters import start_clusters, stop_clusters_and_clean
from .common import CEILING_TOPIC, SOURCE_TOPIC
from .km_driver import realtime_settings, run_kafka_mirror
from .measures import MirrorResult
from .mm2_driver import run_mm2
from .report import machine_info, render_table
from .workload import ProduceResult, Workload, produce


def _produce_json(result: ProduceResult) -> dict[str, Any]:
    return asdict(result) | {"records_per_s": result.records_per_s, "mb_per_s": result.mb_per_s}


def run_throughput(ns: argparse.Namespace) -> dict[str, Any]:
    workload = Workload(ns.records, ns.record_size, ns.partitions, ns.compression)
    payload_bytes = workload.payload_bytes()
    workdir: Path = (
        ns.workdir.resolve() if ns.workdir else Path(tempfile.mkdtemp(prefix="mirror-bench-"))
    )
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"work directory {workdir}", flush=True)
    report: dict[str, Any] = {
        "command": command_line(),
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
        start_clusters(clusters)

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
        if ns.km_at_least_once and ns.only != "mm2":
            mirrors.append("kafka-mirror-at-least-once")
        if ns.km_standalone and ns.only != "mm2":
            mirrors.append("kafka-mirror-standalone")
        if ns.km_realtime and ns.only != "mm2":
            mirrors.append("kafka-mirror-realtime")
        if ns.km_cold_start and ns.only != "mm2":
            mirrors.append("kafka-mirror-cold")
        if ns.only != "mm2":
            class_data.prime(ns.km_class_data_dir)
        for round_no in range(1, ns.rounds + 1):
            # Alternate the order between rounds, so neither always runs first.
            order = mirrors if round_no % 2 else list(reversed(mirrors))
            for kind in order:
                # Each mirror writes into a fresh destination cluster: same topic name,
                # nothing left over from the other one.
                if destination is None:
                    destination = new_destination()
                    start_clusters([destination])
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
                        + {"kafka-mirror+metrics": ", metrics endpoint on)",
                           "kafka-mirror-at-least-once": ", mirror.exactly.once.target = false)",
                           "kafka-mirror-standalone": f", Spark standalone, {ns.km_standalone} "
                                                      "workers of 1 core)",
                           "kafka-mirror-realtime": f", {ns.km_second_mode} mode)",
                           "kafka-mirror-cold": ", without the class data archive)",
                           }.get(kind, ")"),
                        flush=True,
                    )
                    standalone = None
                    if kind == "kafka-mirror-standalone":
                        standalone = SparkStandalone(run_dir / "spark", workers=ns.km_standalone)
                        print(f"  starting Spark standalone, {ns.km_standalone} workers",
                              flush=True)
                        standalone.start()
                    try:
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
                            exactly_once=kind != "kafka-mirror-at-least-once",
                            standalone=standalone,
                            consumer_extra=dict(ns.km_consumer),
                            realtime=realtime_settings(ns.km_realtime_setting)
                            if kind == "kafka-mirror-realtime" else None,
                            class_data_dir=None if kind == "kafka-mirror-cold"
                            else ns.km_class_data_dir,
                        )
                    finally:
                        if standalone is not None:
                            standalone.stop()
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
        stop_clusters_and_clean(clusters, workdir, ns.keep)


def command_line() -> str:
    """The command as documented: ``bench/mirror_benchmark.py`` and the arguments given."""
    return " ".join(["bench/mirror_benchmark.py", *sys.argv[1:]])
