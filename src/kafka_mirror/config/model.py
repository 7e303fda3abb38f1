"""The configuration model every front end (mm2.properties, MM1 flags) produces."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kafka_mirror.mm2.group_filter import GroupFilter
from kafka_mirror.mm2.policy import HEARTBEATS_TOPIC, ReplicationPolicy
from kafka_mirror.mm2.rules import should_replicate_topic
from kafka_mirror.mm2.topic_filter import TopicFilter


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
class SyncSettings:
    """What a flow keeps in step besides records, with MirrorMaker 2's keys and meanings.

    Replication factors of -1 mean the broker's default (MM2's default of 3 fails on smaller
    clusters); intervals are seconds.
    """

    emit_offset_syncs: bool = True  # emit.offset-syncs.enabled
    offset_syncs_location: str = "source"  # offset-syncs.topic.location
    offset_syncs_replication_factor: int = -1
    # offset.lag.max: within a copy that maps one to one, a sync at least every this many
    # records after the last (0: every record)
    offset_lag_max: int = 100
    emit_checkpoints: bool = True  # emit.checkpoints.enabled
    checkpoints_interval: float = 60.0  # emit.checkpoints.interval.seconds
    checkpoints_replication_factor: int = -1
    sync_group_offsets: bool = False  # sync.group.offsets.enabled
    sync_group_offsets_interval: float = 60.0
    refresh_groups: bool = True  # refresh.groups.enabled
    refresh_groups_interval: float = 30.0
    heartbeats_replication: bool = True  # heartbeats.replication.enabled
    sync_topic_acls: bool = True  # sync.topic.acls.enabled
    sync_topic_acls_interval: float = 600.0


@dataclass(frozen=True)
class HeartbeatSpec:
    """MM2 emits heartbeats for every pair whose ``emit.heartbeats.enabled`` holds, enabled or not:
    key (source, target) into ``heartbeats`` (the pair's policy's ``heartbeatsTopic``) on the
    target."""

    source: ClusterSpec
    target: ClusterSpec
    interval: float = 1.0  # emit.heartbeats.interval.seconds
    replication_factor: int = -1  # heartbeats.topic.replication.factor
    topic: str = HEARTBEATS_TOPIC

    @property
    def name(self) -> str:
        return f"{self.source.alias}->{self.target.alias}"


MICRO_BATCH = "micro-batch"
REALTIME = "realtime"


@dataclass(frozen=True)
class FlowSpec:
    """One replication flow ``source->target``: what it mirrors and how."""

    source: ClusterSpec
    target: ClusterSpec
    topic_filter: TopicFilter
    policy: ReplicationPolicy
    replication_factor: int = -1
    sync_topic_configs: bool = True
    # how often the topics' configs are described and synced again (MirrorMaker 2's 10 minutes;
    # negative: at the start only); new topics are described when they appear
    sync_topic_configs_interval_seconds: float = 600.0
    config_properties_exclude: tuple[str, ...] = ()
    refresh_topics: bool = True
    refresh_interval_seconds: float = 30.0
    consumer_overrides: Mapping[str, str] = field(default_factory=dict)
    producer_overrides: Mapping[str, str] = field(default_factory=dict)
    max_records_per_batch: int = 500_000
    trigger_interval_ms: int = 0
    fail_on_data_loss: bool = True
    # how long the state of a source topic that left the flow is kept (7 days)
    topic_state_retention_ms: int = 604_800_000
    starting_offsets: str = "earliest"
    lag_group_id: str = ""
    lag_commit_interval_ms: int = 5_000
    group_filter: GroupFilter = field(default_factory=GroupFilter)
    syncs: SyncSettings = field(default_factory=SyncSettings)
    takeover_mm2: bool = True
    takeover_group: str = ""
    # mirror.positions.in.kafka: the flow's positions and the target's ends after them are kept
    # in MM2's Connect offsets topic on the target (a state dir lost or stale is rebuilt from
    # there), at most once per mirror.positions.in.kafka.interval.ms
    positions_in_kafka: bool = True
    positions_interval_ms: int = 1_000
    # offset.storage.replication.factor and offset.storage.partitions: the offsets topic's, when
    # kafka-mirror creates it (as MirrorMaker 2's Connect worker would)
    positions_replication_factor: int = -1
    positions_partitions: int = 25
    # mirror.lease.ms: one writer per flow, elected in Kafka (0: no lease, every instance writes)
    lease_ms: int = 5_000
    # mirror.exactly.once.target: at every (re)start, skip what a cut batch already wrote
    exactly_once_target: bool = True
    # mirror.mode: realtime (the default: Spark's real-time mode, one task slot per group of
    # partitions) or micro-batch (the default when a micro-batch key is set; mode_reason says
    # which, empty when mirror.mode was set); mirror.realtime.batch.duration.ms: how long one
    # real-time batch reads before Spark commits its positions; mirror.realtime.groups: how many
    # groups (tasks, consumers) a real-time query reads, 0: one per two cores
    mode: str = REALTIME
    mode_reason: str = ""
    realtime_batch_ms: int = 300_000
    realtime_groups: int = 0

    @property
    def realtime(self) -> bool:
        return self.mode == REALTIME

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
        """MM2's test: passes the filter (or is a heartbeats topic, when those replicate), is
        not internal and did not come from the target."""
        return should_replicate_topic(
            topic,
            self.topic_filter,
            self.policy,
            self.target.alias,
            self.syncs.heartbeats_replication,
        )

    def should_checkpoint(self, group: str) -> bool:
        return group != self.lag_group_id and self.group_filter.should_sync(group)


@dataclass(frozen=True)
class MetricsBasicAuth:
    """HTTP basic authentication of the metrics endpoint (``mirror.metrics.basic.auth.*``): the
    password is known only by its salted hash, in the JMX exporter's forms: ``SHA-1``,
    ``SHA-256``, ``SHA-512`` (the hex digest of ``<salt>:<password>``) or
    ``PBKDF2WithHmacSHA1/256/512`` (the hex of the derived key of ``key_length`` bits)."""

    username: str
    password_hash: str
    salt: str
    algorithm: str = "SHA-256"
    iterations: int = 0
    key_length: int = 128


@dataclass(frozen=True)
class MetricsTls:
    """HTTPS of the metrics endpoint (``mirror.metrics.ssl.*``): the key and certificate (chain)
    from a key store as Kafka's listeners take it: JKS, PKCS12 or PEM (key and certificates in
    one file)."""

    keystore_location: str
    keystore_type: str = "JKS"
    keystore_password: str = field(default="", repr=False)
    key_password: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class MetricsSettings:
    """The metrics endpoint: ``mirror.metrics.port``, ``mirror.metrics.bind.address``, and who
    may read it over what (``mirror.metrics.basic.auth.*``, ``mirror.metrics.ssl.*``)."""

    port: int
    bind_address: str = "0.0.0.0"
    basic_auth: MetricsBasicAuth | None = None
    tls: MetricsTls | None = None

    @property
    def scheme(self) -> str:
        return "https" if self.tls is not None else "http"


@dataclass(frozen=True)
class MirrorConfig:
    """Everything a mirror process runs: clusters, enabled flows, Spark settings."""

    origin: str
    clusters: Mapping[str, ClusterSpec]
    flows: tuple[FlowSpec, ...]
    spark_conf: Mapping[str, str] = field(default_factory=dict)
    state_dir: Path | None = None
    notices: tuple[str, ...] = ()
    heartbeats: tuple[HeartbeatSpec, ...] = ()
    raw: Mapping[str, str] = field(default_factory=dict)
    metrics: MetricsSettings | None = None
    # mirror.class.data.sharing: the Spark driver's JVM maps the classes of the last run
    # (kafka_mirror.engine.class_data)
    class_data_sharing: bool = True
    # mirror.class.data.dir (None: <state-dir>/class-data)
    class_data_dir: Path | None = None
