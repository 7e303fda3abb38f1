"""MirrorMaker 2 ``mm2.properties`` to :class:`MirrorConfig`, read as MM2 reads it."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from kafka_mirror.config import keys
from kafka_mirror.config.flows import (
    client_part,
    flow_settings,
    make_policy,
    pairs,
    replication_factor,
    strip_prefix,
)
from kafka_mirror.config.key_notices import key_notices
from kafka_mirror.config.loops import refuse_identity_loops
from kafka_mirror.config.model import (
    ClusterSpec,
    FlowSpec,
    HeartbeatSpec,
    MetricsBasicAuth,
    MetricsSettings,
    MetricsTls,
    MirrorConfig,
)
from kafka_mirror.config.properties import parse_properties, read_properties_file
from kafka_mirror.config.providers import resolve_providers
from kafka_mirror.config.values import Values
from kafka_mirror.errors import ConfigError
from kafka_mirror.mm2.offsets_records import DEFAULT_OFFSETS_PARTITIONS, mm2_offsets_key

_ALIAS = re.compile(r"[A-Za-z0-9_\-]+")


def load_mm2(path: Path) -> MirrorConfig:
    read = read_properties_file(path)
    config = mm2_from_properties(read.values, str(path))
    return replace(config, notices=tuple(read.notes) + config.notices)


def mm2_from_text(text: str, origin: str = "<string>") -> MirrorConfig:
    return mm2_from_properties(parse_properties(text, origin), origin)


def _cluster(alias: str, top: Mapping[str, str], origin: str) -> ClusterSpec:
    scoped = strip_prefix(top, alias + ".")
    client = client_part(top) | client_part(scoped)
    if not client.get("bootstrap.servers", "").strip():
        raise ConfigError(
            f"cluster '{alias}' has no bootstrap servers",
            source=origin,
            key=f"{alias}.bootstrap.servers",
        )
    return ClusterSpec(
        alias=alias,
        client=client,
        consumer=strip_prefix(top, "consumer.") | strip_prefix(scoped, "consumer."),
        producer=strip_prefix(top, "producer.") | strip_prefix(scoped, "producer."),
        admin=strip_prefix(top, "admin.") | strip_prefix(scoped, "admin."),
    )


def mm2_from_properties(raw: Mapping[str, str], origin: str) -> MirrorConfig:
    props, hidden = resolve_providers(raw, origin)
    top = Values(props, origin, hidden)
    aliases = _aliases(top, origin)
    clusters = {alias: _cluster(alias, props, origin) for alias in aliases}
    alias_notices = _pair_notices(props, aliases, origin)
    flows = _enabled_flows(props, aliases, clusters, origin, hidden)
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
        notices=tuple(alias_notices + key_notices(props, aliases, origin)),
        heartbeats=tuple(_heartbeats(props, aliases, clusters, origin)),
        raw=dict(props),
        metrics=metrics_settings(top),
        class_data_sharing=top.boolean("mirror.class.data.sharing", True),
        class_data_dir=Path(class_data_dir) if class_data_dir else None,
    )


def _aliases(top: Values, origin: str) -> list[str]:
    """The cluster aliases ``clusters`` names: at least one, each valid, none twice."""
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
    return aliases


def _pair_notices(props: Mapping[str, str], aliases: list[str], origin: str) -> list[str]:
    """Notices for pair keys naming a cluster outside ``clusters`` (ignored, as MM2 ignores
    them) and for an empty separator; a pair of one cluster with itself is an error."""
    notices: list[str] = []
    for key in props:
        match = keys.FLOW_KEY.fullmatch(key)
        if not match:
            continue
        unknown = [match[side] for side in ("source", "target") if match[side] not in aliases]
        if unknown:
            # MM2 ignores keys of pairs outside `clusters`; say so (a typo loses a whole flow)
            notices.append(
                f"{origin}: '{key}' names cluster '{unknown[0]}', which is not in clusters="
                f"{','.join(aliases)}: ignored, as MirrorMaker 2 does"
            )
            continue
        if match["source"] == match["target"]:
            raise ConfigError("a flow needs two different clusters", source=origin, key=key)
    for key, value in props.items():
        if key.endswith("replication.policy.separator") and value == "":
            notices.append(
                f"{origin}: '{key}' is empty: applied as MirrorMaker 2 applies it, so 'orders' "
                "from A becomes 'Aorders' and every topic of 2+ characters looks remote (its "
                "first character taken for a cluster alias); to keep names, use "
                "replication.policy.class = IdentityReplicationPolicy"
            )
    return notices


def _enabled_flows(
    props: Mapping[str, str], aliases: list[str], clusters: Mapping[str, ClusterSpec],
    origin: str, hidden: frozenset[str],
) -> list[FlowSpec]:
    """Every pair whose ``enabled`` holds, with its effective settings."""
    flows: list[FlowSpec] = []
    for source, target, effective in pairs(props, aliases, origin, hidden):
        if not Values(effective.scoped, origin).boolean("enabled", False):
            continue
        flow = flow_settings(
            effective,
            clusters[source],
            clusters[target],
            strip_prefix(effective.scoped, "consumer."),
            strip_prefix(effective.scoped, "producer."),
        )
        replicas, partitions = _offsets_topic_layout(props, target, origin)
        flows.append(replace(flow, positions_replication_factor=replicas,
                             positions_partitions=partitions))
    return flows


def _offsets_topic_layout(props: Mapping[str, str], target: str, origin: str) -> tuple[int, int]:
    """The replication factor and partitions of the flow's offsets topic (where kafka-mirror keeps
    its positions) when kafka-mirror creates it: MirrorMaker 2's worker settings
    ``offset.storage.replication.factor`` and ``offset.storage.partitions`` (top-level, then
    ``<target>.``); -1 (the broker's default) and Connect's 25 when unset."""
    values = Values(props, origin)
    rf_key = mm2_offsets_key(props, target, "replication.factor")
    partitions_key = mm2_offsets_key(props, target, "partitions")
    return (
        replication_factor(values, rf_key) if rf_key else -1,
        (values.integer(partitions_key, DEFAULT_OFFSETS_PARTITIONS, 1) if partitions_key
         else DEFAULT_OFFSETS_PARTITIONS),
    )


def metrics_settings(values: Values) -> MetricsSettings | None:
    """The metrics endpoint, when ``mirror.metrics.port`` is set (off by default)."""
    if not values.text("mirror.metrics.port", ""):
        return None
    port = values.integer("mirror.metrics.port", 0, 1)
    if port > 65535:
        raise values.error("mirror.metrics.port", "expected a TCP port, 1 to 65535")
    return MetricsSettings(port, values.text("mirror.metrics.bind.address", "0.0.0.0"),
                           _metrics_basic_auth(values), _metrics_tls(values))


# the JMX exporter's algorithms (its httpServer.authentication.basic.algorithm)
METRICS_AUTH_DIGESTS = ("SHA-1", "SHA-256", "SHA-512")
METRICS_AUTH_PBKDF2 = ("PBKDF2WithHmacSHA1", "PBKDF2WithHmacSHA256", "PBKDF2WithHmacSHA512")
_AUTH = "mirror.metrics.basic.auth."
_TLS = "mirror.metrics.ssl."


def _switched_on(values: Values, prefix: str, switch: str, what: str) -> bool:
    """Whether ``prefix + switch`` is set; another key of ``prefix`` without it is an error
    naming that key (not its value: it may be a secret)."""
    if values.text(prefix + switch, ""):
        return True
    given = sorted(k for k in values.props if k.startswith(prefix))
    if given:
        raise ConfigError(f"needs {prefix}{switch} ({what} is off without it)",
                          source=values.source, key=given[0])
    return False


def _metrics_basic_auth(values: Values) -> MetricsBasicAuth | None:
    """``mirror.metrics.basic.auth.*``: on when the user name is set."""
    username = values.text(_AUTH + "username", "")
    if not _switched_on(values, _AUTH, "username", "basic authentication"):
        return None
    password_hash = values.text(_AUTH + "password.hash", "").lower()
    if not password_hash:
        raise values.error(_AUTH + "username", f"needs {_AUTH}password.hash (the hex hash of "
                                               "the password, never the password)")
    if not re.fullmatch(r"[0-9a-f]+", password_hash):
        raise values.error(_AUTH + "password.hash", "expected hexadecimal digits")
    algorithm = values.text(_AUTH + "algorithm", "SHA-256")
    if algorithm not in METRICS_AUTH_DIGESTS + METRICS_AUTH_PBKDF2:
        raise values.error(_AUTH + "algorithm", "expected one of "
                           + ", ".join(METRICS_AUTH_DIGESTS + METRICS_AUTH_PBKDF2))
    iterations = 0
    if algorithm in METRICS_AUTH_PBKDF2:
        if _AUTH + "iterations" not in values.props:
            raise values.error(_AUTH + "algorithm", f"{algorithm} needs {_AUTH}iterations")
        iterations = values.integer(_AUTH + "iterations", 0, 1)
    key_length = values.integer(_AUTH + "key.length", 128, 8)
    if key_length % 8:
        raise values.error(_AUTH + "key.length", "expected a number of bits divisible by 8")
    salt = values.props.get(_AUTH + "salt", "")
    return MetricsBasicAuth(username, password_hash, salt, algorithm, iterations, key_length)


def _metrics_tls(values: Values) -> MetricsTls | None:
    """``mirror.metrics.ssl.*``: HTTPS when a key store is given."""
    location = values.text(_TLS + "keystore.location", "")
    if not _switched_on(values, _TLS, "keystore.location", "HTTPS"):
        return None
    kind = values.text(_TLS + "keystore.type", "JKS").upper()
    if kind not in ("JKS", "PKCS12", "PEM"):
        raise values.error(_TLS + "keystore.type", "expected JKS, PKCS12 or PEM")
    return MetricsTls(location, kind, values.props.get(_TLS + "keystore.password", ""),
                      values.props.get(_TLS + "key.password"))


def _heartbeats(
    props: Mapping[str, str], aliases: list[str], clusters: Mapping[str, ClusterSpec],
    origin: str,
) -> list[HeartbeatSpec]:
    """MM2's pairs that emit heartbeats: every ordered pair whose (global, or pair's own)
    ``emit.heartbeats.enabled`` is true, whether or not the pair is enabled."""
    specs = []
    for source, target, values in pairs(props, aliases, origin, frozenset()):
        if not values.boolean("emit.heartbeats.enabled", True):
            continue
        specs.append(
            HeartbeatSpec(
                source=clusters[source],
                target=clusters[target],
                interval=values.number("emit.heartbeats.interval.seconds", 1.0, 0.01),
                topic=make_policy(values, source, target).heartbeats_topic(),
                replication_factor=replication_factor(
                    values, "heartbeats.topic.replication.factor"
                ),
            )
        )
    return specs


