"""Exactly once on the target without target transactions (``mirror.exactly.once.target``).

A mirror is stopped in the middle of a batch (``kill -9``, a query restart when partitions
are added to a source topic, or, on a Spark standalone cluster, its executor killed) while the
destination broker throttles its producer (a client quota on the sink's client id, and a small
producer buffer so that Spark's tasks, not the producer, hold the batch), so that on any machine
the target holds part of a batch Spark never committed; the tests check that it did, then that
after the restart the target holds every source record exactly once, in order, with key, value,
headers and timestamp equal. The source is transactional with aborted transactions (offset
gaps: the skip must count records, not offsets). A partition the test writes to behind the
mirror's back must fall back to at-least-once with a warning, and still lose nothing.
"""

from __future__ import annotations

import itertools
import os
import re
import signal
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import NewPartitions
from cut_batches import (
    FLOW_DIR,
    MIRROR_ONLY,
    QUOTA,
    SINK_CLIENT_ID,
    SKIPPED,
    assert_each_once,
    committed_everything,
    committed_positions,
    committed_records,
    kill_when,
    produce_transactional,
    records_on,
    restart_until,
    settled_ends,
)
from mirror_process import (
    MirrorProcess,
    end_offsets,
    first_occurrences,
    mm2_properties,
    read_with_offsets,
    stop_compaction,
)

from kafka_mirror.state.files import read_json
from kafka_mirror_testing.localcluster import LocalKafkaCluster, free_port
from kafka_mirror_testing.records import Message, produce
from kafka_mirror_testing.spark_standalone import SparkStandalone
from kafka_mirror_testing.waiting import wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def assert_ranges_seamless(state: Path, topic: str, partition: int) -> None:
    """The flow's offset translation ranges of the partition leave no hole on either side (the
    skipped records are a range of their own, source [S, S') to target [T, E))."""
    data = read_json(state / FLOW_DIR / "offset-ranges.json", list, "not read") or []
    ranges = [e["ranges"] for e in data  # rows appended after the array: the last one wins
              if e["topic"] == topic and e["partition"] == partition][-1]
    for older, newer in itertools.pairwise(ranges):
        assert newer["source_start"] == older["source_end"], ranges
        assert newer["target_start"] == older["target_end"], ranges


def test_kill_9_mid_batch_then_exactly_once_with_offset_gaps_and_a_fallback(
    source_cluster: LocalKafkaCluster, destination_cluster: LocalKafkaCluster,
    unique_topic: str, tmp_path: Path,
) -> None:
    partitions, per_partition = 3, 12_000
    topic = unique_topic
    target_topic = f"source.{topic}"
    source_cluster.create_topic(topic, partitions)
    produce_transactional(source_cluster, topic, partitions, per_partition)
    config = tmp_path / "mm2.properties"
    config.write_text(mm2_properties(
        source_cluster, destination_cluster,
        f"topics = {topic}\nmirror.max.records.per.batch = 12000\n" + MIRROR_ONLY))
    state = tmp_path / "state"
    args = ["run", str(config), "--state-dir", str(state)]
    total = partitions * per_partition
    source = read_with_offsets(source_cluster, topic)
    assert sum(len(r) for r in source.values()) == total

    def every_partition_cut() -> bool:
        """A committed batch, and every partition wrote records of the next one."""
        positions = committed_positions(state, topic)
        if not positions:
            return False
        committed = committed_records(source, positions)
        ends = end_offsets(destination_cluster, target_topic)
        return (all(ends.get(p, 0) > committed[p] for p in range(partitions))
                and committed_positions(state, topic) == positions)

    began = kill_when(args, tmp_path / "mirror-1.log", destination_cluster, every_partition_cut,
                      "every partition writing an uncommitted batch")
    # the throttled broker had not yet read every request the killed producer sent (a channel
    # is muted while throttled): the cut is where the target's ends stand still
    cut = settled_ends(destination_cluster, target_topic)
    committed = committed_records(source, committed_positions(state, topic))
    partial = {p: cut[p] - committed[p] for p in range(partitions)}
    # the point of the test: the target holds records of a batch Spark never committed
    assert all(n > 0 for n in partial.values()), (cut, committed)
    assert sum(cut.values()) < total, cut
    # a foreign record behind partition 2's cut batch: it cannot be proven to be the mirror's
    produce(destination_cluster, target_topic,
            [Message(key=b"foreign", value=b"not from the source", partition=2)], timeout=30)

    second = restart_until(args, tmp_path / "mirror-2.log", destination_cluster, target_topic,
                           total + 1, committed_everything(source_cluster, topic, state))
    restarted = time.monotonic() - began
    log = second.output()
    target = read_with_offsets(destination_cluster, target_topic)
    skips = {int(m["partition"]): m for m in SKIPPED.finditer(log)}
    for p in (0, 1):
        got = [record for _, record in target[p]]
        want = [record for _, record in source[p]]
        assert got == want, f"partition {p}: {len(got)} records on the target, {len(want)} " \
            f"on the source"
        assert int(skips[p]["records"]) == partial[p], log[-3000:]
        # the skipped range spans offset gaps: records were counted, not offsets
        assert int(skips[p]["resume"]) - int(skips[p]["start"]) > partial[p]
        assert_ranges_seamless(state, topic, p)
    assert 2 not in skips
    assert re.search(rf"{re.escape(topic)}\[2\] resumes at-least-once from offset \d+ "
                     r"\(records of the batch cut short may be written twice\): target record",
                     log), log[-3000:]
    got2 = [record for _, record in target[2] if record[0] != b"foreign"]
    want2 = [record for _, record in source[2]]
    assert first_occurrences(got2) == want2  # nothing lost, order kept
    assert len(got2) - len(want2) == partial[2]  # the cut batch's records written twice
    print(f"kill -9 mid-batch, {total} records (transactional source with aborted "
          f"transactions): records of the cut batch on the target {partial}; after the restart "
          f"partitions 0 and 1 exactly once (skipped {[skips[p]['records'] for p in (0, 1)]}), "
          f"partition 2 (foreign record) at-least-once with {len(got2) - len(want2)} "
          f"duplicates; restart to caught up {restarted:.0f} s")


