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

import logging
import time
from collections.abc import Mapping

from confluent_kafka import KafkaError, KafkaException

from kafka_mirror.config.model import ClusterSpec
from kafka_mirror.errors import MirrorError
from kafka_mirror.kafka.admin import ClusterAdmin
from kafka_mirror.kafka.internal_topics import (
    InternalRecord,
    InternalTopicReader,
    InternalTopicWriter,
)
from kafka_mirror.mm2.offsets_records import (
    DEFAULT_OFFSETS_PARTITIONS,
    MM2_SOURCE_CONNECTOR,
    is_int,
    mm2_offsets_topic,
    mm2_source_key,
    mm2_source_value,
    mm2_worker_group,
    parse_kept_value,
    parse_source_key,
    parse_stored_offset,
)

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


def _ready_admin(cluster: ClusterSpec, timeout: float) -> ClusterAdmin:
    """A ClusterAdmin that answered (it also does a keytab login when the config has one)."""
    admin = ClusterAdmin(cluster)
    admin.wait_ready(timeout)
    return admin


# ------------------------------------------------------------------ read


def read_mm2_positions(
    cluster: ClusterSpec, topic: str, source_alias: str, timeout: float = 30.0
) -> dict[tuple[str, int], int]:
    """MM2's source positions for flow ``source_alias->cluster`` from its offsets ``topic``.

    Reads every partition of ``topic`` on ``cluster`` (the flow's TARGET) to its end, keeps the
    last value per key (a null value deletes it) and returns ``{(upstream topic, partition):
    next offset to read}`` (stored + 1) for the MirrorSourceConnector keys of ``source_alias``.
    A missing topic gives ``{}``; the records kafka-mirror keeps there itself (with a target
    end: :mod:`kafka_mirror.state.kept_positions`) are left out. Records of no known shape, keys
    MM2 would not look up (not byte-identical to what it writes) and unreadable values are
    skipped with a warning; stored negative offsets mean "no position" to MM2 and are left out.
    """
    _ready_admin(cluster, timeout)
    # committed data only (what Connect's exactly-once reader sees; the same as everything
    # when no transactions are used)
    latest = InternalTopicReader(
        cluster, topic, label="reading MM2's offsets topic", timeout=timeout
    ).read_latest()
    positions: dict[tuple[str, int], int] = {}
    for record in latest.values():
        found = _source_position(topic, source_alias, record)
        if found is not None:
            positions[found[0]] = found[1]
    return positions


def _source_position(
    topic: str, source_alias: str, record: InternalRecord
) -> tuple[tuple[str, int], int] | None:
    """``((upstream topic, partition), next offset)`` of one stored record of ``source_alias``;
    None for another connector or cluster, for no position, and (with a warning) for a record
    MM2 would not use."""
    key, value = record.key, record.value or b""
    where = f"{topic} partition {record.partition} offset {record.offset}"
    parsed = parse_source_key(key)
    if parsed is None:
        log.warning(
            "%s: skipped: key is not a Connect offsets key "
            '["<connector>",{...}] of a known shape: %r', where, key,
        )
        return None
    connector, alias, upstream, upstream_partition = parsed
    if connector != MM2_SOURCE_CONNECTOR or alias != source_alias:
        return None
    if key != mm2_source_key(alias, upstream, upstream_partition):
        log.warning(
            "%s: skipped: key %r is not byte-identical to the one MM2 writes and looks up "
            "(%r); MM2 ignores it",
            where, key, mm2_source_key(alias, upstream, upstream_partition),
        )
        return None
    kept = parse_kept_value(value)
    if kept is not None and kept[1] is not None:
        return None  # kafka-mirror's own position (kafka_mirror.state.kept_positions), not MM2's
    stored = parse_stored_offset(value)
    if stored is None:
        log.warning('%s: skipped: value is not {"offset":<integer>}: %r', where, value)
        return None
    if stored < 0:
        return None  # MM2: no position (auto.offset.reset applies)
    return (upstream, upstream_partition), stored + 1


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


def _refuse_while_running(
    admin: ClusterAdmin, group: str, source_alias: str, deadline: float
) -> None:
    """Raise while MM2's Connect worker ``group`` has members: it would overwrite what is
    written at its next offset flush."""
    members = _active_members(admin, group, deadline)
    if members:
        raise MirrorError(
            f"cluster '{admin.cluster.alias}': MirrorMaker 2 is still running for flow "
            f"{source_alias}->{admin.cluster.alias} (its Connect worker group '{group}' has "
            f"{members} active member(s)); stop it before writing its source positions"
        )


def position_records(
    source_alias: str, positions: Mapping[tuple[str, int], int]
) -> list[tuple[bytes, bytes | None]]:
    """The ``(key, value)`` records storing ``positions`` as MM2 would: a position of 0
    (nothing copied yet) is a tombstone."""
    records: list[tuple[bytes, bytes | None]] = []
    for (upstream, upstream_partition), position in sorted(positions.items()):
        if not is_int(position) or position < 0:
            raise ValueError(f"position {position!r} of {upstream}-{upstream_partition}")
        key = mm2_source_key(source_alias, upstream, upstream_partition)
        records.append((key, mm2_source_value(position) if position > 0 else None))
    return records


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
    records = position_records(source_alias, positions)
    if partitions < 1:
        raise ValueError(f"partitions must be >= 1, not {partitions}")
    deadline = time.monotonic() + timeout
    admin = _ready_admin(cluster, timeout)
    _refuse_while_running(admin, worker_group or f"{source_alias}-mm2", source_alias, deadline)
    if not records:
        return 0
    writer = InternalTopicWriter(
        cluster, topic, label="MM2's source positions not written to", timeout=timeout,
        partition_by_key=True,
    )
    try:
        writer.ensure_topic(admin, replication_factor, partitions)
        writer.write(records)
    finally:
        writer.close()
    log.info(
        "wrote %d MM2 source position(s) for %s->%s to %s",
        len(records), source_alias, cluster.alias, topic,
    )
    return len(records)
