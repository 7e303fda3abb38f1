"""Stock MirrorMaker 2's source positions: read them (take over) and write them (hand back).

MM2 in dedicated mode runs one Kafka Connect worker group per replication flow ``A->B``, on the
TARGET cluster B. Its MirrorSourceConnector keeps, per upstream partition, the offset of the
last record it copied in the worker's offsets topic (by default ``mm2-offsets.A.internal`` on B),
and on start seeks to that offset + 1. Facts from Apache Kafka 4.3.1's sources:

- Topic name (``MirrorMakerConfig.workerConfig``): the target cluster's ``B.*`` properties
  first, then every top-level ``offset.storage*`` property on top of them (so a top-level
  ``offset.storage.topic`` wins over ``B.offset.storage.topic`` for every pair), then the default
  ``mm2-offsets.<source>.internal``. The worker group is ``B.group.id``, else ``<source>-mm2``.
- Records (``OffsetStorageWriter``, ``KafkaOffsetBackingStore``): key and value written by the
  worker's internal ``JsonConverter`` (schemas off, compact Jackson output). Key
  ``["MirrorSourceConnector",{"cluster":"A","partition":0,"topic":"orders"}]`` -- field order
  is that of the ``HashMap`` ``MirrorUtils.wrapPartition`` fills (cluster, partition, topic for
  these three names, whatever the values); value ``{"offset":41}``; a null value deletes the
  key. The reader keeps the last value per key bytes over all partitions, and MM2 looks its
  partitions up by exact key bytes (``OffsetStorageReaderImpl``).
- Placement: the worker's producer uses Kafka's default partitioner,
  ``toPositive(murmur2(keyBytes)) % partitions`` (``BuiltInPartitioner.partitionForKey``); so an
  overriding record must land in the same partition as the record it replaces.
- Resume (``MirrorSourceTask.initializeConsumer``): stored offset + 1; a missing or negative
  offset means "no position" and the consumer's ``auto.offset.reset`` (``earliest`` unless
  overridden) applies.

Positions here are always "next offset to read" (as everywhere in kafka-mirror): reading adds 1
to what MM2 stored, writing subtracts 1.

Not handled: exactly-once source support with a connector-specific ``offsets.storage.topic``
(Connect then reads that topic first), config-provider references (``${...}``) in the topic
name, and a ``partitioner.class`` override in the target cluster's worker properties.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Mapping
from typing import Any, TypeGuard

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from kafka_mirror.config.model import ClusterSpec
from kafka_mirror.errors import ConfigError, MirrorError
from kafka_mirror.kafka.admin import ClusterAdmin
from kafka_mirror.kafka.clients import admin_properties, librdkafka_config

__all__ = [
    "DEFAULT_OFFSETS_PARTITIONS",
    "MM2_SOURCE_CONNECTOR",
    "mm2_offsets_topic",
    "mm2_source_key",
    "mm2_source_value",
    "mm2_worker_group",
    "read_mm2_positions",
    "write_mm2_positions",
]

log = logging.getLogger(__name__)

# Dedicated mode names each connector after its class's simple name (MirrorHerder).
MM2_SOURCE_CONNECTOR = "MirrorSourceConnector"
# DistributedConfig: offset.storage.partitions default
DEFAULT_OFFSETS_PARTITIONS = 25

_JAVA_INT_MAX = 2**31 - 1
_JAVA_LONG_MAX = 2**63 - 1
_SHORT_ESCAPES = {0x08: "\\b", 0x09: "\\t", 0x0A: "\\n", 0x0C: "\\f", 0x0D: "\\r"}


# ------------------------------------------------------------------ names


def _setting(props: Mapping[str, str], key: str) -> str | None:
    value = props.get(key)
    if value is None:
        return None
    value = value.strip()  # ConfigDef trims STRING values
    if not value:
        # KafkaOffsetBackingStore: "Offset storage topic must be specified"
        raise ConfigError("MirrorMaker 2 refuses an empty value here", key=key, value="")
    if "${" in value:
        raise ConfigError(
            "config-provider references are not resolved here; pass the topic name itself",
            key=key,
            value=value,
        )
    return value


def mm2_offsets_topic(props: Mapping[str, str], source_alias: str, target_alias: str) -> str:
    """The Connect offsets topic MM2 dedicated mode uses for ``source->target`` (on the target).

    Precedence as in ``MirrorMakerConfig.workerConfig``: top-level ``offset.storage.topic``
    (applies to every pair), then ``<target>.offset.storage.topic``, then
    ``mm2-offsets.<source>.internal``. ``<source>-><target>.offset.storage.topic`` is not read.
    """
    for key in ("offset.storage.topic", f"{target_alias}.offset.storage.topic"):
        value = _setting(props, key)
        if value is not None:
            return value
    return f"mm2-offsets.{source_alias}.internal"


def mm2_worker_group(props: Mapping[str, str], source_alias: str, target_alias: str) -> str:
    """The Connect worker group of the ``source->target`` herder (on the target cluster):
    ``<target>.group.id``, else ``<source>-mm2`` (a top-level ``group.id`` is not read)."""
    value = props.get(f"{target_alias}.group.id", "").strip()
    return value or f"{source_alias}-mm2"


# ------------------------------------------------------------------ record format


def _json_string(text: str) -> str:
    """``text`` as a JSON string the way Kafka 4.3.1's Jackson (2.21) writes it to UTF-8:
    ``"`` and ``\\`` escaped, control characters as ``\\b \\t \\n \\f \\r`` or ``\\u00XX``,
    characters beyond the BMP as an escaped surrogate pair, hex in upper case, all other
    characters (also non-ASCII, DEL, U+2028) as they are."""
    out = ['"']
    for char in text:
        code = ord(char)
        if char == '"':
            out.append('\\"')
        elif char == "\\":
            out.append("\\\\")
        elif code < 0x20:
            out.append(_SHORT_ESCAPES.get(code, f"\\u{code:04X}"))
        elif 0xD800 <= code <= 0xDFFF:
            raise ValueError(f"lone surrogate U+{code:04X} cannot be written as UTF-8")
        elif code > 0xFFFF:
            high = 0xD800 + ((code - 0x10000) >> 10)
            low = 0xDC00 + ((code - 0x10000) & 0x3FF)
            out.append(f"\\u{high:04X}\\u{low:04X}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def mm2_source_key(source_alias: str, topic: str, partition: int) -> bytes:
    """The offsets-topic key MM2's worker writes, and looks up, for one upstream partition."""
    if not 0 <= partition <= _JAVA_INT_MAX:
        raise ValueError(f"partition {partition} out of range")
    text = (
        f"[{_json_string(MM2_SOURCE_CONNECTOR)},{{\"cluster\":{_json_string(source_alias)},"
        f"\"partition\":{partition},\"topic\":{_json_string(topic)}}}]"
    )
    return text.encode("utf-8")