def test_partitions_added_mid_batch_restart_the_query_exactly_once(
    source_cluster: LocalKafkaCluster, destination_cluster: LocalKafkaCluster,
    unique_topic: str, tmp_path: Path,
) -> None:
    """Partitions added while a long batch writes: the flow restarts its query; the batch is
    interrupted after the stop's grace period and the new query skips what it left. Meanwhile
    the mirror's other flow (destination->source) follows a topic created for it: a flow's
    restart holds no other flow."""
    topic = unique_topic
    other = f"back-{topic}"
    target_topic = f"source.{topic}"
    source_cluster.create_topic(topic, 2)
    per_partition = 15_000
    produce_transactional(source_cluster, topic, 2, per_partition)
    config = tmp_path / "mm2.properties"
    config.write_text(mm2_properties(
        source_cluster, destination_cluster,
        f"topics = {topic}\nmirror.max.records.per.batch = 200000\n" + MIRROR_ONLY
        + f"destination->source.enabled = true\ndestination->source.topics = {other}\n"
        # not the heartbeats topics earlier tests left on the session's destination: a batch of
        # them would wait for a task slot behind this flow's throttled batch
        "destination->source.heartbeats.replication.enabled = false\n"
        "refresh.topics.interval.seconds = 1\n"))
    state = tmp_path / "state"
    destination_cluster.set_producer_quota(SINK_CLIENT_ID, QUOTA)
    mirror = MirrorProcess(["run", str(config), "--state-dir", str(state)],
                           tmp_path / "mirror.log").start()

    try:
        wait_for(lambda: records_on(destination_cluster, target_topic) >= 2_000,
                 240, "the first batch under way", mirror)
        admin = source_cluster.admin()
        for future in admin.create_partitions([NewPartitions(topic, 3)]).values():
            future.result(30)
        produce_transactional(source_cluster, topic, 3, 200, first=10_000_000)
        wait_for(lambda: "topics or partitions changed; restarting" in mirror.output(), 60,
                 "the query restart", mirror)
        destination_cluster.create_topic(other, 1)
        # the new query planned its start: the rest may go at full speed
        wait_for(lambda: SKIPPED.search(mirror.output()) is not None
                 or "resumes at-least-once" in mirror.output(),
                 120, "the new query's start", mirror)
        # the other flow started its query on the new topic while this flow was restarting
        log = mirror.output()
        created = log.find(f"destination->source: created topic destination.{other}")
        started_other = log.find("flow destination->source: mirroring", created) \
            if created >= 0 else -1
        restarted = min(i for i in (log.find("resumes at-least-once"),
                                    *(m.start() for m in SKIPPED.finditer(log))) if i >= 0)
        assert 0 <= started_other < restarted, log[-3000:]
        destination_cluster.set_producer_quota(SINK_CLIENT_ID, None)
        total = 2 * per_partition + 3 * 200
        wait_for(lambda: records_on(destination_cluster, target_topic) >= total,
                 300, "everything mirrored", mirror)
        wait_for(committed_everything(source_cluster, topic, state), 120,
                 "a batch committed past every source record", mirror)
        code, _ = mirror.terminate()
        assert code == 0, mirror.output()[-3000:]
    finally:
        mirror.cleanup()
        destination_cluster.set_producer_quota(SINK_CLIENT_ID, None)
    log = mirror.output()
    skips = {int(m["partition"]): m for m in SKIPPED.finditer(log)}
    # the batch was cut by the restart (else this test proves nothing)
    assert skips, log[-3000:]
    total = assert_each_once(source_cluster, topic, destination_cluster, target_topic)
    print(f"partitions added mid-batch: query restarted, skipped "
          f"{ {p: int(m['records']) for p, m in skips.items()} } records already on the target; "
          f"{total} records, each exactly once")


