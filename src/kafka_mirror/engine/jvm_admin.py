"""Kafka's Java clients in the Spark driver's JVM (py4j): the settings they take, and one
``org.apache.kafka.clients.admin.Admin`` that the readers of end offsets and leader epochs
build on, and that reads the source topics' IDs at every topic refresh once a flow has it (the
first refresh, before the session runs, reads them with librdkafka's client). Java clients,
not librdkafka's, so that every client setting (JKS stores, a JAAS line, a per-cluster Kerberos
principal) means what it means in Spark's Kafka source and sink."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kafka_mirror.engine.jvm_statics import JvmStatics

# the longest a client's close waits for its requests under way (a stop with the cluster gone
# gives it what is left of the stop's budget, down to nothing)
CLOSE_SECONDS = 5.0


def partition_list(partitions: Iterable[tuple[str, int]]) -> str:
    """Partitions as ``io.kafkamirror.PartitionList`` reads them (``topic:partition``,
    comma-separated): one string crosses py4j in one call, where a Python list becomes a Java
    list one element per call."""
    return ",".join(f"{topic}:{partition}" for topic, partition in partitions)


def number_list(numbers: Iterable[int]) -> str:
    """Numbers as ``io.kafkamirror.PartitionList`` reads them (comma-separated)."""
    return ",".join(str(int(n)) for n in numbers)


def java_properties(jvm: Any, props: Mapping[str, str]) -> Any:
    """A ``java.util.Properties`` holding ``props``."""
    java_props = jvm.java.util.Properties()
    for key, value in props.items():
        java_props.setProperty(key, value)
    return java_props


class JvmAdmin:
    """One Java ``Admin`` client of a cluster, with its calls' timeout."""

    def __init__(self, spark: Any, props: Mapping[str, str], timeout: float = 10.0) -> None:
        self._jvm = spark._jvm
        self._props = java_properties(self._jvm, props)
        self._timeout_ms = int(timeout * 1000)
        self._admin = self._jvm.org.apache.kafka.clients.admin.Admin.create(self._props)
        self._topic_ids = JvmStatics(self._jvm, "io.kafkamirror.TopicIds")

    def topic_ids(self, topics: list[str], timeout: float = 30.0) -> dict[str, str] | None:
        """The ID of each of ``topics`` that exists, written as librdkafka's client writes it
        (the state holds IDs so), in one py4j call (``io.kafkamirror.TopicIds``): librdkafka's
        Python client builds an object per partition and replica of every topic it describes.
        None when the cluster gives topics no IDs (brokers before Kafka 2.8)."""
        if not topics:
            return {}
        text = self._topic_ids.call("read", self._admin, ",".join(topics), int(timeout * 1000))
        if text is None:
            return None
        return dict(item.split("=", 1) for item in str(text).split(",") if item)

    def warm(self) -> None:
        """Connect and load the client's request path now (a standby, before a takeover needs
        it): the cluster's nodes, asked once."""
        self._admin.describeCluster().nodes().get(
            self._timeout_ms, self._jvm.java.util.concurrent.TimeUnit.MILLISECONDS)

    def close(self, timeout: float = CLOSE_SECONDS) -> None:
        """Closes the client, waiting at most ``timeout`` seconds (and never more than
        :data:`CLOSE_SECONDS`) for requests under way: a stop gives what is left of its budget."""
        wait = max(0.0, min(timeout, CLOSE_SECONDS))
        self._admin.close(self._jvm.java.time.Duration.ofMillis(int(wait * 1000)))
