"""MirrorMaker 2 ``mm2.properties`` to :class:`MirrorConfig`, read as MM2 reads it."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from kafka_mirror.config import keys
from kafka_mirror.config.connector import connector_config
from kafka_mirror.config.loops import refuse_identity_loops
from kafka_mirror.config.model import (
    MICRO_BATCH,
    REALTIME,
    ClusterSpec,
    FlowSpec,
    HeartbeatSpec,
    MetricsSettings,
    MirrorConfig,
    SyncSettings,
)
from kafka_mirror.config.properties import parse_properties, read_properties_file
from kafka_mirror.config.providers import resolve_providers
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

_FLOW_KEY = re.compile(r"(?P<source>[^.>\s]+)->(?P<target>[^.\s]+)\.(?P<key>.+)")
_ALIAS = re.compile(r"[A-Za-z0-9_\-]+")
ENGINE_KEYS = frozenset({"mirror.state.dir", "mirror.metrics.port", "mirror.metrics.bind.address",
                         "mirror.class.data.sharing", "mirror.class.data.dir"})
_PASSED_ON = ("spark.", "config.providers")


def load_mm2(path: Path) -> MirrorConfig:
    read = read_properties_file(path)
    config = mm2_from_properties(read.values, str(path))
    return replace(config, notices=tuple(read.notes) + config.notices)


def mm2_from_text(text: str, origin: str = "<string>") -> MirrorConfig:
    return mm2_from_properties(parse_properties(text, origin), origin)


def _strip(props: Mapping[str, str], prefix: str) -> dict[str, str]:
    return {k[len(prefix) :]: v for k, v in props.items() if k.startswith(prefix)}


def _client_part(props: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in props.items() if keys.is_client_key(k)}


def _cluster(alias: str, top: Mapping[str, str], origin: str) -> ClusterSpec:
    scoped = _strip(top, alias + ".")
    client = _client_part(top) | _client_part(scoped)
    if not client.get("bootstrap.servers", "").strip():
        raise ConfigError(
            f"cluster '{alias}' has no bootstrap servers",
            source=origin,
            key=f"{alias}.bootstrap.servers",
        )
    return ClusterSpec(
        alias=alias,
        client=client,
        consumer=_strip(top, "consumer.") | _strip(scoped, "consumer."),
        producer=_strip(top, "producer.") | _strip(scoped, "producer."),
        admin=_strip(top, "admin.") | _strip(scoped, "admin."),
    )


def make_policy(values: Values, source: str, target: str) -> ReplicationPolicy:
    """The flow's policy: Default and Identity re-implemented here, any other class loaded from
    the class path (``$CLASSPATH``) and configured as MM2 configures it (:mod:`java_policy`)."""
    class_key = "replication.policy.class"
    class_name = values.text(class_key, DEFAULT_POLICY_CLASS)
    kind = POLICY_CLASSES.get(class_name)
    if kind is None:
        top = values.top if isinstance(values, _FlowValues) else values.props
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
        offset_syncs_replication_factor=_replication_factor(
            values, "offset-syncs.topic.replication.factor"
        ),
        emit_checkpoints=values.boolean("emit.checkpoints.enabled", True),
        checkpoints_interval=values.number("emit.checkpoints.interval.seconds", 60.0, 0.1),
        checkpoints_replication_factor=_replication_factor(
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


def _replication_factor(values: Values, key: str) -> int:
    value = values.integer(key, -1, minimum=-1)
    if value == 0:
        raise values.error(key, "must be -1 (broker default) or at least 1")
    return value


def flow_settings(
    values: Values,
    source: ClusterSpec,
    target: ClusterSpec,
    consumer_overrides: Mapping[str, str],
    producer_overrides: Mapping[str, str],
) -> FlowSpec:
    """Build a flow from its effective settings (flow overrides already merged in)."""
    exclude_key = "topics.exclude" if "topics.exclude" in values.props else "topics.blacklist"
    topic_filter = TopicFilter(
        include=values.regex_list("topics", (".*",)),
        exclude=values.regex_list(exclude_key, DEFAULT_TOPICS_EXCLUDE),
    )
    replication_factor = _replication_factor(values, "replication.factor")
    groups_exclude_key = "groups.exclude" if "groups.exclude" in values.props else (
        "groups.blacklist"
    )
    group_filter = GroupFilter(
        include=values.regex_list("groups", (".*",)),
        exclude=values.regex_list(groups_exclude_key, DEFAULT_GROUPS_EXCLUDE),
    )
    exclude_cfg_key = (
        "config.properties.exclude"
        if "config.properties.exclude" in values.props
        else "config.properties.blacklist"
    )
    flow_id = f"{source.alias}_to_{target.alias}"
    mode = values.choice("mirror.mode", MICRO_BATCH, (MICRO_BATCH, REALTIME))
    realtime = mode == REALTIME
    if realtime and "mirror.trigger.interval.ms" in values.props:
        raise values.error("mirror.trigger.interval.ms",
                           "a trigger interval is for micro-batch mode; with mirror.mode = "
                           "realtime set mirror.realtime.batch.duration.ms instead")
    if realtime and "mirror.max.records.per.batch" in values.props:
        raise values.error("mirror.max.records.per.batch",
                           "real-time mode reads without a per-batch limit; remove the key or "
                           "use mirror.mode = micro-batch")
    return FlowSpec(
        source=source,
        target=target,
        topic_filter=topic_filter,
        policy=make_policy(values, source.alias, target.alias),
        replication_factor=replication_factor,
        sync_topic_configs=values.boolean("sync.topic.configs.enabled", True),
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
        starting_offsets=values.choice(
            "mirror.starting.offsets", "earliest", ("earliest", "latest")
        ),
        lag_group_id=values.text("mirror.lag.group.id", f"kafka-mirror.{flow_id}"),
        lag_commit_interval_ms=values.integer("mirror.lag.commit.interval.ms", 5_000, 0),
        group_filter=group_filter,
        syncs=sync_settings(values),
        takeover_mm2=values.boolean("mirror.takeover.mm2", True),
        exactly_once_target=exactly_once_target(values, realtime),
        mode=mode,
        realtime_batch_ms=values.integer("mirror.realtime.batch.duration.ms", 300_000, 5_000),
    )


def exactly_once_target(values: Values, realtime: bool = False) -> bool:
    """``mirror.exactly.once.target`` (default true, false in real-time mode, which is
    at-least-once). Connect's own switches are read with their meaning:
    ``exactly.once.source.support`` (enabled, preparing, disabled) and ``exactly.once.support``
    (required, requested) ask for exactly once, which the mirror gives without target
    transactions; ``required`` with the mirror's own switch off is an error."""
    worker = values.text("exactly.once.source.support", "disabled").lower()
    if worker not in ("enabled", "preparing", "disabled"):
        raise values.error("exactly.once.source.support", "expected enabled, preparing or disabled")
    connector = values.text("exactly.once.support", "requested").lower()
    if connector not in ("required", "requested"):
        raise values.error("exactly.once.support", "expected required or requested")
    if realtime:
        for key, wanted in (("mirror.exactly.once.target", "true"),
                            ("exactly.once.support", "required")):
            if values.text(key, "").lower() == wanted:
                raise values.error(key, "real-time mode (mirror.mode = realtime) is "
                                   "at-least-once: exactly once on the target needs "
                                   "micro-batch mode")
        return False
    own = values.boolean("mirror.exactly.once.target", True)
    if not own and connector == "required":
        raise values.error(
            "exactly.once.support",
            "exactly once is required, but mirror.exactly.once.target = false turns it off",
        )
    return own


