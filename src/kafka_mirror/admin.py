"""Control-plane connections to a cluster (confluent-kafka), with bounded, named failures."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from confluent_kafka import (
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from kafka_mirror.clients import admin_properties, librdkafka_config
from kafka_mirror.config.model import ClusterSpec
from kafka_mirror.errors import ClusterUnreachable, ConfigError, MirrorError
from kafka_mirror.kerberos import KerberosLoginError, keytab_login

log = logging.getLogger(__name__)

_FATAL_CODES = frozenset(
    {
        KafkaError._AUTHENTICATION,
        KafkaError.SASL_AUTHENTICATION_FAILED,
        KafkaError._SSL,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
    }
)


class ClusterAdmin:
    """An AdminClient for one cluster that remembers fatal client errors (bad credentials)."""

    def __init__(self, cluster: ClusterSpec) -> None:
        self.cluster = cluster
        self._fatal: str | None = None
        self._lock = threading.Lock()
        conf: dict[str, Any] = librdkafka_config(
            admin_properties(cluster), f"cluster '{cluster.alias}'"
        )
        conf["error_cb"] = self._on_error
        self.conf = conf
        try:
            warning = keytab_login(conf, f"cluster '{cluster.alias}'")
        except KerberosLoginError as exc:
            raise ClusterUnreachable(cluster.alias, cluster.bootstrap_servers, str(exc), 0) from exc
        if warning:
            log.warning("%s", warning)
        try:
            self.client = AdminClient(conf)
        except KafkaException as exc:
            # e.g. "No provider for SASL mechanism GSSAPI" (a confluent-kafka built without
            # Cyrus SASL) or a kinit that failed (wrong keytab or principal)
            reason = exc.args[0].str() if exc.args and hasattr(exc.args[0], "str") else str(exc)
            raise ConfigError(
                f"the control-plane client (confluent-kafka) for {cluster.bootstrap_servers} "
                f"cannot be created: {reason}",
                source=f"cluster '{cluster.alias}'",
            ) from exc

    def _on_error(self, error: KafkaError) -> None:
        if error.code() in _FATAL_CODES or error.fatal():
            with self._lock:
                self._fatal = error.str()

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Return once the cluster answers; raise :class:`ClusterUnreachable` otherwise."""
        deadline = time.monotonic() + timeout
        last = "no answer"
        while time.monotonic() < deadline:
            self.client.poll(0)  # serves error_cb: authentication failures arrive there
            if self._fatal:
                raise ClusterUnreachable(
                    self.cluster.alias, self.cluster.bootstrap_servers, self._fatal,
                    timeout - (deadline - time.monotonic()),
                )
            try:
                self.client.list_topics(timeout=min(5.0, max(0.5, deadline - time.monotonic())))
                return
            except KafkaException as exc:
                last = str(exc.args[0].str() if exc.args else exc)
                self.client.poll(0.5)
        raise ClusterUnreachable(
            self.cluster.alias, self.cluster.bootstrap_servers, self._fatal or last, timeout
        )

    def topic_partitions(self, timeout: float = 30.0) -> dict[str, int]:
        """Every topic of the cluster with its partition count."""
        meta = self.client.list_topics(timeout=timeout)
        return {
            name: len(topic.partitions)
            for name, topic in meta.topics.items()
            if topic.error is None
        }

    def log_start_offsets(
        self, partitions: list[tuple[str, int]], timeout: float = 30.0
    ) -> dict[tuple[str, int], int]:
        """The first offset each partition still holds (retention and deleted records move it)."""
        if not partitions:
            return {}
        request = {TopicPartition(t, p): OffsetSpec.earliest() for t, p in partitions}
        futures = self.client.list_offsets(request, request_timeout=timeout)
        return {
            (tp.topic, tp.partition): int(future.result(timeout=timeout).offset)
            for tp, future in futures.items()
        }

    # ---------------------------------------------------------------- internal topics
    def ensure_compacted_topic(self, topic: str, replication_factor: int = -1) -> bool:
        """Create a single-partition compacted topic (MM2's internal topics) unless it exists;
        True when created. Failure is an error naming the cluster and the topic."""
        if topic in self.topic_partitions():
            return False
        new = NewTopic(
            topic, num_partitions=1, replication_factor=replication_factor,
            config={"cleanup.policy": "compact"},
        )
        try:
            self.client.create_topics([new], operation_timeout=30)[topic].result(timeout=60)
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            if error is not None and error.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                return False
            reason = error.str() if error is not None else str(exc)
            raise MirrorError(
                f"cannot create topic '{topic}' on cluster '{self.cluster.alias}' "
                f"({self.cluster.bootstrap_servers}): {reason}"
            ) from exc
        log.info("created topic %s on cluster %s", topic, self.cluster.alias)
        return True

    # ---------------------------------------------------------------- consumer groups
    def consumer_groups(self, timeout: float = 30.0) -> list[str]:
        """Ids of every consumer group of the cluster."""
        result = self.client.list_consumer_groups(request_timeout=timeout).result()
        return sorted(g.group_id for g in result.valid)

    def committed_offsets(
        self, group: str, timeout: float = 30.0
    ) -> dict[tuple[str, int], tuple[int, str]]:
        """The group's committed (offset, metadata) per partition; absent groups give {}."""
        futures = self.client.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group)], request_timeout=timeout
        )
        result = futures[group].result()
        return {
            (tp.topic, tp.partition): (tp.offset, tp.metadata or "")
            for tp in result.topic_partitions or []
            if tp.offset is not None and tp.offset >= 0 and tp.error is None
        }

    def group_state(self, group: str, timeout: float = 30.0) -> tuple[str, int]:
        """(state, number of members); ``("ABSENT", 0)`` for a group the cluster does not know
        (brokers report unknown groups as DEAD)."""
        futures = self.client.describe_consumer_groups([group], request_timeout=timeout)
        try:
            description = futures[group].result()
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            if error is not None and error.code() == KafkaError.GROUP_ID_NOT_FOUND:
                return "ABSENT", 0
            raise
        state = description.state
        if state in (ConsumerGroupState.DEAD, ConsumerGroupState.UNKNOWN) and not (
            description.members
        ):
            return "ABSENT", 0
        return str(getattr(state, "name", state)), len(description.members or [])

    def commit_group_offsets(
        self, group: str, offsets: dict[tuple[str, int], tuple[int, str]], timeout: float = 30.0
    ) -> None:
        """Commit offsets for an inactive group (the broker refuses a group with members)."""
        partitions = [
            TopicPartition(topic, partition, offset, metadata or "")
            for (topic, partition), (offset, metadata) in sorted(offsets.items())
        ]
        futures = self.client.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group, partitions)], request_timeout=timeout
        )
        futures[group].result()
