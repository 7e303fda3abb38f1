"""Which configuration keys kafka-mirror knows, so that the rest can be reported."""

from __future__ import annotations

import difflib
import re

# a flow's own key: ``A->B.<key>``
FLOW_KEY = re.compile(r"(?P<source>[^.>\s]+)->(?P<target>[^.\s]+)\.(?P<key>.+)")

# Settings of a replication flow: top level, or per flow as ``A->B.<key>``.
FLOW_KEYS = frozenset(
    {
        "enabled",
        "topics",
        "topics.exclude",
        "topics.blacklist",
        "replication.policy.class",
        "replication.policy.separator",
        "replication.policy.internal.topic.separator.enabled",
        "replication.factor",
        "sync.topic.configs.enabled",
        "sync.topic.configs.interval.seconds",
        "refresh.topics.enabled",
        "refresh.topics.interval.seconds",
        "config.properties.exclude",
        "config.properties.blacklist",
        "groups",
        "groups.exclude",
        "groups.blacklist",
        "refresh.groups.enabled",
        "refresh.groups.interval.seconds",
        "emit.offset-syncs.enabled",
        "offset.lag.max",
        "offset-syncs.topic.location",
        "offset-syncs.topic.replication.factor",
        "emit.checkpoints.enabled",
        "emit.checkpoints.interval.seconds",
        "checkpoints.topic.replication.factor",
        "sync.group.offsets.enabled",
        "sync.group.offsets.interval.seconds",
        "emit.heartbeats.enabled",
        "emit.heartbeats.interval.seconds",
        "heartbeats.topic.replication.factor",
        "heartbeats.replication.enabled",
        "sync.topic.acls.enabled",
        "sync.topic.acls.interval.seconds",
        # MirrorMaker 2's Connect offsets topic: where kafka-mirror keeps a flow's positions
        # (mirror.positions.in.kafka) and reads a running MirrorMaker 2's to take over from it;
        # its replication factor and partitions when kafka-mirror creates it
        "offset.storage.topic",
        "offset.storage.replication.factor",
        "offset.storage.partitions",
        # kafka-mirror's own engine settings
        "mirror.max.records.per.batch",
        "mirror.trigger.interval.ms",
        "mirror.fail.on.data.loss",
        "mirror.topic.state.retention.ms",
        "mirror.starting.offsets",
        "mirror.lag.group.id",
        "mirror.lag.commit.interval.ms",
        "mirror.takeover.mm2",
        "mirror.positions.in.kafka",
        "mirror.positions.in.kafka.interval.ms",
        "mirror.lease.ms",
        "mirror.exactly.once.target",
        "mirror.mode",
        "mirror.realtime.batch.duration.ms",
        "mirror.realtime.groups",
        # Connect's exactly-once switches: honoured without target transactions (see
        # config.mm2.exactly_once_target)
        "exactly.once.source.support",
        "exactly.once.support",
    }
)

# MirrorMaker 2 / Connect settings kafka-mirror reads but does not act on, with the reason it
# reports (at start and in check-config): nothing is accepted and dropped quietly.
NOT_SUPPORTED: dict[str, str] = {
    "tasks.max": "Spark runs one task per partition and batch; scale with --spark-master or "
    "local[N]",
    "config.storage.": "kafka-mirror keeps no Connect worker configs (its flows come from this "
    "file)",
    "status.storage.": "kafka-mirror keeps no Connect worker status topic (its status is the "
    "metrics endpoint's /status)",
    "offset.storage.": "kafka-mirror reads offset.storage.topic, .replication.factor and "
    ".partitions only",
    "offset.flush.": "Spark commits positions after every micro-batch",
    "dedicated.mode.": "kafka-mirror has no Connect REST server",
    "listeners": "kafka-mirror has no Connect REST server",
    "rest.": "kafka-mirror has no Connect REST server",
    "forwarding.": "kafka-mirror has no Connect REST server",
    "key.converter": "records are copied as bytes",
    "value.converter": "records are copied as bytes",
    "header.converter": "records are copied as bytes",
    "admin.timeout.ms": "admin calls use the client's request.timeout.ms",
    "consumer.poll.timeout.ms": "Spark polls the source",
    "topic.filter.class": "custom Java filter classes cannot run here; use topics and "
    "topics.exclude",
    "group.filter.class": "custom Java filter classes cannot run here; use groups and "
    "groups.exclude",
    "config.property.filter.class": "custom Java filter classes cannot run here; use "
    "config.properties.exclude",
    "use.incremental.alter.configs": "topic configs are always synced with incremental alter "
    "(the key was removed in Kafka 4.0)",
    "source.cluster.alias": "cluster aliases come from 'clusters' and the A->B flow names",
    "target.cluster.alias": "cluster aliases come from 'clusters' and the A->B flow names",
}


def not_supported(key: str) -> str | None:
    """Why kafka-mirror does not act on ``key`` (a flow-level key name), or None."""
    for prefix, why in NOT_SUPPORTED.items():
        if key == prefix or (prefix.endswith(".") and key.startswith(prefix)):
            if key in FLOW_KEYS:
                return None
            return why
    return None


# Client settings shared by every client of a cluster (MirrorClientConfig in MM2).
CLIENT_KEY_PREFIXES = (
    "bootstrap.servers",
    "security.protocol",
    "ssl.",
    "sasl.",
    "client.dns.lookup",
    "client.id",
    "request.timeout.ms",
    "retry.backoff.",
    "reconnect.backoff.",
    "connections.max.idle.ms",
    "metadata.max.age.ms",
    "socket.connection.setup.timeout.",
    "receive.buffer.bytes",
    "send.buffer.bytes",
    "security.providers",
)

CLIENT_ROLES = ("consumer.", "producer.", "admin.")


def matches(key: str, prefixes: tuple[str, ...]) -> bool:
    return any(key == p or (p.endswith(".") and key.startswith(p)) for p in prefixes)


def is_client_key(key: str) -> bool:
    return matches(key, CLIENT_KEY_PREFIXES)


def suggestion(key: str, known: list[str]) -> str:
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.8)
    return f" (did you mean '{close[0]}'?)" if close else ""
