"""MirrorMaker 2 ``mm2.properties`` to :class:`MirrorConfig`, read as MM2 reads it."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from kafka_mirror.config import keys
from kafka_mirror.config.model import ClusterSpec, FlowSpec, MirrorConfig
from kafka_mirror.config.properties import load_properties, parse_properties
from kafka_mirror.config.values import Values
from kafka_mirror.errors import ConfigError
from kafka_mirror.policy import (
    DEFAULT_POLICY_CLASS,
    POLICY_CLASSES,
    DefaultReplicationPolicy,
    IdentityReplicationPolicy,
    ReplicationPolicy,
)
from kafka_mirror.topic_filter import DEFAULT_TOPICS_EXCLUDE, TopicFilter

_FLOW_KEY = re.compile(r"(?P<source>[^.>\s]+)->(?P<target>[^.\s]+)\.(?P<key>.+)")
_ALIAS = re.compile(r"[A-Za-z0-9_\-]+")
ENGINE_KEYS = frozenset({"mirror.state.dir"})


def load_mm2(path: Path) -> MirrorConfig:
    return mm2_from_properties(load_properties(path), str(path))


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


def make_policy(values: Values, key_prefix: str = "") -> ReplicationPolicy:
    class_key = key_prefix + "replication.policy.class"
    kind = POLICY_CLASSES.get(values.text(class_key, DEFAULT_POLICY_CLASS))
    if kind is None:
        raise values.error(
            class_key,
            "unsupported replication policy; use DefaultReplicationPolicy or "
            "IdentityReplicationPolicy",
        )
    if kind == "identity":
        return IdentityReplicationPolicy()
    separator = values.props.get(key_prefix + "replication.policy.separator", ".")
    if not separator:
        raise values.error(key_prefix + "replication.policy.separator", "must not be empty")
    return DefaultReplicationPolicy(separator)


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
    replication_factor = values.integer("replication.factor", -1, minimum=-1)
    if replication_factor == 0:
        raise values.error("replication.factor", "must be -1 (broker default) or at least 1")
    exclude_cfg_key = (
        "config.properties.exclude"
        if "config.properties.exclude" in values.props
        else "config.properties.blacklist"
    )
    flow_id = f"{source.alias}_to_{target.alias}"
    return FlowSpec(
        source=source,
        target=target,
        topic_filter=topic_filter,
        policy=make_policy(values),
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
    )


def _check_keys(props: Mapping[str, str], aliases: list[str], origin: str) -> list[str]:
    """Notices for keys kafka-mirror does not know; nothing here is fatal."""
    notices: list[str] = []
    known = sorted(keys.FLOW_KEYS | ENGINE_KEYS | {"clusters"})
    for key in props:
        if key in ("clusters",) or key in ENGINE_KEYS or key.startswith("spark."):
            continue
        match = _FLOW_KEY.fullmatch(key)
        if match:
            rest = match["key"]
            if rest in keys.FLOW_KEYS or rest.startswith(keys.CLIENT_ROLES):
                continue
            if keys.is_accepted_mm2_key(rest) or rest.startswith(("source.", "target.")):
                continue
            notices.append(f"{origin}: unknown key '{key}' ignored{keys.suggestion(rest, known)}")
            continue
        head, _, rest = key.partition(".")
        if head in aliases and rest:
            if keys.is_client_key(rest) or rest.startswith(keys.CLIENT_ROLES):
                continue
            if keys.is_accepted_mm2_key(rest):
                continue
            notices.append(f"{origin}: unknown key '{key}' ignored")
            continue
        if key in keys.FLOW_KEYS or keys.is_client_key(key) or key.startswith(keys.CLIENT_ROLES):
            continue
        if keys.is_accepted_mm2_key(key):
            continue
        notices.append(f"{origin}: unknown key '{key}' ignored{keys.suggestion(key, known)}")
    return notices


def mm2_from_properties(props: Mapping[str, str], origin: str) -> MirrorConfig:
    top = Values(props, origin)
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
    for key in props:
        match = _FLOW_KEY.fullmatch(key)
        if not match:
            continue
        for side in ("source", "target"):
            if match[side] not in clusters:
                raise ConfigError(
                    f"flow names cluster '{match[side]}', which is not in clusters="
                    f"{','.join(aliases)}",
                    source=origin,
                    key=key,
                    value=props[key],
                )
        if match["source"] == match["target"]:
            raise ConfigError("a flow needs two different clusters", source=origin, key=key)
    for source in aliases:
        for target in aliases:
            if source == target:
                continue
            prefix = f"{source}->{target}."
            scoped = _strip(props, prefix)
            if not Values(scoped, origin).boolean("enabled", False):
                continue
            # errors about flow-level keys name the key as written in the file
            effective = _FlowValues({**props, **scoped}, origin, prefix, scoped)
            flows.append(
                flow_settings(
                    effective,
                    clusters[source],
                    clusters[target],
                    _strip(scoped, "consumer."),
                    _strip(scoped, "producer."),
                )
            )
    if not flows:
        raise ConfigError(
            "no replication flow is enabled; add e.g. "
            f"{aliases[0]}->{aliases[-1] if len(aliases) > 1 else 'B'}.enabled=true",
            source=origin,
        )
    state_dir = props.get("mirror.state.dir")
    return MirrorConfig(
        origin=origin,
        clusters=clusters,
        flows=tuple(flows),
        spark_conf={k: v for k, v in props.items() if k.startswith("spark.")},
        state_dir=Path(state_dir) if state_dir else None,
        notices=tuple(_check_keys(props, aliases, origin)),
    )


class _FlowValues(Values):
    """Values of one flow: errors name ``A->B.key`` when the flow set that key."""

    def __init__(
        self, props: Mapping[str, str], source: str, prefix: str, scoped: Mapping[str, str]
    ) -> None:
        super().__init__(props, source)
        self.prefix = prefix
        self.scoped = scoped

    def error(self, key: str, message: str) -> ConfigError:
        shown = self.prefix + key if key in self.scoped else key
        return ConfigError(message, source=self.source, key=shown, value=self.props.get(key))
