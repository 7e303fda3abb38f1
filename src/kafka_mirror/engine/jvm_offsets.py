"""Target end offsets read with Kafka's Java ``Admin`` client in the Spark driver's JVM (py4j).

The batch writer asks for them around every batch, on the hot path. The Java client is the one
Spark's Kafka sink uses, so every client setting (JKS stores, a JAAS line, a per-cluster Kerberos
principal) means what it means there, and a broker restart is handled by its own retries within
the call's timeout. (librdkafka's admin client could leave a request unanswered for good when a
broker restarted under it, stalling the batch: tests/engine/test_faults.py.)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafka_mirror.engine.jvm_admin import JvmAdmin, partition_list
from kafka_mirror.engine.jvm_statics import JvmStatics


class JvmEndOffsets(JvmAdmin):
    """High watermarks through one ``org.apache.kafka.clients.admin.Admin`` per cluster."""

    def __init__(self, spark: Any, props: Mapping[str, str], timeout: float = 10.0) -> None:
        super().__init__(spark, props, timeout)
        self._reads = JvmStatics(self._jvm, "io.kafkamirror.EndOffsets")

    def end_offsets(
        self, partitions: list[tuple[str, int]], timeout: float = 30.0
    ) -> dict[tuple[str, int], int]:
        """One py4j call (``io.kafkamirror.EndOffsets``), whatever the number of partitions."""
        if not partitions:
            return {}
        text = self._reads.call(
            "read", self._admin, partition_list(partitions), int(timeout * 1000))
        return dict(zip(partitions, (int(o) for o in str(text).split(",")), strict=True))