def _check_keys(props: Mapping[str, str], aliases: list[str], origin: str) -> list[str]:
    """Notices for keys kafka-mirror does not act on; nothing here is fatal."""
    notices: list[str] = []
    known = sorted(keys.FLOW_KEYS | ENGINE_KEYS | {"clusters"})
    # a policy class of the user's own gets every replication.policy* key, as in MM2
    custom_policy = any(
        k.endswith("replication.policy.class") and v.strip() not in POLICY_CLASSES
        for k, v in props.items()
    )
    policy_keys = ("replication.policy.",) if custom_policy else ()

    def unused(key: str, rest: str) -> bool:
        why = keys.not_supported(rest)
        if why:
            notices.append(f"{origin}: '{key}' not supported: {why}")
        return why is not None

    for key in props:
        if key == "clusters" or key in ENGINE_KEYS or key.startswith((*_PASSED_ON, *policy_keys)):
            continue
        match = _FLOW_KEY.fullmatch(key)
        if match:
            rest = match["key"]
            if rest in keys.FLOW_KEYS or rest.startswith((*keys.CLIENT_ROLES, *policy_keys)):
                continue
            if not unused(key, rest):
                notices.append(
                    f"{origin}: unknown key '{key}' ignored{keys.suggestion(rest, known)}"
                )
            continue
        head, _, rest = key.partition(".")
        if head in aliases and rest:
            if keys.is_client_key(rest) or rest.startswith(keys.CLIENT_ROLES):
                continue
            if rest in keys.FLOW_KEYS and rest == "offset.storage.topic":
                continue
            if not unused(key, rest):
                notices.append(f"{origin}: unknown key '{key}' ignored")
            continue
        if key in keys.FLOW_KEYS or keys.is_client_key(key) or key.startswith(keys.CLIENT_ROLES):
            continue
        if not unused(key, key):
            notices.append(f"{origin}: unknown key '{key}' ignored{keys.suggestion(key, known)}")
    return notices