def test_an_executor_lost_mid_batch_on_a_spark_cluster_restarts_exactly_once(
    source_cluster: LocalKafkaCluster, destination_cluster: LocalKafkaCluster,
    unique_topic: str, tmp_path: Path,
) -> None:
    """On a Spark standalone cluster, the executor writing a batch is killed (``kill -9``) after
    it wrote part of the batch. Spark runs the lost tasks again (``spark.task.maxFailures`` 4),
    and a retry would write that part a second time: the source refuses retried tasks, the
    batch's job fails, and the flow restarts the query from what the target holds. The mirror
    process goes on; every record arrives exactly once."""
    topic = unique_topic
    target_topic = f"source.{topic}"
    source_cluster.create_topic(topic, 2)
    per_partition = 12_000
    produce_transactional(source_cluster, topic, 2, per_partition)
    spark = SparkStandalone(tmp_path / "spark", workers=1, cores=2, memory="512m")
    url = spark.start()
    config = tmp_path / "mm2.properties"
    config.write_text(mm2_properties(
        source_cluster, destination_cluster,
        f"topics = {topic}\nmirror.max.records.per.batch = 200000\n" + MIRROR_ONLY
        + f"spark.master = {url}\nspark.driver.host = 127.0.0.1\n"
        f"spark.driver.bindAddress = 127.0.0.1\nspark.driver.port = {free_port()}\n"
        "spark.executor.memory = 512m\nspark.cores.max = 2\n"))
    destination_cluster.set_producer_quota(SINK_CLIENT_ID, QUOTA)
    mirror = MirrorProcess(["run", str(config), "--state-dir", str(tmp_path / "state")],
                           tmp_path / "mirror.log").start()
    try:
        wait_for(lambda: records_on(destination_cluster, target_topic) >= 2_000,
                 240, "the first batch under way", mirror)
        executors = spark.executors()
        assert len(executors) == 1, executors
        os.kill(executors[0], signal.SIGKILL)
        wait_for(lambda: SKIPPED.search(mirror.output()) is not None
                 or "resumes at-least-once" in mirror.output(),
                 240, "the restarted query's start", mirror)
        destination_cluster.set_producer_quota(SINK_CLIENT_ID, None)
        total = 2 * per_partition
        wait_for(lambda: records_on(destination_cluster, target_topic) >= total,
                 300, "everything mirrored", mirror)
        wait_for(committed_everything(source_cluster, topic, tmp_path / "state"), 120,
                 "a batch committed past every source record", mirror)
        code, _ = mirror.terminate()
        assert code == 0, mirror.output()[-3000:]
    finally:
        mirror.cleanup()
        spark.stop()
        destination_cluster.set_producer_quota(SINK_CLIENT_ID, None)
    log = mirror.output()
    assert "kafka-mirror refuses a retried task" in log, log[-3000:]
    skips = {int(m["partition"]): int(m["records"]) for m in SKIPPED.finditer(log)}
    assert skips, log[-3000:]  # the batch was cut (else this test proves nothing)
    total = assert_each_once(source_cluster, topic, destination_cluster, target_topic)
    print(f"executor killed mid-batch on a Spark cluster: retries refused, the query restarted, "
          f"skipped {skips} records already on the target; {total} records, each exactly once")


def produce_compacted(cluster: LocalKafkaCluster, topic: str, partitions: int,
                      per_partition: int) -> None:
    """``per_partition`` keys per partition, then every third key written again; the topic is
    compacted, so the log cleaner leaves a hole at the first record of each such key. Once
    there are holes in every partition, compaction is turned off (the source must stay what the
    test compares against)."""
    cluster.create_topic(topic, partitions, config={
        "cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01"})
    base = int(time.time() * 1000) - 3_600_000
    for round_, step in ((0, 1), (1, 3)):
        produce(cluster, topic, (
            Message(key=f"k{p}-{i}".encode(), value=f"{round_}-{i}".encode() * 3, partition=p,
                    timestamp=base + i, headers=[("r", str(round_).encode())])
            for i in range(0, per_partition, step) for p in range(partitions)),
            **{"linger.ms": "20"})
        time.sleep(0.3)  # segment.ms=100: the next record rolls a new segment

    def holes_everywhere() -> bool:
        # a record rolls each active segment, so it can be cleaned
        produce(cluster, topic, [Message(key=b"roll", value=b"r", partition=p)
                                 for p in range(partitions)], timeout=30)
        written = per_partition + len(range(0, per_partition, 3))
        return all(sum(1 for _, record in records if record[0] != b"roll") < written
                   for records in read_with_offsets(cluster, topic).values())

    wait_for(holes_everywhere, 120, "the log cleaner left holes in every partition")
    stop_compaction(cluster, topic)


