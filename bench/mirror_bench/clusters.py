"""The local Kafka clusters: starting them in parallel, admin clients, end offsets."""

from __future__ import annotations

import contextlib
import gc
import shutil
from collections.abc import Collection, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
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


def present_end_offsets(admin: Any, topic: str, partitions: Sequence[int]) -> dict[int, int]:
    """End offsets of the partitions that exist (missing topic or partition: left out).

    The metadata request first is needed: librdkafka's admin client remembers that a topic did
    not exist, and ``list_offsets`` alone keeps failing after it was created."""
    try:
        metadata = admin.list_topics(topic, timeout=5.0).topics.get(topic)
    except Exception:
        return {}
    if metadata is None or metadata.error is not None:
        return {}
    present = [p for p in partitions if p in metadata.partitions]
    if not present:
        return {}
    latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
    futures = admin.list_offsets(
        {TopicPartition(topic, p): latest for p in present}, request_timeout=5.0
    )
    found: dict[int, int] = {}
    for tp, future in futures.items():
        try:
            found[tp.partition] = future.result().offset
        except Exception:
            continue
    return found


class SourceLedger:
    """What the source holds of each phase. Each source partition gets the records of one phase
    at a time and the producer pauses between phases, so a phase's share of a partition is the
    growth of its end offset since the previous phase ended."""

    def __init__(self, admin: Any) -> None:
        self.admin = admin
        self.ends: dict[tuple[str, int], int] = {}

    def held(
        self, acknowledged: dict[tuple[int, str, int], int], phases: Collection[int]
    ) -> dict[int, int] | None:
        """Records of ``phases`` the source holds, from the partitions the producer wrote them
        to (its ``acknowledged`` counts per (phase, topic, partition)); None if an end offset
        could not be read."""
        wanted: dict[str, list[int]] = {}
        for phase, topic, partition in acknowledged:
            if phase in phases:
                wanted.setdefault(topic, []).append(partition)
        now: dict[tuple[str, int], int] = {}
        for topic, partitions in wanted.items():
            found = present_end_offsets(self.admin, topic, partitions)
            if len(found) != len(partitions):
                return None
            now.update({(topic, p): offset for p, offset in found.items()})
        totals = dict.fromkeys(phases, 0)
        for phase, topic, partition in acknowledged:
            if phase in phases:
                totals[phase] += now[(topic, partition)] - self.ends.get((topic, partition), 0)
        self.ends.update(now)
        return totals


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


def stop_clusters_and_clean(clusters: Sequence[LocalKafkaCluster], workdir: Path,
                            keep: bool) -> None:
    """Stop every cluster, then remove the work directory unless ``keep``."""
    stop_clusters(clusters)
    if keep:
        print(f"kept {workdir}", flush=True)
    else:
        shutil.rmtree(workdir, ignore_errors=True)


def stop_clusters(clusters: Sequence[LocalKafkaCluster]) -> None:
    """Stop every cluster (by PID), the last started first; errors do not stop the others."""
    for cluster in reversed(clusters):
        with contextlib.suppress(Exception):
            cluster.stop()