def mm2_source_value(next_offset: int) -> bytes:
    """The offsets-topic value for a position ("next offset to read" ``next_offset`` >= 1):
    MM2 stores the offset of the last copied record."""
    if not 1 <= next_offset <= _JAVA_LONG_MAX:
        raise ValueError(f"position {next_offset} out of range (1 .. 2^63-1)")
    return b'{"offset":%d}' % (next_offset - 1)


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _parse_source_key(key: bytes | None) -> tuple[str, str, str, int] | None:
    """``(connector, cluster, topic, partition)`` of a MirrorSourceConnector key; ``("", ...)``
    for a well-formed key of another connector; None when the key has no known shape."""
    if key is None:
        return None
    try:
        parsed = json.loads(key.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    if (
        not isinstance(parsed, list)
        or len(parsed) != 2
        or not isinstance(parsed[0], str)
        or not isinstance(parsed[1], dict)
    ):
        return None
    connector, partition_map = parsed
    if connector != MM2_SOURCE_CONNECTOR:
        return ("", "", "", 0)
    cluster = partition_map.get("cluster")
    topic = partition_map.get("topic")
    partition = partition_map.get("partition")
    if not (isinstance(cluster, str) and isinstance(topic, str) and _is_int(partition)):
        return None
    if not 0 <= partition <= _JAVA_INT_MAX:
        return None
    return connector, cluster, topic, partition


def _parse_stored_offset(value: bytes) -> int | None:
    try:
        parsed = json.loads(value.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(parsed, dict):
        return None
    offset = parsed.get("offset")
    if not _is_int(offset) or not -(2**63) <= offset <= _JAVA_LONG_MAX:
        return None
    return int(offset)


# ------------------------------------------------------------------ clients


def _client_config(cluster: ClusterSpec) -> dict[str, Any]:
    conf: dict[str, Any] = librdkafka_config(
        admin_properties(cluster), f"cluster '{cluster.alias}'"
    )
    return conf


def _ready_admin(cluster: ClusterSpec, timeout: float) -> ClusterAdmin:
    """A ClusterAdmin that answered (it also does a keytab login when the config has one)."""
    admin = ClusterAdmin(cluster)
    admin.wait_ready(timeout)
    return admin


def _partition_count(admin: ClusterAdmin, topic: str, timeout: float) -> int | None:
    # A full listing: a metadata request naming the topic could auto-create it.
    return admin.topic_partitions(timeout).get(topic)


# ------------------------------------------------------------------ read


def read_mm2_positions(
    cluster: ClusterSpec, topic: str, source_alias: str, timeout: float = 30.0
) -> dict[tuple[str, int], int]:
    """MM2's source positions for flow ``source_alias->cluster`` from its offsets ``topic``.

    Reads every partition of ``topic`` on ``cluster`` (the flow's TARGET) to its end, keeps the
    last value per key (a null value deletes it) and returns ``{(upstream topic, partition):
    next offset to read}`` (stored + 1) for the MirrorSourceConnector keys of ``source_alias``.
    A missing topic gives ``{}``. Records of no known shape, keys MM2 would not look up (not
    byte-identical to what it writes) and unreadable values are skipped with a warning; stored
    negative offsets mean "no position" to MM2 and are left out.
    """
    deadline = time.monotonic() + timeout
    admin = _ready_admin(cluster, timeout)
    partitions = _partition_count(admin, topic, max(1.0, deadline - time.monotonic()))
    if partitions is None:
        return {}
    latest = _read_compacted(cluster, topic, partitions, deadline, timeout)

    positions: dict[tuple[str, int], int] = {}
    for key, (value, partition, offset) in latest.items():
        where = f"{topic} partition {partition} offset {offset}"
        parsed = _parse_source_key(key)
        if parsed is None:
            log.warning(
                "%s: skipped: key is not a Connect offsets key "
                '["<connector>",{...}] of a known shape: %r', where, key,
            )
            continue
        connector, alias, upstream, upstream_partition = parsed
        if connector != MM2_SOURCE_CONNECTOR or alias != source_alias:
            continue
        if key != mm2_source_key(alias, upstream, upstream_partition):
            log.warning(
                "%s: skipped: key %r is not byte-identical to the one MM2 writes and looks up "
                "(%r); MM2 ignores it",
                where, key, mm2_source_key(alias, upstream, upstream_partition),
            )
            continue
        stored = _parse_stored_offset(value)
        if stored is None:
            log.warning('%s: skipped: value is not {"offset":<integer>}: %r', where, value)
            continue
        if stored < 0:
            continue  # MM2: no position (auto.offset.reset applies)
        positions[(upstream, upstream_partition)] = stored + 1
    return positions


def _read_compacted(
    cluster: ClusterSpec, topic: str, partitions: int, deadline: float, timeout: float
) -> dict[bytes | None, tuple[bytes, int, int]]:
    """Last non-null value per key bytes over all partitions: ``{key: (value, partition,
    offset)}``. Reads committed data only (what Connect's exactly-once reader sees; the same as
    everything when no transactions are used)."""
    conf = _client_config(cluster) | {
        "group.id": f"kafka-mirror-mm2-positions-{uuid.uuid4().hex}",  # never joined/committed
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "earliest",
        "isolation.level": "read_committed",
        "allow.auto.create.topics": False,
    }
    consumer = Consumer(conf)
    latest: dict[bytes | None, tuple[bytes, int, int]] = {}
    try:
        pending: set[int] = set()
        ends: dict[int, int] = {}
        for partition in range(partitions):
            low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, partition),
                timeout=max(1.0, deadline - time.monotonic()),
                cached=False,
            )
            if high > low:
                pending.add(partition)
                ends[partition] = high
        consumer.assign(
            [TopicPartition(topic, p, offset=-2) for p in sorted(pending)]  # OFFSET_BEGINNING
        )
        while pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise MirrorError(
                    f"cluster '{cluster.alias}': reading MM2's offsets topic {topic} did not "
                    f"reach the end of partitions {sorted(pending)} within {timeout:.0f}s"
                )
            for msg in consumer.consume(num_messages=10_000, timeout=min(1.0, remaining)):
                error = msg.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        pending.discard(msg.partition())
                        continue
                    raise MirrorError(
                        f"cluster '{cluster.alias}': reading MM2's offsets topic {topic} "
                        f"failed: {error.str()}"
                    )
                key, value = msg.key(), msg.value()
                part, offset = msg.partition(), msg.offset()
                if part is None or offset is None:
                    continue
                if value is None:
                    latest.pop(key, None)
                else:
                    latest[key] = (value, part, offset)
                if offset >= ends[part] - 1:
                    pending.discard(part)
    finally:
        consumer.close()
    return latest


