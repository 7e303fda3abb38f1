"""Replication policies as the engine runs them: MirrorMaker 2's naming rules
(:mod:`kafka_mirror.mm2.rules`, shared with the Ansible collection) plus how a flow's query names
each record's target topic (:class:`TargetTopicNames`, which the engine turns into a Spark
column).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
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
    "TargetTopicNames",
]


@dataclass(frozen=True)
class TargetTopicNames:
    """How a query names a record's target topic from its source topic: ``prefix`` before the
    name (none: the name kept), only before names that end with ``suffix`` when that is set;
    or, when ``names`` is set, the name given there to each topic the query reads (no other
    topic reaches it)."""

    prefix: str = ""
    suffix: str | None = None
    names: Mapping[str, str] | None = None

    def target(self, topic: str) -> str | None:
        """The target name of ``topic`` (what the query's column gives for it)."""
        if self.names is not None:
            return self.names.get(topic)
        if self.suffix is not None and not topic.endswith(self.suffix):
            return topic
        return self.prefix + topic


class ReplicationPolicy(rules.ReplicationPolicy):
    """A policy a flow runs: MM2's rules and how its query names target topics."""

    def target_topic_names(self, source_alias: str, topics: Collection[str]
                           ) -> TargetTopicNames:
        """The target names of a query over the source topics ``topics`` (which a policy that
        needs them may use): ``<alias>.<topic>`` by default."""
        return TargetTopicNames(prefix=self.format_remote_topic(source_alias, ""))


@dataclass(frozen=True)
class DefaultReplicationPolicy(rules.DefaultReplicationPolicy, ReplicationPolicy):
    """MM2's DefaultReplicationPolicy (``source.topic``) in a flow."""


@dataclass(frozen=True)
class IdentityReplicationPolicy(rules.IdentityReplicationPolicy, DefaultReplicationPolicy):
    """MM2's IdentityReplicationPolicy (names kept, heartbeats topics prefixed) in a flow."""

    def target_topic_names(self, source_alias: str, topics: Collection[str]
                           ) -> TargetTopicNames:
        """Names kept; a heartbeats topic (a name ending with it, as MM2's looksLikeHeartbeat
        tests) gets the default policy's prefix."""
        heartbeats = rules.DefaultReplicationPolicy.format_remote_topic(self, source_alias, "")
        return TargetTopicNames(prefix=heartbeats, suffix=self.heartbeats_topic())
