# Copyright (c) kafka.mirror contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""MirrorMaker 2's topic and group rules (Kafka 4.x): the one copy of the engine and the collection.

Which topics a flow mirrors (``topics``, ``topics.exclude``: DefaultTopicFilter), which groups it
checkpoints (``groups``, ``groups.exclude``: DefaultGroupFilter), which topics are internal, how a
topic is named on the target (DefaultReplicationPolicy, IdentityReplicationPolicy and the
separator), and cycle detection (MirrorSourceConnector.shouldReplicateTopic and isCycle).

This file is the only copy: the kafka.mirror collection ships it as module_utils ``mm2_rules``
(mirror_topics and disk_headroom select and name topics with it), and the engine imports it as
``kafka_mirror.mm2.rules``, a symbolic link to this file (``ansible-galaxy collection build`` would
ship a link from here into the engine's ``src/`` as a link to a file it leaves out). Hence:
standard library only, and syntax the oldest target Python of ansible-test's sanity accepts.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import ClassVar

DEFAULT_POLICY_CLASS = "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"
IDENTITY_POLICY_CLASS = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"
# replication.policy.class values kafka-mirror implements itself: default or identity
POLICY_CLASSES = {
    DEFAULT_POLICY_CLASS: "default",
    "DefaultReplicationPolicy": "default",
    IDENTITY_POLICY_CLASS: "identity",
    "IdentityReplicationPolicy": "identity",
}

HEARTBEATS_TOPIC = "heartbeats"

# MirrorMaker 2 4.x's default topics.exclude (3.x had .*[\-\.]internal instead of mm2.*\.internal);
# MM2's own internal topics and names starting with __ or . are never mirrored whatever the
# filter says (ReplicationPolicy.is_internal_topic).
DEFAULT_TOPICS_EXCLUDE = (r"mm2.*\.internal", r".*\.replica", r"__.*")
# What kafka-mirror legacy excludes (MM1 mirrored no internal topics either)
LEGACY_TOPICS_EXCLUDE = (r".*[\-\.]internal", r".*\.replica", r"__.*")
# Topics kafka.mirror itself writes, never mirrored whatever the configuration says.
PRODUCT_TOPICS = (r"kafka-mirror\..*",)
# MirrorMaker 2's DefaultGroupFilter exclusions (groups.exclude).
DEFAULT_GROUPS_EXCLUDE = (r"console-consumer-.*", r"connect-.*", r"__.*")
# Groups kafka-mirror itself commits to (the lag groups), never checkpointed.
PRODUCT_GROUPS = (r"kafka-mirror\..*",)


def regex_union(patterns: tuple[str, ...]) -> re.Pattern[str] | None:
    """One compiled pattern matching any of ``patterns`` as a whole name."""
    if not patterns:
        return None
    return re.compile("|".join(f"(?:{p})" for p in patterns))


@dataclass(frozen=True)
class NameFilter:
    """Allow/deny regex lists over whole names (MM2's filters): a name passes when some allow
    and no deny regex matches it, nor one of the class's always-excluded patterns."""

    include: tuple[str, ...] = (".*",)
    exclude: tuple[str, ...] = ()
    ALWAYS_EXCLUDED: ClassVar[tuple[str, ...]] = ()
    _include: re.Pattern[str] | None = field(init=False, repr=False, compare=False)
    _exclude: re.Pattern[str] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_include", regex_union(self.include))
        object.__setattr__(self, "_exclude", regex_union(self.exclude + self.ALWAYS_EXCLUDED))

    def passes(self, name: str) -> bool:
        if self._include is None or not self._include.fullmatch(name):
            return False
        return not (self._exclude is not None and self._exclude.fullmatch(name))


@dataclass(frozen=True)
class TopicFilter(NameFilter):
    """Which topics a flow mirrors (``topics``, ``topics.exclude``)."""

    exclude: tuple[str, ...] = DEFAULT_TOPICS_EXCLUDE
    ALWAYS_EXCLUDED: ClassVar[tuple[str, ...]] = PRODUCT_TOPICS

    def should_mirror(self, topic: str) -> bool:
        return self.passes(topic)


@dataclass(frozen=True)
class GroupFilter(NameFilter):
    """Which groups a flow checkpoints (``groups``, ``groups.exclude``)."""

    exclude: tuple[str, ...] = DEFAULT_GROUPS_EXCLUDE
    ALWAYS_EXCLUDED: ClassVar[tuple[str, ...]] = PRODUCT_GROUPS

    def should_sync(self, group: str) -> bool:
        return self.passes(group)


class ReplicationPolicy(ABC):
    """Names remote topics and MM2's internal topics, and tells where a topic came from
    (Kafka's ``org.apache.kafka.connect.mirror.ReplicationPolicy``)."""

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


def should_replicate_topic(
    topic: str,
    topic_filter: TopicFilter,
    policy: ReplicationPolicy,
    target_alias: str | None,
    heartbeats_replication: bool = True,
) -> bool:
    """MM2's ``shouldReplicateTopic``: the topic passes the filter (or is a heartbeats topic,
    when those replicate), is not internal and did not come from the target. Without a target
    alias there is no cycle detection."""
    wanted = topic_filter.should_mirror(topic) or (
        heartbeats_replication and policy.is_heartbeats_topic(topic)
    )
    return (
        wanted
        and not policy.is_internal_topic(topic)
        and not (target_alias is not None and policy.is_cycle(topic, target_alias))
    )