# ------------------------------------------------------------------ write


_COORDINATOR_BUSY = frozenset(
    {
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
    }
)


def _group_members_once(admin: ClusterAdmin, group: str, timeout: float) -> int:
    return admin.group_state(group, timeout)[1]


def _active_members(admin: ClusterAdmin, group: str, deadline: float) -> int:
    """Members of ``group`` (0 when it does not exist or is empty)."""
    while True:
        try:
            return _group_members_once(admin, group, max(1.0, deadline - time.monotonic()))
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            busy = isinstance(error, KafkaError) and error.code() in _COORDINATOR_BUSY
            if busy and time.monotonic() < deadline:
                time.sleep(0.5)
                continue
            reason = error.str() if isinstance(error, KafkaError) else str(exc)
            raise MirrorError(
                f"cluster '{admin.cluster.alias}': cannot tell whether MirrorMaker 2 is running "
                f"(describing its Connect worker group '{group}' failed: {reason})"
            ) from exc


def _ensure_topic(
    admin: ClusterAdmin, topic: str, partitions: int, replication_factor: int, deadline: float
) -> int:
    """The partition count of ``topic``, created first as Connect would when absent."""
    existing = _partition_count(admin, topic, max(1.0, deadline - time.monotonic()))
    if existing is not None:
        return existing
    new = NewTopic(
        topic,
        num_partitions=partitions,
        replication_factor=replication_factor,
        config={"cleanup.policy": "compact"},
    )
    futures = admin.client.create_topics(
        [new], operation_timeout=max(1.0, deadline - time.monotonic())
    )
    try:
        futures[topic].result()
    except KafkaException as exc:
        error = exc.args[0] if exc.args else None
        if not (isinstance(error, KafkaError) and error.code() == KafkaError.TOPIC_ALREADY_EXISTS):
            reason = error.str() if isinstance(error, KafkaError) else str(exc)
            raise MirrorError(
                f"cluster '{admin.cluster.alias}': cannot create MM2's offsets topic {topic}: "
                f"{reason}"
            ) from exc
    while time.monotonic() < deadline:
        count = _partition_count(admin, topic, max(1.0, deadline - time.monotonic()))
        if count is not None:
            return count
        time.sleep(0.2)
    raise MirrorError(
        f"cluster '{admin.cluster.alias}': MM2's offsets topic {topic} was created but does not "
        "show up in the metadata"
    )


