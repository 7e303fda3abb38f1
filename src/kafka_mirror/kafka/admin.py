"""Control-plane connections to a cluster (confluent-kafka), with bounded, named failures."""

from __future__ import annotations

import logging
import re
import threading
import time
import warnings
from collections.abc import Callable, Iterable
from typing import Any, cast

from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from kafka_mirror.config.model import ClusterSpec
from kafka_mirror.errors import ClusterUnreachable, ConfigError, MirrorError
from kafka_mirror.kafka.clients import admin_properties
from kafka_mirror.kafka.kerberos import KerberosLoginError, keytab_login
from kafka_mirror.kafka.librdkafka import librdkafka_config, with_client_log
from kafka_mirror.kafka.offset_commits import commit_offsets

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

_COORDINATOR_PENDING = frozenset(
    {
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    }
)


def error_code(exc: KafkaException) -> int | None:
    """The Kafka error code a client call failed with (None when it carries none)."""
    error = exc.args[0] if exc.args else None
    return error.code() if isinstance(error, KafkaError) else None


def _coordinator_pending(error: KafkaError) -> bool:
    return error.code() in _COORDINATOR_PENDING or bool(error.retriable())


class _Served:
    """An AdminClient that serves its queued events (librdkafka's log lines, errors) before
    each call: an AdminClient serves them only in ``poll``, which nothing else calls."""

    def __init__(self, client: AdminClient) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Any:
        self._client.poll(0)
        return getattr(self._client, name)


class ClusterAdmin:
    """An AdminClient for one cluster that remembers fatal client errors (bad credentials)."""

    def __init__(self, cluster: ClusterSpec) -> None:
        self.cluster = cluster
        self._fatal: str | None = None
        self._lock = threading.Lock()
        conf = with_client_log(
            librdkafka_config(admin_properties(cluster), f"cluster '{cluster.alias}'"),
            f"cluster '{cluster.alias}' admin",
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
            self.client = cast(AdminClient, _Served(AdminClient(conf)))
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

    def partitions(self, wanted: Callable[[str], bool]) -> list[tuple[str, int]]:
        """Every partition of the topics ``wanted`` selects."""
        return [
            (topic, partition)
            for topic, count in sorted(self.topic_partitions().items())
            if wanted(topic)
            for partition in range(count)
        ]

    def log_start_offsets(
        self, partitions: list[tuple[str, int]], timeout: float = 30.0
    ) -> dict[tuple[str, int], int]:
        """The first offset each partition still holds (retention and deleted records move it)."""
        return self._list_offsets(partitions, OffsetSpec.earliest(), timeout)

    def end_offsets(
        self, partitions: list[tuple[str, int]], timeout: float = 30.0
    ) -> dict[tuple[str, int], int]:
        """The offset the next record of each partition will get."""
        return self._list_offsets(partitions, OffsetSpec.latest(), timeout)

    def _list_offsets(
        self, partitions: list[tuple[str, int]], spec: OffsetSpec, timeout: float
    ) -> dict[tuple[str, int], int]:
        if not partitions:
            return {}
        request = {TopicPartition(t, p): spec for t, p in partitions}
        futures = self.client.list_offsets(request, request_timeout=timeout)
        return {
            (tp.topic, tp.partition): int(future.result(timeout=timeout).offset)
            for tp, future in futures.items()
        }

    def topic_ids(self, topics: list[str], timeout: float = 30.0) -> dict[str, str] | None:
        """The topic ID of each topic that exists (a topic deleted and created again under the
        same name gets a new one); None when the cluster has no topic IDs to give (brokers
        older than Kafka 2.8)."""
        if not topics:
            return {}
        futures = self.client.describe_topics(TopicCollection(topics), request_timeout=timeout)
        ids = {}
        for topic, future in futures.items():
            try:
                ids[topic] = str(future.result(timeout=timeout).topic_id)
            except KafkaException as exc:
                code = error_code(exc)
                if code == KafkaError.UNKNOWN_TOPIC_OR_PART:
                    continue  # deleted meanwhile
                if code in (KafkaError._UNSUPPORTED_FEATURE, KafkaError.UNSUPPORTED_VERSION):
                    return None
                raise
        return ids

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

    # Group offsets are read and committed the way consumers do it, through a client in the
    # group that never joins it: librdkafka's admin calls for them crash the process when the
    # group coordinator moves or is still loading (librdkafka issue 5040: NOT_COORDINATOR in
    # ListConsumerGroupOffsets), which happens at every broker restart.
    def _group_client(self, group: str) -> Consumer:
        conf = dict(self.conf)
        conf.update({"group.id": group, "enable.auto.commit": False,
                     "enable.auto.offset.store": False})
        return Consumer(conf)

    def committed_offsets(
        self, group: str, partitions: Iterable[tuple[str, int]], timeout: float = 30.0
    ) -> dict[tuple[str, int], tuple[int, str]]:
        """The group's committed (offset, metadata) for each of ``partitions`` that has one."""
        wanted = [TopicPartition(t, p) for t, p in sorted(set(partitions))]
        if not wanted:
            return {}
        deadline = time.monotonic() + timeout
        while True:
            consumer = self._group_client(group)
            try:
                result = consumer.committed(wanted, timeout=max(1.0, deadline - time.monotonic()))
                break
            except KafkaException as exc:
                # a cluster that just started may still be electing the group's coordinator
                # (__consumer_offsets being created): NOT_COORDINATOR and the like are retried
                error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
                if error is None or not _coordinator_pending(error) or \
                        time.monotonic() + 0.5 >= deadline:
                    raise
                log.debug("committed offsets of group %s: %s; retrying", group, error)
            finally:
                consumer.close()
            time.sleep(0.5)
        return {
            (tp.topic, tp.partition): (tp.offset, tp.metadata or "")
            for tp in result
            if tp.offset is not None and tp.offset >= 0 and tp.error is None
        }

    def group_state(self, group: str, timeout: float = 30.0) -> tuple[str, int]:
        """(state, number of members); ``("ABSENT", 0)`` for a group the cluster does not know
        (brokers report unknown groups as DEAD). Read with the classic ListGroups and
        DescribeGroups requests (any protocol type; not librdkafka's coordinator-based admin
        call, which aborts the process when a broker restarts mid-request)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            described = self.client.list_groups(group, timeout=timeout)
        for meta in described:
            if meta.id != group:
                continue
            if meta.error is not None:
                raise KafkaException(meta.error)
            members = len(meta.members or [])
            state = re.sub(r"(?<=[a-z])(?=[A-Z])", "_", meta.state or "").upper()
            if state in ("DEAD", "") and not members:
                return "ABSENT", 0
            return state, members
        return "ABSENT", 0

    def commit_group_offsets(
        self, group: str, offsets: dict[tuple[str, int], tuple[int, str]], timeout: float = 30.0
    ) -> None:
        """Commit offsets for an inactive group (the broker refuses a group with members)."""
        partitions = [
            TopicPartition(topic, partition, offset, metadata or "")
            for (topic, partition), (offset, metadata) in sorted(offsets.items())
        ]
        consumer = self._group_client(group)
        try:
            refused = commit_offsets(consumer, group, partitions)
        finally:
            consumer.close()
        if refused:
            raise KafkaException(refused[0].error)
