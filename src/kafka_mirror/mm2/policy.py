"""Replication policies as the engine runs them: MirrorMaker 2's naming rules
(:mod:`kafka_mirror.mm2.rules`, shared with the Ansible collection) plus the Spark SQL expression
that names each record's target topic in a flow's query.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from kafka_mirror.mm2 import rules
from kafka_mirror.mm2.rules import DEFAULT_POLICY_CLASS, HEARTBEATS_TOPIC, POLICY_CLASSES

__all__ = [
    "DEFAULT_POLICY_CLASS",
    "HEARTBEATS_TOPIC",
    "POLICY_CLASSES",
    "DefaultReplicationPolicy",
    "IdentityReplicationPolicy",
    "ReplicationPolicy",
    "sql_string",
]


class ReplicationPolicy(rules.ReplicationPolicy):
    """A policy a flow runs: MM2's rules and the target topic as a Spark SQL expression."""

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
class DefaultReplicationPolicy(rules.DefaultReplicationPolicy, ReplicationPolicy):
    """MM2's DefaultReplicationPolicy (``source.topic``) in a flow."""


@dataclass(frozen=True)
class IdentityReplicationPolicy(rules.IdentityReplicationPolicy, DefaultReplicationPolicy):
    """MM2's IdentityReplicationPolicy (names kept, heartbeats topics prefixed) in a flow."""

    def spark_topic_expression(self, source_alias: str, topics: Collection[str]) -> str:
        heartbeats = rules.DefaultReplicationPolicy.format_remote_topic(self, source_alias, "")
        prefix = sql_string(heartbeats)
        suffix = sql_string("%" + self.heartbeats_topic())
        return f"CASE WHEN topic LIKE {suffix} THEN concat({prefix}, topic) ELSE topic END"