def write_mm2_positions(
    cluster: ClusterSpec,
    topic: str,
    source_alias: str,
    positions: Mapping[tuple[str, int], int],
    partitions: int = DEFAULT_OFFSETS_PARTITIONS,
    replication_factor: int = -1,
    *,
    worker_group: str | None = None,
    timeout: float = 30.0,
) -> int:
    """Store ``positions`` ({(upstream topic, partition): next offset to read}) as MM2's source
    positions for flow ``source_alias->cluster``, so a (re)started MM2 continues from them.

    Each record is what MM2's worker writes itself: key byte-identical to its own, value
    ``{"offset": next - 1}``, in the partition Kafka's default partitioner picks, so it replaces
    any position MM2 stored earlier. A position of 0 (nothing copied yet) is written as a
    tombstone, which removes any older stored position: MM2 then starts from its
    ``auto.offset.reset`` (``earliest``). ``topic`` is created when absent as Connect would
    (compacted, ``partitions`` partitions, ``replication_factor``, -1 = broker default).

    Refuses (:class:`MirrorError`) while the flow's Connect worker group (``worker_group``,
    default ``<source_alias>-mm2``) on ``cluster`` has members, i.e. while MM2 runs: it would
    overwrite these positions at its next flush. Returns the number of records written.
    """
    records: list[tuple[bytes, bytes | None]] = []
    for (upstream, upstream_partition), position in sorted(positions.items()):
        if not _is_int(position) or position < 0:
            raise ValueError(f"position {position!r} of {upstream}-{upstream_partition}")
        key = mm2_source_key(source_alias, upstream, upstream_partition)
        records.append((key, mm2_source_value(position) if position > 0 else None))
    if partitions < 1:
        raise ValueError(f"partitions must be >= 1, not {partitions}")

    deadline = time.monotonic() + timeout
    admin = _ready_admin(cluster, timeout)
    group = worker_group or f"{source_alias}-mm2"
    members = _active_members(admin, group, deadline)
    if members:
        raise MirrorError(
            f"cluster '{cluster.alias}': MirrorMaker 2 is still running for flow "
            f"{source_alias}->{cluster.alias} (its Connect worker group '{group}' has "
            f"{members} active member(s)); stop it before writing its source positions"
        )
    if not records:
        return 0
    _ensure_topic(admin, topic, partitions, replication_factor, deadline)

    conf = _client_config(cluster) | {
        "partitioner": "murmur2_random",  # Java's default partitioner for non-null keys
        "acks": "all",
        "allow.auto.create.topics": False,
        "linger.ms": 5,
    }
    producer = Producer(conf)
    failures: list[str] = []

    def on_delivery(error: KafkaError | None, msg: Any) -> None:
        if error is not None:
            failures.append(f"{msg.key()!r}: {error.str()}")

    for key, value in records:
        while True:
            try:
                producer.produce(topic, value=value, key=key, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.1)
    left = producer.flush(max(1.0, deadline - time.monotonic()))
    if left:
        failures.append(f"{left} record(s) not acknowledged within {timeout:.0f}s")
    if failures:
        raise MirrorError(
            f"cluster '{cluster.alias}': writing MM2's source positions to {topic} failed: "
            + "; ".join(failures[:5])
        )
    log.info(
        "wrote %d MM2 source position(s) for %s->%s to %s",
        len(records), source_alias, cluster.alias, topic,
    )
    return len(records)
