"""The Java MirrorMaker 2 client probe against a real broker.

Records are hand-encoded here with the byte layouts of ../shared/reference/mm2-internals.md and
read back through Kafka's own connect-mirror-client (``MirrorClient``, ``RemoteClusterUtils``,
``Checkpoint``, ``Heartbeat``) and connect-mirror's ``OffsetSync``. Every alias is unique to the
test run, so other tests sharing the session clusters do not interfere; the only shared name is
``heartbeats``, which is checked with membership only.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from mirror_client_probe import probe

from kafka_mirror_testing.localcluster import LocalKafkaCluster
from kafka_mirror_testing.records import Message, produce

pytestmark = [pytest.mark.kafka]

COMPACT = {"cleanup.policy": "compact"}


# ------------------------------------------------------------------ MM2 wire formats


def _string(text: str) -> bytes:
    """Kafka protocol STRING: INT16 byte length, then UTF-8."""
    data = text.encode("utf-8")
    return struct.pack(">h", len(data)) + data


def checkpoint_record(
    group: str, topic: str, partition: int, upstream: int, offset: int, metadata: str = ""
) -> tuple[bytes, bytes]:
    key = _string(group) + _string(topic) + struct.pack(">i", partition)
    value = struct.pack(">hqq", 0, upstream, offset) + _string(metadata)
    return key, value


def heartbeat_record(source: str, target: str, timestamp: int) -> tuple[bytes, bytes]:
    return _string(source) + _string(target), struct.pack(">hq", 0, timestamp)


def offset_sync_record(
    topic: str, partition: int, upstream: int, offset: int
) -> tuple[bytes, bytes]:
    return _string(topic) + struct.pack(">i", partition), struct.pack(">qq", upstream, offset)


# ------------------------------------------------------------------ helpers


def _letters(n: int = 10) -> str:
    return "".join(chr(ord("a") + int(c, 16)) for c in uuid.uuid4().hex[:n])


@pytest.fixture
def alias() -> str:
    """A cluster alias unique to this test (letters only, so it never contains a separator)."""
    return f"probe{_letters()}"


@pytest.fixture
def topics(destination_cluster: LocalKafkaCluster) -> Iterator[Callable[[str], None]]:
    """``create(name)``: a 1-partition compacted topic on the destination, deleted afterwards."""
    created: list[str] = []

    def create(name: str) -> None:
        destination_cluster.create_topic(name, 1, config=COMPACT)
        created.append(name)

    yield create
    if created:
        admin = destination_cluster.admin()  # must outlive its futures
        for future in admin.delete_topics(created, operation_timeout=30).values():
            future.result(timeout=30)


def _ensure_heartbeats(cluster: LocalKafkaCluster) -> None:
    """``heartbeats`` is shared with other tests: create it unless it exists."""
    try:
        cluster.create_topic("heartbeats", 1, config=COMPACT)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise


ACKED = {"acks": "all", "linger.ms": "0"}


def _on_partition_0(records: list[tuple[bytes, bytes]]) -> Iterator[Message]:
    return (Message(key=key, value=value, partition=0) for key, value in records)


def _probe_all(
    calls: dict[str, tuple[str, dict[str, str], tuple[str, ...]]],
) -> dict[str, dict[str, Any]]:
    """Run several probes at once (each is a short JVM); ``{name: (command, props, args)}``."""
    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        futures = {
            name: pool.submit(probe, command, props, *args)
            for name, (command, props, args) in calls.items()
        }
        return {name: future.result() for name, future in futures.items()}


def _offsets(*items: tuple[str, int, int, str]) -> dict[str, Any]:
    return {
        "offsets": [
            {"topic": t, "partition": p, "offset": o, "metadata": m} for t, p, o, m in items
        ]
    }


# ------------------------------------------------------------------ tests


def test_checkpoints_translate_remote_offsets_and_decode(
    destination_cluster: LocalKafkaCluster,
    unique_topic: str,
    alias: str,
    topics: Callable[[str], None],
) -> None:
    checkpoints = f"{alias}.checkpoints.internal"
    # replication.policy.separator=- ('_' would collide with '.' in Kafka topic names)
    dashed = f"{alias}-checkpoints-internal"
    topics(checkpoints)
    topics(dashed)
    remote = f"{alias}.{unique_topic}"
    group = f"grp.{alias}"  # '.' would match 'X' if the group were used as a regex
    lookalike = f"grpX{alias}"
    tricky = 'meta "quoted" \\ \u00fc\u20ac\U0001f600\n\t'
    written = [
        (group, remote, 0, 10, 8, ""),
        (group, remote, 1, 20, 18, tricky),
        (lookalike, remote, 0, 5, 4, "other"),
        (group, remote, 0, 12, 11, "later"),  # the last record for a partition wins
        (group, f"{alias}.a-{unique_topic}", 2, 1, 0, ""),
    ]
    produce(destination_cluster, checkpoints,
            _on_partition_0([checkpoint_record(*c) for c in written]), **ACKED)
    produce(destination_cluster, dashed,
            _on_partition_0([checkpoint_record(group, remote, 3, 7, 6, "u")]), **ACKED)

    props = destination_cluster.client_config()
    dash_props = {**props, "replication.policy.separator": "-"}
    got = _probe_all({
        "translate": ("translate", props, (alias, group)),
        "remote": ("remote-offsets", props, (alias, group, "20000")),
        "lookalike": ("translate", props, (alias, lookalike)),
        "absent": ("translate", props, (alias, f"absent-{alias}")),
        "decode": ("decode-checkpoints", props, (checkpoints,)),
        "topics": ("checkpoint-topics", props, ()),
        "dash": ("translate", dash_props, (alias, group)),
        "dash_topics": ("checkpoint-topics", dash_props, ()),
    })

    expected = _offsets(
        (f"{alias}.a-{unique_topic}", 2, 0, ""),
        (remote, 0, 11, "later"),
        (remote, 1, 18, tricky),
    )
    assert got["translate"] == expected
    assert got["remote"] == expected
    assert got["lookalike"] == _offsets((remote, 0, 4, "other"))
    assert got["absent"] == {"offsets": []}
    assert got["decode"] == {
        "checkpoints": [
            {"group": g, "topic": t, "partition": p, "upstreamOffset": u, "offset": o,
             "metadata": m}
            for g, t, p, u, o, m in written
        ]
    }
    assert checkpoints in got["topics"]["topics"]
    assert dashed not in got["topics"]["topics"]
    # the properties file reaches MirrorClient whole: the separator changes the topic it reads
    assert got["dash"] == _offsets((remote, 3, 6, "u"))
    assert dashed in got["dash_topics"]["topics"]
    assert checkpoints not in got["dash_topics"]["topics"]


def test_heartbeats_hops_upstream_and_remote_topics(
    destination_cluster: LocalKafkaCluster, alias: str, topics: Callable[[str], None]
) -> None:
    a, b, c, unknown = (f"{alias}{x}" for x in "abcz")
    one_hop = f"{a}.heartbeats"  # replicated from a
    two_hops = f"{b}.{c}.heartbeats"  # c -> b -> here
    remote_data = f"{a}.orders"
    _ensure_heartbeats(destination_cluster)
    for name in (one_hop, two_hops, remote_data):
        topics(name)
    beats = [(a, "here", 1_700_000_000_000), (b, a, 1_700_000_000_123)]
    produce(destination_cluster, "heartbeats",
            _on_partition_0([heartbeat_record(*h) for h in beats]), **ACKED)

    props = destination_cluster.client_config()
    got = _probe_all({
        "decode": ("decode-heartbeats", props, ("heartbeats",)),
        "hops_a": ("hops", props, (a,)),
        "hops_b": ("hops", props, (b,)),
        "hops_c": ("hops", props, (c,)),
        "hops_unknown": ("hops", props, (unknown,)),
        "upstream": ("upstream", props, ()),
        "heartbeat_topics": ("heartbeat-topics", props, ()),
        "remote_topics": ("remote-topics", props, ()),
        "remote_from_a": ("remote-topics", props, (a,)),
    })

    decoded = [
        (h["source"], h["target"], h["timestamp"]) for h in got["decode"]["heartbeats"]
    ]
    mine = [h for h in decoded if h[0] in (a, b)]
    assert mine == beats  # in log order, among whatever else is in the shared topic
    assert got["hops_a"] == {"hops": 1}
    assert got["hops_b"] == {"hops": 1}
    assert got["hops_c"] == {"hops": 2}
    assert got["hops_unknown"] == {"hops": -1}
    upstream = got["upstream"]["upstream"]
    assert upstream == sorted(upstream)
    assert {a, b, c} <= set(upstream)
    assert {"heartbeats", one_hop, two_hops} <= set(got["heartbeat_topics"]["topics"])
    remote_topics = set(got["remote_topics"]["topics"])
    assert {one_hop, two_hops, remote_data} <= remote_topics
    assert "heartbeats" not in remote_topics
    assert got["remote_from_a"] == {"topics": sorted([one_hop, remote_data])}


def test_decode_offset_syncs_and_errors(
    destination_cluster: LocalKafkaCluster,
    unique_topic: str,
    alias: str,
    topics: Callable[[str], None],
) -> None:
    syncs_topic = f"mm2-offset-syncs.{alias}.internal"
    junk = f"{alias}.junk"
    topics(syncs_topic)
    topics(junk)
    syncs = [(unique_topic, 0, 5, 7), (unique_topic, 1, 100, 250), ("t-\u00fc", 2, 0, 0)]
    produce(destination_cluster, syncs_topic,
            _on_partition_0([offset_sync_record(*s) for s in syncs]), **ACKED)
    produce(destination_cluster, junk,
            _on_partition_0([heartbeat_record(alias, "x", 1)]), **ACKED)

    props = destination_cluster.client_config()
    calls = {
        "syncs": ("decode-offset-syncs", (syncs_topic,)),
        # the timeouts bound the wait for metadata only (an absent topic is named as soon as the
        # metadata arrives): generous, as five probe JVMs start at once on a busy machine
        "absent": ("decode-checkpoints", (f"{alias}.absent", "30000")),
        # a heartbeat key is too short for a checkpoint key
        "junk": ("decode-checkpoints", (junk,)),
        # Kafka itself would block for 60 s here; the probe checks the topic first
        "no_checkpoints": ("translate", (f"{alias}z", "group", "30000")),
        "bad_command": ("decode-everything", ()),
    }
    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        futures = {
            name: pool.submit(probe, command, props, *args)
            for name, (command, args) in calls.items()
        }
    assert futures["syncs"].result() == {
        "syncs": [
            {"topic": t, "partition": p, "upstreamOffset": u, "offset": o} for t, p, u, o in syncs
        ]
    }
    errors = {
        "absent": f"topic {alias}.absent does not exist",
        "junk": f"cannot decode record at offset 0 of {junk}-0",
        "no_checkpoints": f"checkpoints topic {alias}z.checkpoints.internal",
        "bad_command": "unknown command: decode-everything",
    }
    for name, message in errors.items():
        error = futures[name].exception()
        assert isinstance(error, AssertionError), (name, error)
        assert message in str(error), (name, str(error))
