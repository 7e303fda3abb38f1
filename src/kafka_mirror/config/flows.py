"""A flow's settings from mm2.properties (the pair's ``A->B.<key>`` over the top level), read
with MirrorMaker 2's keys and defaults, and the replication policy it names."""

from __future__ import annotations

from collections.abc import Mapping

from kafka_mirror.config import keys
from kafka_mirror.config.connector import connector_config
from kafka_mirror.config.model import MICRO_BATCH, REALTIME, ClusterSpec, FlowSpec, SyncSettings
from kafka_mirror.config.values import Values
from kafka_mirror.errors import ConfigError
from kafka_mirror.mm2.group_filter import DEFAULT_GROUPS_EXCLUDE, GroupFilter
from kafka_mirror.mm2.java_policy import PolicyLoadError, load_policy
from kafka_mirror.mm2.policy import (
    DEFAULT_POLICY_CLASS,
    POLICY_CLASSES,
    DefaultReplicationPolicy,
    IdentityReplicationPolicy,
    ReplicationPolicy,
)
from kafka_mirror.mm2.topic_filter import DEFAULT_TOPICS_EXCLUDE, TopicFilter


def strip_prefix(props: Mapping[str, str], prefix: str) -> dict[str, str]:
    """The keys that start with ``prefix``, without it."""
    return {k[len(prefix) :]: v for k, v in props.items() if k.startswith(prefix)}


def client_part(props: Mapping[str, str]) -> dict[str, str]:
    """The Kafka client settings among ``props``."""
    return {k: v for k, v in props.items() if keys.is_client_key(k)}


def make_policy(values: Values, source: str, target: str) -> ReplicationPolicy:
    """The flow's policy: Default and Identity re-implemented here, any other class loaded from
    the class path (``$CLASSPATH``) and configured as MM2 configures it (:mod:`java_policy`)."""
    class_key = "replication.policy.class"
    class_name = values.text(class_key, DEFAULT_POLICY_CLASS)
    kind = POLICY_CLASSES.get(class_name)
    if kind is None:
        top = values.top if isinstance(values, FlowValues) else values.props
        try:
            return load_policy(class_name, connector_config(top, source, target))
        except PolicyLoadError as exc:
            raise values.error(class_key, f"cannot load the replication policy: {exc}") from None
    separator = values.props.get("replication.policy.separator", ".")
    internal = values.boolean("replication.policy.internal.topic.separator.enabled", True)
    if kind == "identity":
        return IdentityReplicationPolicy(separator, internal)
    return DefaultReplicationPolicy(separator, internal)


def sync_settings(values: Values) -> SyncSettings:
    """MM2's offset-sync, checkpoint, group-sync, heartbeat-replication and ACL settings."""
    return SyncSettings(
        emit_offset_syncs=values.boolean("emit.offset-syncs.enabled", True),
        offset_syncs_location=values.choice(
            "offset-syncs.topic.location", "source", ("source", "target")
        ),
        offset_syncs_replication_factor=replication_factor(
            values, "offset-syncs.topic.replication.factor"
        ),
        offset_lag_max=values.integer("offset.lag.max", 100, 0),
        emit_checkpoints=values.boolean("emit.checkpoints.enabled", True),
        checkpoints_interval=values.number("emit.checkpoints.interval.seconds", 60.0, 0.1),
        checkpoints_replication_factor=replication_factor(
            values, "checkpoints.topic.replication.factor"
        ),
        sync_group_offsets=values.boolean("sync.group.offsets.enabled", False),
        sync_group_offsets_interval=values.number(
            "sync.group.offsets.interval.seconds", 60.0, 0.1
        ),
        refresh_groups=values.boolean("refresh.groups.enabled", True),
        refresh_groups_interval=values.number("refresh.groups.interval.seconds", 30.0, 0.1),
        heartbeats_replication=values.boolean("heartbeats.replication.enabled", True),
        sync_topic_acls=values.boolean("sync.topic.acls.enabled", True),
        sync_topic_acls_interval=values.number("sync.topic.acls.interval.seconds", 600.0, 0.1),
    )


