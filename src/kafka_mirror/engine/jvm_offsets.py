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


class JvmEndOffsets:
    """High watermarks through one ``org.apache.kafka.clients.admin.Admin`` per cluster."""

    def __init__(self, spark: Any, props: Mapping[str, str]) -> None:
        jvm = spark._jvm
        java_props = jvm.java.util.Properties()
        for key, value in props.items():
            java_props.setProperty(key, value)
        self._jvm = jvm
        self._admin = jvm.org.apache.kafka.clients.admin.Admin.create(java_props)

    def end_offsets(
        self, partitions: list[tuple[str, int]], timeout: float = 30.0
    ) -> dict[tuple[str, int], int]:
        if not partitions:
            return {}
        jvm = self._jvm
        latest = jvm.org.apache.kafka.clients.admin.OffsetSpec.latest()
        request = jvm.java.util.HashMap()
        keys = {}
        for topic, partition in partitions:
            java_tp = jvm.org.apache.kafka.common.TopicPartition(topic, partition)
            request.put(java_tp, latest)
            keys[(topic, partition)] = java_tp
        result = self._admin.listOffsets(request).all().get(
            int(timeout * 1000), jvm.java.util.concurrent.TimeUnit.MILLISECONDS
        )
        return {tp: int(result.get(java_tp).offset()) for tp, java_tp in keys.items()}

    def close(self) -> None:
        self._admin.close(self._jvm.java.time.Duration.ofSeconds(5))
