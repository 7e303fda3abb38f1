"""Replication policies: how a topic is named on the cluster it is mirrored to.

Modelled on Kafka's ``org.apache.kafka.connect.mirror.ReplicationPolicy``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection
from dataclasses import dataclass

DEFAULT_POLICY_CLASS = "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"
IDENTITY_POLICY_CLASS = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"


HEARTBEATS_TOPIC = "heartbeats"


class ReplicationPolicy(ABC):
    """Names remote topics and MM2's internal topics, and tells where a topic came from."""

    @abstractmethod
    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        """The name ``topic`` of cluster ``source_alias`` gets on the target."""

    @abstractmethod
    def topic_source(self, topic: str) -> str | None:
        """The alias of the cluster ``topic`` was mirrored from, or None for a local topic."""

    @abstractmethod
    def upstream_topic(self, topic: str) -> str | None:
        """The name ``topic`` had on the cluster it was mirrored from."""

    @abstractmethod
    def offset_syncs_topic(self, cluster_alias: str) -> str:
        """``mm2-offset-syncs.<alias>.internal``."""

    @abstractmethod
    def checkpoints_topic(self, source_alias: str) -> str:
        """``<source>.checkpoints.internal`` (on the target)."""

    @abstractmethod
    def is_checkpoints_topic(self, topic: str) -> bool: ...

    @abstractmethod
    def is_mm2_internal_topic(self, topic: str) -> bool: ...

    def heartbeats_topic(self) -> str:
        return HEARTBEATS_TOPIC

    def original_topic(self, topic: str) -> str:
        """The name the topic had where it was first produced (all hops stripped)."""
        seen: set[str] = set()
        current = topic
        while current not in seen:
            seen.add(current)
            upstream = self.upstream_topic(current)
            if upstream is None or upstream == current:
                return current
            current = upstream
        return current

    def is_heartbeats_topic(self, topic: str) -> bool:
        return self.original_topic(topic) == self.heartbeats_topic()

    def is_internal_topic(self, topic: str) -> bool:
        """MM2's ``isInternalTopic`` (4.x): its own topics and names starting ``__`` or ``.``."""
        return (
            self.is_mm2_internal_topic(topic)
            or topic.startswith("__")
            or topic.startswith(".")
        )

    def is_cycle(self, topic: str, target_alias: str) -> bool:
        """True when ``topic`` came from ``target_alias``, however many hops ago."""
        seen: set[str] = set()
        current: str | None = topic
        while current is not None and current not in seen:
            seen.add(current)
            source = self.topic_source(current)
            if source is None:
                return False
            if source == target_alias:
                return True
            upstream = self.upstream_topic(current)
            if upstream == current:
                return False
            current = upstream
        return False

    @property
    def display_name(self) -> str:
        """How check-config names the policy."""
        return type(self).__name__

    def spark_topic_expression(self, source_alias: str, topics: Collection[str]) -> str:
        """A Spark SQL expression over the source column ``topic`` giving the target name, for a
        query that reads ``topics`` (which a policy that needs them may use)."""
        prefix = self.format_remote_topic(source_alias, "")
        if not prefix:
            return "topic"
        return f"concat({sql_string(prefix)}, topic)"


def sql_string(text: str) -> str:
    """A Spark SQL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


@dataclass(frozen=True)
class DefaultReplicationPolicy(ReplicationPolicy):
    """``source.topic``: the alias of the source cluster, a separator, the topic.

    Internal topic names use the separator too, unless
    ``replication.policy.internal.topic.separator.enabled=false`` (then ``.``).
    """

    separator: str = "."
    internal_separator_enabled: bool = True

    @property
    def _internal(self) -> str:
        return self.separator if self.internal_separator_enabled else "."

    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        return f"{source_alias}{self.separator}{topic}"

    def _parts(self, topic: str) -> list[str]:
        # Java's String.split: trailing empty strings are dropped; an empty separator splits
        # between every character (MM2 accepts it, with strange results)
        parts = topic.split(self.separator) if self.separator else list(topic)
        while parts and parts[-1] == "":
            parts.pop()
        return parts

    def topic_source(self, topic: str) -> str | None:
        parts = self._parts(topic)
        return parts[0] if len(parts) >= 2 else None

    def upstream_topic(self, topic: str) -> str | None:
        source = self.topic_source(topic)
        return None if source is None else topic[len(source) + len(self.separator) :]

    def offset_syncs_topic(self, cluster_alias: str) -> str:
        sep = self._internal
        return f"mm2-offset-syncs{sep}{cluster_alias}{sep}internal"

    def checkpoints_topic(self, source_alias: str) -> str:
        sep = self._internal
        return f"{source_alias}{sep}checkpoints{sep}internal"

    def is_checkpoints_topic(self, topic: str) -> bool:
        sep = self._internal
        return topic.endswith(f"{sep}checkpoints{sep}internal")

    def is_mm2_internal_topic(self, topic: str) -> bool:
        return (
            topic.startswith("mm2") and topic.endswith(f"{self._internal}internal")
        ) or self.is_checkpoints_topic(topic)


@dataclass(frozen=True)
class IdentityReplicationPolicy(DefaultReplicationPolicy):
    """Topics keep their names, except heartbeats topics (named as by the default policy);
    there is no cycle protection (as in MirrorMaker 2)."""

    def _heartbeat(self, topic: str) -> bool:
        return topic.endswith(self.heartbeats_topic())

    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        if self._heartbeat(topic):
            return super().format_remote_topic(source_alias, topic)
        return topic

    def topic_source(self, topic: str) -> str | None:
        return super().topic_source(topic) if self._heartbeat(topic) else None

    def upstream_topic(self, topic: str) -> str | None:
        return super().upstream_topic(topic) if self._heartbeat(topic) else topic

    def spark_topic_expression(self, source_alias: str, topics: Collection[str]) -> str:
        prefix = sql_string(super().format_remote_topic(source_alias, ""))
        suffix = sql_string("%" + self.heartbeats_topic())
        return f"CASE WHEN topic LIKE {suffix} THEN concat({prefix}, topic) ELSE topic END"


POLICY_CLASSES = {
    DEFAULT_POLICY_CLASS: "default",
    "DefaultReplicationPolicy": "default",
    IDENTITY_POLICY_CLASS: "identity",
    "IdentityReplicationPolicy": "identity",
}