def replication_factor(values: Values, key: str) -> int:
    value = values.integer(key, -1, minimum=-1)
    if value == 0:
        raise values.error(key, "must be -1 (broker default) or at least 1")
    return value


def _legacy(values: Values, key: str, legacy: str) -> str:
    """``key``, or its legacy name (``*.blacklist``) when only that one is set."""
    return key if key in values.props else legacy


MICRO_BATCH_KEYS = ("mirror.max.records.per.batch", "mirror.trigger.interval.ms")


def _mode(values: Values) -> tuple[str, str]:
    """``mirror.mode`` and why, when it was not set: real-time mode by default, micro-batch mode
    when a micro-batch-only key is set (a configuration tuned for micro-batches keeps them);
    those keys are refused in real-time mode."""
    chosen = [key for key in MICRO_BATCH_KEYS if key in values.props]
    if "mirror.mode" not in values.props:
        if chosen:
            return MICRO_BATCH, f"{chosen[0]} is set"
        return REALTIME, "the default"
    mode = values.choice("mirror.mode", REALTIME, (MICRO_BATCH, REALTIME))
    if mode == REALTIME and "mirror.trigger.interval.ms" in values.props:
        raise values.error("mirror.trigger.interval.ms",
                           "a trigger interval is for micro-batch mode; with mirror.mode = "
                           "realtime set mirror.realtime.batch.duration.ms instead")
    if mode == REALTIME and "mirror.max.records.per.batch" in values.props:
        raise values.error("mirror.max.records.per.batch",
                           "real-time mode reads without a per-batch limit; remove the key or "
                           "use mirror.mode = micro-batch")
    return mode, ""


def flow_settings(
    values: Values,
    source: ClusterSpec,
    target: ClusterSpec,
    consumer_overrides: Mapping[str, str],
    producer_overrides: Mapping[str, str],
) -> FlowSpec:
    """Build a flow from its effective settings (flow overrides already merged in)."""
    topic_filter = TopicFilter(
        include=values.regex_list("topics", (".*",)),
        exclude=values.regex_list(_legacy(values, "topics.exclude", "topics.blacklist"),
                                  DEFAULT_TOPICS_EXCLUDE),
    )
    group_filter = GroupFilter(
        include=values.regex_list("groups", (".*",)),
        exclude=values.regex_list(_legacy(values, "groups.exclude", "groups.blacklist"),
                                  DEFAULT_GROUPS_EXCLUDE),
    )
    exclude_cfg_key = _legacy(values, "config.properties.exclude", "config.properties.blacklist")
    flow_id = f"{source.alias}_to_{target.alias}"
    mode, mode_reason = _mode(values)
    return FlowSpec(
        source=source,
        target=target,
        topic_filter=topic_filter,
        policy=make_policy(values, source.alias, target.alias),
        replication_factor=replication_factor(values, "replication.factor"),
        sync_topic_configs=values.boolean("sync.topic.configs.enabled", True),
        sync_topic_configs_interval_seconds=values.number(
            "sync.topic.configs.interval.seconds", 600.0, minimum=float("-inf")
        ),
        config_properties_exclude=values.regex_list(exclude_cfg_key, ()),
        refresh_topics=values.boolean("refresh.topics.enabled", True),
        refresh_interval_seconds=values.number(
            "refresh.topics.interval.seconds", 30.0, minimum=1.0
        ),
        consumer_overrides=dict(consumer_overrides),
        producer_overrides=dict(producer_overrides),
        max_records_per_batch=values.integer("mirror.max.records.per.batch", 500_000, 1),
        trigger_interval_ms=values.integer("mirror.trigger.interval.ms", 0, 0),
        fail_on_data_loss=values.boolean("mirror.fail.on.data.loss", True),
        topic_state_retention_ms=values.integer(
            "mirror.topic.state.retention.ms", 604_800_000, 0
        ),
        starting_offsets=values.choice(
            "mirror.starting.offsets", "earliest", ("earliest", "latest")
        ),
        lag_group_id=values.text("mirror.lag.group.id", f"kafka-mirror.{flow_id}"),
        lag_commit_interval_ms=values.integer("mirror.lag.commit.interval.ms", 5_000, 0),
        group_filter=group_filter,
        syncs=sync_settings(values),
        takeover_mm2=values.boolean("mirror.takeover.mm2", True),
        positions_in_kafka=values.boolean("mirror.positions.in.kafka", True),
        positions_interval_ms=values.integer("mirror.positions.in.kafka.interval.ms", 1_000, 0),
        lease_ms=_lease_ms(values),
        exactly_once_target=exactly_once_target(values),
        mode=mode,
        mode_reason=mode_reason,
        realtime_batch_ms=values.integer("mirror.realtime.batch.duration.ms", 300_000, 5_000),
        realtime_groups=values.integer("mirror.realtime.groups", 0, 0),
    )


