"""The local Kafka clusters: starting them in parallel, admin clients, end offsets."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from confluent_kafka import TopicPartition
from confluent_kafka.admin import OffsetSpec

from kafka_mirror_testing.localcluster import LocalKafkaCluster


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


def start_clusters(clusters: Sequence[LocalKafkaCluster]) -> None:
    """Start the clusters in parallel (each start is mostly JVM warm-up)."""
    with ThreadPoolExecutor(max_workers=len(clusters)) as pool:
        for future in [pool.submit(c.start, 120.0) for c in clusters]:
            future.result()


def stop_clusters(clusters: Sequence[LocalKafkaCluster]) -> None:
    """Stop every cluster (by PID), the last started first; errors do not stop the others."""
    for cluster in reversed(clusters):
        with contextlib.suppress(Exception):
            cluster.stop()
