"""The configuration model every front end (mm2.properties, MM1 flags) produces."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kafka_mirror.policy import ReplicationPolicy
from kafka_mirror.topic_filter import TopicFilter


@dataclass(frozen=True)
class ClusterSpec:
    """One Kafka cluster: its alias and the client settings of each kind of client."""

    alias: str
    client: Mapping[str, str]
    consumer: Mapping[str, str] = field(default_factory=dict)
    producer: Mapping[str, str] = field(default_factory=dict)
    admin: Mapping[str, str] = field(default_factory=dict)

    @property
    def bootstrap_servers(self) -> str:
        return self.client["bootstrap.servers"]


@dataclass(frozen=True)
class FlowSpec:
    """One replication flow ``source->target``: what it mirrors and how."""

    source: ClusterSpec
    target: ClusterSpec
    topic_filter: TopicFilter
    policy: ReplicationPolicy
    replication_factor: int = -1
    sync_topic_configs: bool = True
    config_properties_exclude: tuple[str, ...] = ()
    refresh_topics: bool = True
    refresh_interval_seconds: float = 30.0
    consumer_overrides: Mapping[str, str] = field(default_factory=dict)
    producer_overrides: Mapping[str, str] = field(default_factory=dict)
    max_records_per_batch: int = 500_000
    trigger_interval_ms: int = 0
    fail_on_data_loss: bool = True
    starting_offsets: str = "earliest"
    lag_group_id: str = ""
    lag_commit_interval_ms: int = 5_000

    @property
    def name(self) -> str:
        return f"{self.source.alias}->{self.target.alias}"

    @property
    def path_name(self) -> str:
        """A name safe for directories and consumer group ids."""
        return f"{self.source.alias}_to_{self.target.alias}"

    def target_topic(self, topic: str) -> str:
        return self.policy.format_remote_topic(self.source.alias, topic)

    def should_mirror(self, topic: str) -> bool:
        return self.topic_filter.should_mirror(topic) and not self.policy.is_cycle(
            topic, self.target.alias
        )


@dataclass(frozen=True)
class MirrorConfig:
    """Everything a mirror process runs: clusters, enabled flows, Spark settings."""

    origin: str
    clusters: Mapping[str, ClusterSpec]
    flows: tuple[FlowSpec, ...]
    spark_conf: Mapping[str, str] = field(default_factory=dict)
    state_dir: Path | None = None
    notices: tuple[str, ...] = ()