def mm2_from_properties(raw: Mapping[str, str], origin: str) -> MirrorConfig:
    props, hidden = resolve_providers(raw, origin)
    top = Values(props, origin, hidden)
    aliases = [a.strip() for a in top.text("clusters", "").split(",") if a.strip()]
    if not aliases:
        raise top.error("clusters", "name at least one cluster alias, e.g. clusters=A,B")
    for alias in aliases:
        if not _ALIAS.fullmatch(alias):
            raise ConfigError(
                "cluster aliases may hold letters, digits, '_' and '-' only",
                source=origin,
                key="clusters",
                value=alias,
            )
    if len(set(aliases)) != len(aliases):
        raise top.error("clusters", "a cluster alias is listed twice")
    clusters = {alias: _cluster(alias, props, origin) for alias in aliases}

    flows: list[FlowSpec] = []
    alias_notices: list[str] = []
    for key in props:
        match = _FLOW_KEY.fullmatch(key)
        if not match:
            continue
        unknown = [match[side] for side in ("source", "target") if match[side] not in clusters]
        if unknown:
            # MM2 ignores keys of pairs outside `clusters`; say so (a typo loses a whole flow)
            alias_notices.append(
                f"{origin}: '{key}' names cluster '{unknown[0]}', which is not in clusters="
                f"{','.join(aliases)}: ignored, as MirrorMaker 2 does"
            )
            continue
        if match["source"] == match["target"]:
            raise ConfigError("a flow needs two different clusters", source=origin, key=key)
    for key, value in props.items():
        if key.endswith("replication.policy.separator") and value == "":
            alias_notices.append(
                f"{origin}: '{key}' is empty: applied as MirrorMaker 2 applies it, so 'orders' "
                "from A becomes 'Aorders' and every topic of 2+ characters looks remote (its "
                "first character taken for a cluster alias); to keep names, use "
                "replication.policy.class = IdentityReplicationPolicy"
            )
    for source, target, effective in _pairs(props, aliases, origin, hidden):
        if not Values(effective.scoped, origin).boolean("enabled", False):
            continue
        flows.append(
            flow_settings(
                effective,
                clusters[source],
                clusters[target],
                _strip(effective.scoped, "consumer."),
                _strip(effective.scoped, "producer."),
            )
        )
    if not flows:
        # a flow key naming a cluster outside `clusters` (a typo) may be why: say which
        ignored = [n.split(": ", 1)[1] for n in alias_notices if "not in clusters=" in n]
        raise ConfigError(
            "no replication flow is enabled; add e.g. "
            f"{aliases[0]}->{aliases[-1] if len(aliases) > 1 else 'B'}.enabled=true"
            + (f" ({'; '.join(ignored)})" if ignored else ""),
            source=origin,
        )
    refuse_identity_loops(flows, origin)
    state_dir = props.get("mirror.state.dir")
    class_data_dir = props.get("mirror.class.data.dir")
    return MirrorConfig(
        origin=origin,
        clusters=clusters,
        flows=tuple(flows),
        spark_conf={k: v for k, v in props.items() if k.startswith("spark.")},
        state_dir=Path(state_dir) if state_dir else None,
        notices=tuple(alias_notices + _check_keys(props, aliases, origin)),
        heartbeats=tuple(_heartbeats(props, aliases, clusters, origin)),
        raw=dict(props),
        metrics=metrics_settings(top),
        class_data_sharing=top.boolean("mirror.class.data.sharing", True),
        class_data_dir=Path(class_data_dir) if class_data_dir else None,
    )


def metrics_settings(values: Values) -> MetricsSettings | None:
    """The metrics endpoint, when ``mirror.metrics.port`` is set (off by default)."""
    if not values.text("mirror.metrics.port", ""):
        return None
    port = values.integer("mirror.metrics.port", 0, 1)
    if port > 65535:
        raise values.error("mirror.metrics.port", "expected a TCP port, 1 to 65535")
    return MetricsSettings(port, values.text("mirror.metrics.bind.address", "0.0.0.0"))


def _heartbeats(
    props: Mapping[str, str], aliases: list[str], clusters: Mapping[str, ClusterSpec],
    origin: str,
) -> list[HeartbeatSpec]:
    """MM2's pairs that emit heartbeats: every ordered pair whose (global, or pair's own)
    ``emit.heartbeats.enabled`` is true, whether or not the pair is enabled."""
    specs = []
    for source, target, values in _pairs(props, aliases, origin, frozenset()):
        if not values.boolean("emit.heartbeats.enabled", True):
            continue
        specs.append(
            HeartbeatSpec(
                source=clusters[source],
                target=clusters[target],
                interval=values.number("emit.heartbeats.interval.seconds", 1.0, 0.01),
                topic=make_policy(values, source, target).heartbeats_topic(),
                replication_factor=_replication_factor(
                    values, "heartbeats.topic.replication.factor"
                ),
            )
        )
    return specs


def _pairs(
    props: Mapping[str, str], aliases: list[str], origin: str, hidden: frozenset[str]
) -> list[tuple[str, str, _FlowValues]]:
    """Every ordered pair of clusters with its effective settings (``A->B.<key>`` over the top
    level); errors about pair-level keys name the key as written in the file."""
    out = []
    for source in aliases:
        for target in aliases:
            if source != target:
                prefix = f"{source}->{target}."
                scoped = _strip(props, prefix)
                values = _FlowValues(props, origin, prefix, scoped, hidden)
                out.append((source, target, values))
    return out


class _FlowValues(Values):
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
