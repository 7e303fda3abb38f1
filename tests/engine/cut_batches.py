"""Batches cut short on purpose, and what the exactly-once tests check after them: a transactional
source with offset gaps, a destination that throttles the mirror's producer (so that the target
holds part of a batch Spark never committed), restarts until every record is across, and the
checks that each record is there once (test_exactly_once.py, test_host_loss.py)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Producer
from mirror_process import MirrorProcess, Record, end_offsets, read_with_offsets

from kafka_mirror.engine.positions import FlowState
from kafka_mirror_testing.localcluster import LocalKafkaCluster
from kafka_mirror_testing.waiting import wait_for

FLOW_DIR = "source_to_destination"
SINK_CLIENT_ID = f"kafka-mirror-{FLOW_DIR}"
# the destination accepts this many bytes/s from the mirror's producer (about 600 records/s of
# these tests after a first burst): a batch of 12,000 records takes about 20 s to write
QUOTA = 32 * 1024
MIRROR_ONLY = (
    "source->destination.producer.batch.size = 16384\n"
    "source->destination.producer.buffer.memory = 65536\n"
    "source->destination.producer.compression.type = none\n"
    "emit.heartbeats.enabled = false\n"
    "emit.checkpoints.enabled = false\n"
    "sync.topic.acls.enabled = false\n"
)
SKIPPED = re.compile(
    r"(?P<topic>\S+)\[(?P<partition>\d+)\]: (?P<records>\d+) records of the batch cut short are "
    r"already on the target \(\S+ offsets (?P<t0>\d+)\.\.(?P<t1>\d+)\): resuming at source "
    r"offset (?P<resume>\d+) instead of (?P<start>\d+)")

Offset = int


def produce_transactional(cluster: LocalKafkaCluster, topic: str, partitions: int,
                          per_partition: int, first: int = 0) -> None:
    """``per_partition`` committed records per partition, in transactions of 100 per partition;
    after every fifth one an aborted transaction of 10 per partition (offset gaps: markers and
    aborted records). Records carry headers (one repeated, one null) and their own timestamps."""
    producer = Producer(cluster.client_config(**{
        "transactional.id": f"eo-{topic}-{first}", "linger.ms": "20"}))
    producer.init_transactions(30)
    # partitions just added: a record for one the producer's metadata does not know yet fails
    # ("Unknown partition"), which fails the transaction (CI saw it once)
    wait_for(lambda: len(producer.list_topics(topic, timeout=10).topics[topic].partitions)
             >= partitions, 30, f"{topic}'s {partitions} partitions in the producer's metadata")
    base = int(time.time() * 1000) - 3_600_000
    i, rounds = first, 0
    while i < first + per_partition * partitions:
        producer.begin_transaction()
        for _ in range(100):
            for p in range(partitions):
                producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode() * 3,
                                 partition=p, timestamp=base + i - first,
                                 headers=[("n", str(i).encode()), ("h", b"x"), ("h", None)])
                i += 1
        producer.commit_transaction(60)
        rounds += 1
        if rounds % 5 == 0:
            producer.begin_transaction()
            for j in range(10 * partitions):
                producer.produce(topic, key=b"aborted", value=str(j).encode(),
                                 partition=j % partitions)
            # on the broker before the abort (offset gaps, as intended); an abort racing the
            # transaction's first produce requests failed once with INVALID_TXN_STATE
            producer.flush(60)
            producer.abort_transaction(60)


def records_on(cluster: LocalKafkaCluster, topic: str) -> int:
    """The sum of the topic's end offsets."""
    return sum(end_offsets(cluster, topic).values())


def kill_when(args: list[str], log: Path, destination: LocalKafkaCluster,
              condition: Callable[[], bool], what: str) -> float:
    """Start the mirror while the destination throttles its producer (QUOTA), ``kill -9`` it
    once ``condition`` holds (``what``, in the failure); the throttle is lifted after the kill.
    Returns the time of the kill (time.monotonic)."""
    destination.set_producer_quota(SINK_CLIENT_ID, QUOTA)
    mirror = MirrorProcess(args, log).start()
    try:
        wait_for(condition, 300, what, mirror)
        mirror.kill_hard()
        return time.monotonic()
    finally:
        mirror.cleanup()
        destination.set_producer_quota(SINK_CLIENT_ID, None)


def restart_until(args: list[str], log: Path, cluster: LocalKafkaCluster, topic: str,
                  records: int, committed: Callable[[], bool]) -> MirrorProcess:
    """Start the mirror again, wait until ``topic`` holds ``records`` and the mirror has
    ``committed`` (anything more, a duplicate, would have been written by then), then stop it
    with SIGTERM (exit 0)."""
    mirror = MirrorProcess(args, log).start()
    try:
        wait_for(lambda: records_on(cluster, topic) >= records, 300, "the rest mirrored", mirror)
        wait_for(committed, 120, "a batch committed past every source record", mirror)
        code, _ = mirror.terminate()
        assert code == 0, mirror.output()[-3000:]
    finally:
        mirror.cleanup()
    return mirror


def assert_each_once(source: LocalKafkaCluster, topic: str, destination: LocalKafkaCluster,
                     target_topic: str) -> int:
    """Every partition of ``target_topic`` holds exactly the records of the source's, in order
    (key, value, headers, timestamp); returns how many."""
    want = read_with_offsets(source, topic)
    got = read_with_offsets(destination, target_topic)
    for p, records in want.items():
        theirs = [record for _, record in got.get(p, [])]
        ours = [record for _, record in records]
        assert theirs == ours, f"partition {p}: {len(theirs)} on the target, {len(ours)} on " \
            "the source"
    return sum(len(r) for r in got.values())


def settled_ends(cluster: LocalKafkaCluster, topic: str, quiet: float = 3.0) -> dict[int, int]:
    """The topic's end offsets once they stopped moving for ``quiet`` seconds."""
    ends, since = end_offsets(cluster, topic), time.monotonic()
    deadline = since + 60
    while time.monotonic() - since < quiet and time.monotonic() < deadline:
        time.sleep(0.5)
        now = end_offsets(cluster, topic)
        if now != ends:
            ends, since = now, time.monotonic()
    return ends


def committed_positions(state: Path, topic: str) -> dict[int, int]:
    """The source positions of ``topic`` in the mirror's last committed batch (its Spark
    checkpoints; the flow also mirrors the heartbeats topic)."""
    return {p: offset for (t, p), offset in
            (FlowState(state / FLOW_DIR).last_positions() or {}).items() if t == topic}


def committed_records(source: dict[int, list[tuple[Offset, Record]]],
                      positions: dict[int, int]) -> dict[int, int]:
    return {p: sum(1 for offset, _ in records if offset < positions.get(p, 0))
            for p, records in source.items()}


def committed_everything(cluster: LocalKafkaCluster, topic: str,
                         state: Path) -> Callable[[], bool]:
    """A condition: the mirror's last committed batch is past every record of ``topic`` on the
    source (whatever the mirror would write twice, it writes before that commit)."""

    def done() -> bool:
        source = read_with_offsets(cluster, topic)
        committed = committed_records(source, committed_positions(state, topic))
        return committed == {p: len(records) for p, records in source.items()}

    return done
