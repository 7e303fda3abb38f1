"""Which configuration keys kafka-mirror knows, so that the rest can be reported."""

from __future__ import annotations

import difflib

# Settings of a replication flow: top level, or per flow as ``A->B.<key>``.
FLOW_KEYS = frozenset(
    {
        "enabled",
        "topics",
        "topics.exclude",
        "topics.blacklist",
        "replication.policy.class",
        "replication.policy.separator",
        "replication.factor",
        "sync.topic.configs.enabled",
        "refresh.topics.enabled",
        "refresh.topics.interval.seconds",
        "config.properties.exclude",
        "config.properties.blacklist",
        # kafka-mirror's own engine settings
        "mirror.max.records.per.batch",
        "mirror.trigger.interval.ms",
        "mirror.fail.on.data.loss",
        "mirror.starting.offsets",
        "mirror.lag.group.id",
        "mirror.lag.commit.interval.ms",
    }
)

# MirrorMaker 2 / Connect settings read without error; they act in later kafka-mirror releases
# or have no meaning on Spark (Connect worker storage, task counts, converters).
ACCEPTED_MM2_PREFIXES = (
    "groups",
    "groups.exclude",
    "groups.blacklist",
    "emit.checkpoints.",
    "emit.heartbeats.",
    "emit.offset-syncs.",
    "sync.group.offsets.",
    "sync.topic.acls.",
    "refresh.groups.",
    "offset-syncs.",
    "checkpoints.topic.",
    "heartbeats.topic.",
    "tasks.max",
    "offset.lag.max",
    "config.storage.",
    "offset.storage.",
    "status.storage.",
    "exactly.once.",
    "dedicated.mode.",
    "key.converter",
    "value.converter",
    "header.converter",
    "admin.timeout.ms",
    "consumer.poll.timeout.ms",
    "replication.policy.internal.topic.separator.enabled",
    "topic.filter.class",
    "group.filter.class",
    "config.property.filter.class",
    "config.providers",
    "offset.flush.",
    "listeners",
    "rest.",
    "forwarding.",
    "use.incremental.alter.configs",
)

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


def is_accepted_mm2_key(key: str) -> bool:
    return any(key == p or key.startswith(p if p.endswith(".") else p + ".")
               for p in ACCEPTED_MM2_PREFIXES)


def suggestion(key: str, known: list[str]) -> str:
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.8)
    return f" (did you mean '{close[0]}'?)" if close else ""