def test_sigterm_mid_batch_past_the_grace_period_then_exactly_once_on_a_compacted_source(
    source_cluster: LocalKafkaCluster, destination_cluster: LocalKafkaCluster,
    unique_topic: str, tmp_path: Path,
) -> None:
    """SIGTERM while a batch has more left to write than the stop's grace period: the query is
    interrupted, the process exits cleanly, and the next start skips what the batch wrote. The
    source is compacted (holes in the offsets: the skip counts records)."""
    topic = unique_topic
    target_topic = f"source.{topic}"
    produce_compacted(source_cluster, topic, 2, 15_000)
    source = read_with_offsets(source_cluster, topic)
    total = sum(len(records) for records in source.values())
    config = tmp_path / "mm2.properties"
    config.write_text(mm2_properties(
        source_cluster, destination_cluster,
        f"topics = {topic}\nmirror.max.records.per.batch = 200000\n" + MIRROR_ONLY))
    state = tmp_path / "state"
    args = ["run", str(config), "--state-dir", str(state)]

    destination_cluster.set_producer_quota(SINK_CLIENT_ID, QUOTA)
    first = MirrorProcess(args, tmp_path / "mirror-1.log").start()
    try:
        wait_for(lambda: records_on(destination_cluster, target_topic) >= 2_000,
                 240, "the first batch under way", first)
        code, took = first.terminate(timeout=90)
        assert code == 0, first.output()[-3000:]
    finally:
        first.cleanup()
        destination_cluster.set_producer_quota(SINK_CLIENT_ID, None)
    cut = settled_ends(destination_cluster, target_topic)
    assert 0 < sum(cut.values()) < total, cut  # the batch was cut (else this proves nothing)
    second = restart_until(args, tmp_path / "mirror-2.log", destination_cluster, target_topic,
                           total, committed_everything(source_cluster, topic, state))
    skips = {int(m["partition"]): m for m in SKIPPED.finditer(second.output())}
    skipped = {p: int(m["records"]) for p, m in skips.items()}
    assert skipped == {p: n for p, n in cut.items() if n}, second.output()[-3000:]
    holes = {p: int(m["resume"]) - int(m["start"]) - int(m["records"]) for p, m in skips.items()}
    assert all(n > 0 for n in holes.values()), holes  # the skipped ranges span compaction holes
    target = read_with_offsets(destination_cluster, target_topic)
    for p in range(2):
        assert [r for _, r in target[p]] == [r for _, r in source[p]], f"partition {p}"
    print(f"SIGTERM mid-batch, compacted source: stopped in {took:.0f} s (grace period over, "
          f"query interrupted); {sum(cut.values())} records of the cut batch on the target, "
          f"skipped {skipped} at the next start "
          f"(across {holes} offsets of compaction holes); {total} records, each exactly once")


def test_target_ends_survive_a_reload_and_keep_recent_pairs(tmp_path: Path) -> None:
    """The pairs a restart relies on are on disk when ``record`` returns; the newest pair of a
    source position wins, and only the last few per partition are kept."""
    from kafka_mirror.engine.exactly_once import HISTORY, TargetEnds

    path = tmp_path / "flow" / "target-ends.json"
    ends = TargetEnds(path)
    ends.record({("t", 0): (0, 0), ("t", 1): (5, 7)})
    ends.record({("t", 0): (100, 90)})  # after batch 0 (offset gaps: 10 markers)
    ends.record({("t", 0): (100, 91)})  # before batch 1: another write landed meanwhile
    reloaded = TargetEnds(path)
    assert reloaded.target_end(("t", 0), 100) == 91
    assert reloaded.target_end(("t", 0), 0) == 0
    assert reloaded.target_end(("t", 1), 5) == 7
    assert reloaded.target_end(("t", 1), 6) is None
    for i in range(1, HISTORY + 3):
        reloaded.record({("t", 0): (100 + i, 91 + i)})
    assert reloaded.target_end(("t", 0), 0) is None
    assert reloaded.target_end(("t", 0), 100 + HISTORY + 2) == 91 + HISTORY + 2
    reloaded.drop_topic("t")
    assert not TargetEnds(path).has(("t", 1))
