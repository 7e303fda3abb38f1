"""Driver for stock Apache Kafka MirrorMaker 2 (dedicated mode, connect-mirror 4.3.1)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from kafka_mirror_testing.localcluster import LocalKafkaCluster
from kafka_mirror_testing.stock_mm2 import StockMirrorMaker2, mm2_properties

from .common import (
    CONSUMER_TUNING,
    PRODUCER_TUNING,
    SOURCE_ALIAS,
    SOURCE_TOPIC,
    TARGET_ALIAS,
)
from .measures import Measurement, MirrorResult, log_time, measure
from .workload import Workload

NAME = "MirrorMaker 2"
READY_MARKER = "Kafka MirrorMaker started"


def mm2_config(
    source: LocalKafkaCluster,
    destination: LocalKafkaCluster,
    workload: Workload,
    *,
    topics: str = SOURCE_TOPIC,
    refresh_seconds: int = 1,
    consumer: Mapping[str, str] = CONSUMER_TUNING,
    producer: Mapping[str, str] = PRODUCER_TUNING,
    tasks: int | None = None,
) -> dict[str, str]:
    """MM2's properties: ``tasks.max`` ``tasks`` (default one per partition), the given client
    tuning."""
    extra: dict[str, str] = {
        "tasks.max": str(tasks or workload.partitions),
        "refresh.topics.interval.seconds": str(refresh_seconds),
        "offset.flush.interval.ms": "10000",
    }
    extra.update({f"{SOURCE_ALIAS}.consumer.{k}": v for k, v in consumer.items()})
    extra.update({f"{TARGET_ALIAS}.producer.{k}": v for k, v in producer.items()})
    return mm2_properties(
        source.bootstrap,
        destination.bootstrap,
        topics=topics,
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
            NAME,
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
    result.ready_seconds = log_time(mm2.log_path, READY_MARKER, started[0].started_wall)
    result.config = dict(props)
    result.extra["heap"] = heap
    return result
