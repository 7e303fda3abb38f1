"""Replication policies: how a topic is named on the cluster it is mirrored to.

Modelled on Kafka's ``org.apache.kafka.connect.mirror.ReplicationPolicy``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

DEFAULT_POLICY_CLASS = "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"
IDENTITY_POLICY_CLASS = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"


class ReplicationPolicy(ABC):
    """Names remote topics and tells where a topic came from."""

    @abstractmethod
    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        """The name ``topic`` of cluster ``source_alias`` gets on the target."""

    @abstractmethod
    def topic_source(self, topic: str) -> str | None:
        """The alias of the cluster ``topic`` was mirrored from, or None for a local topic."""

    @abstractmethod
    def upstream_topic(self, topic: str) -> str | None:
        """The name ``topic`` had on the cluster it was mirrored from."""

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

    def spark_topic_expression(self, source_alias: str) -> str:
        """A Spark SQL expression over the source column ``topic`` giving the target name."""
        prefix = self.format_remote_topic(source_alias, "")
        if not prefix:
            return "topic"
        return f"concat({sql_string(prefix)}, topic)"


def sql_string(text: str) -> str:
    """A Spark SQL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


@dataclass(frozen=True)
class DefaultReplicationPolicy(ReplicationPolicy):
    """``source.topic``: the alias of the source cluster, a separator, the topic."""

    separator: str = "."

    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        return f"{source_alias}{self.separator}{topic}"

    def topic_source(self, topic: str) -> str | None:
        head, sep, _ = topic.partition(self.separator)
        return head if sep and head else None

    def upstream_topic(self, topic: str) -> str | None:
        head, sep, rest = topic.partition(self.separator)
        return rest if sep and head else None


@dataclass(frozen=True)
class IdentityReplicationPolicy(ReplicationPolicy):
    """Topics keep their names; there is no cycle protection (as in MirrorMaker 2)."""

    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        return topic

    def topic_source(self, topic: str) -> str | None:
        return None

    def upstream_topic(self, topic: str) -> str | None:
        return None


POLICY_CLASSES = {
    DEFAULT_POLICY_CLASS: "default",
    "DefaultReplicationPolicy": "default",
    IDENTITY_POLICY_CLASS: "identity",
    "IdentityReplicationPolicy": "identity",
}