def _lease_ms(values: Values) -> int:
    """``mirror.lease.ms``: 0 (no lease) or at least 2,000 ms."""
    lease = values.integer("mirror.lease.ms", 5_000, 0)
    if 0 < lease < 2_000:
        raise values.error("mirror.lease.ms", "expected 0 (no lease) or at least 2000")
    return lease


def exactly_once_target(values: Values) -> bool:
    """``mirror.exactly.once.target`` (default true, in either mode). Connect's own switches
    are read with their meaning: ``exactly.once.source.support`` (enabled, preparing, disabled)
    and ``exactly.once.support`` (required, requested) ask for exactly once, which the mirror
    gives without target transactions; ``required`` with the mirror's own switch off is an
    error."""
    worker = values.text("exactly.once.source.support", "disabled").lower()
    if worker not in ("enabled", "preparing", "disabled"):
        raise values.error("exactly.once.source.support", "expected enabled, preparing or disabled")
    connector = values.text("exactly.once.support", "requested").lower()
    if connector not in ("required", "requested"):
        raise values.error("exactly.once.support", "expected required or requested")
    own = values.boolean("mirror.exactly.once.target", True)
    if not own and connector == "required":
        raise values.error(
            "exactly.once.support",
            "exactly once is required, but mirror.exactly.once.target = false turns it off",
        )
    return own


def pairs(
    props: Mapping[str, str], aliases: list[str], origin: str, hidden: frozenset[str]
) -> list[tuple[str, str, FlowValues]]:
    """Every ordered pair of clusters with its effective settings (``A->B.<key>`` over the top
    level); errors about pair-level keys name the key as written in the file."""
    out = []
    for source in aliases:
        for target in aliases:
            if source != target:
                prefix = f"{source}->{target}."
                scoped = strip_prefix(props, prefix)
                values = FlowValues(props, origin, prefix, scoped, hidden)
                out.append((source, target, values))
    return out


class FlowValues(Values):
    """Values of one flow: errors name ``A->B.key`` when the flow set that key."""

    def __init__(
        self, props: Mapping[str, str], source: str, prefix: str, scoped: Mapping[str, str],
        hidden: frozenset[str] = frozenset(),
    ) -> None:
        super().__init__({**props, **scoped}, source, hidden)
        self.top = props  # the file's keys, before the flow's own override them
        self.prefix = prefix
        self.scoped = scoped

    def error(self, key: str, message: str) -> ConfigError:
        named = self.prefix + key if key in self.scoped else key
        hidden = key in self.hidden or named in self.hidden
        value = "(from a config provider, not shown)" if hidden else self.props.get(key)
        return ConfigError(message, source=self.source, key=named, value=value)
