"""A source topic deleted and created again under the same name (a new topic ID) is mirrored
from the new topic's start: the old topic's positions are never applied to the new one, whether
it happens while the mirror runs (within one topic refresh, or after the mirror has seen the
topic gone) or while it is stopped."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException
from mirror_process import (
    MirrorProcess,
    Record,
    alarms,
    first_occurrences,
    mm2_properties,
    read_partitions,
)

from kafka_mirror_testing.localcluster import LocalKafkaCluster
from kafka_mirror_testing.records import Message, produce
from kafka_mirror_testing.waiting import wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def _tagged(tag: str, counts: dict[int, int]) -> Iterator[Message]:
    for partition, count in counts.items():
        for i in range(count):
            yield Message(key=f"{tag}-{partition}-{i}".encode(), value=tag.encode(),
                          partition=partition)


def _recreate(cluster: LocalKafkaCluster, topic: str, partitions: int,
              meanwhile: Callable[[], None] = lambda: None) -> None:
    """Delete the topic, then (after ``meanwhile``) create it again once the cluster lets it
    (a new topic ID)."""
    admin: Any = cluster.admin()
    for future in admin.delete_topics([topic], operation_timeout=30).values():
        future.result(timeout=60)
    meanwhile()
    deadline = time.monotonic() + 60
    while True:
        try:
            cluster.create_topic(topic, partitions)
            return
        except KafkaException:  # still being deleted
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _mirrored(destination: LocalKafkaCluster, target: str,
              expected: dict[int, list[Record]]) -> bool:
    got = read_partitions(destination, target)
    return all(first_occurrences(got.get(p, [])) == records for p, records in expected.items())


# the flow mirrors the heartbeats topic too
WITHOUT_IT = "mirroring 1 topics, 1 partitions"

# real-time mode: no batch ends while the test runs, the acknowledged positions are all it has
MODES = {
    "micro-batch": "mirror.mode = micro-batch\n",
    "realtime": "mirror.realtime.batch.duration.ms = 600000\n"
                "spark.master = local[8]\n",
}


@pytest.mark.parametrize("mode", sorted(MODES))
def test_topic_deleted_and_created_again_is_mirrored_from_its_start(
    source_cluster: LocalKafkaCluster, destination_cluster: LocalKafkaCluster,
    unique_topic: str, tmp_path: Path, mode: str,
) -> None:
    topic, target = unique_topic, f"source.{unique_topic}"
    source_cluster.create_topic(topic, 2)
    produce(source_cluster, topic, _tagged("old", {0: 200, 1: 100}))
    expected = read_partitions(source_cluster, topic)
    config = tmp_path / "mm2.properties"
    config.write_text(mm2_properties(source_cluster, destination_cluster,
                                     f"topics = {topic}\n" + MODES[mode]))
    args = ["run", str(config), "--state-dir", str(tmp_path / "state")]
    mirror = MirrorProcess(args, tmp_path / "first.log").start()
    try:
        wait_for(lambda: _mirrored(destination_cluster, target, expected), 240,
                 "the first topic mirrored", mirror)
        # while the mirror runs: fewer records than the old topic had (its positions would
        # point past the new topic's end)
        _recreate(source_cluster, topic, 2)
        produce(source_cluster, topic, _tagged("new", {0: 50, 1: 30}))
        for partition, records in read_partitions(source_cluster, topic).items():
            expected[partition] += records
        wait_for(lambda: _mirrored(destination_cluster, target, expected), 240,
                 "the re-created topic mirrored from its start", mirror)
        recreated = f"source topic {topic} was deleted and created again (topic ID "
        assert mirror.output().count(recreated) == 1, mirror.output()[-3000:]
        # once more, created again only after the mirror has seen the topic gone (its query
        # restarted without it): the old topic's ID is remembered all the same
        runs_without = mirror.output().count(WITHOUT_IT)
        _recreate(source_cluster, topic, 2, lambda: wait_for(
            lambda: mirror.output().count(WITHOUT_IT) > runs_without, 120,
            "the mirror restarted without the deleted topic", mirror))
        produce(source_cluster, topic, _tagged("again", {0: 40, 1: 20}))
        for partition, records in read_partitions(source_cluster, topic).items():
            expected[partition] += records
        wait_for(lambda: _mirrored(destination_cluster, target, expected), 240,
                 "the topic created again after it was seen gone mirrored from its start", mirror)
        code, _ = mirror.terminate()
        assert code == 0, mirror.output()[-3000:]
        output = mirror.output()
        assert output.count(recreated) == 2, output[-3000:]
    finally:
        mirror.cleanup()

    # while the mirror is stopped: found at the start
    _recreate(source_cluster, topic, 2)
    produce(source_cluster, topic, _tagged("newer", {0: 20, 1: 10}))
    for partition, records in read_partitions(source_cluster, topic).items():
        expected[partition] += records
    mirror = MirrorProcess(args, tmp_path / "second.log").start()
    try:
        wait_for(lambda: _mirrored(destination_cluster, target, expected), 240,
                 "the topic created again while stopped mirrored from its start", mirror)
        code, _ = mirror.terminate()
        assert code == 0, mirror.output()[-3000:]
        assert f"source topic {topic} was deleted and created again" in mirror.output()
    finally:
        mirror.cleanup()


def test_state_of_a_topic_out_of_the_flow_goes_after_the_retention(
    source_cluster: LocalKafkaCluster, destination_cluster: LocalKafkaCluster,
    unique_topic: str, tmp_path: Path,
) -> None:
    """``mirror.topic.state.retention.ms=0``: a topic deleted on the source loses what the flow
    kept of it (offset translation, its topic ID) at the query start without it; created again
    later, it is still mirrored from its start (nothing of the old topic applies to it)."""
    kept, gone = f"{unique_topic}-kept", f"{unique_topic}-gone"
    expected: dict[str, dict[int, list[Record]]] = {}
    for topic in (kept, gone):
        source_cluster.create_topic(topic, 1)
        produce(source_cluster, topic, _tagged("old", {0: 60}))
        expected[topic] = read_partitions(source_cluster, topic)
    config = tmp_path / "mm2.properties"
    config.write_text(mm2_properties(
        source_cluster, destination_cluster,
        f"topics = {kept}|{gone}\nmirror.topic.state.retention.ms = 0\n"))
    state = tmp_path / "state"
    mirror = MirrorProcess(["run", str(config), "--state-dir", str(state)],
                           tmp_path / "mirror.log").start()
    try:
        for topic in (kept, gone):
            wait_for(lambda t=topic: _mirrored(destination_cluster, f"source.{t}", expected[t]),
                     240, f"{topic} mirrored", mirror)
        def ranges_files() -> list[Path]:
            return list(state.glob("*/offset-ranges.json"))

        wait_for(lambda: any(gone in f.read_text() for f in ranges_files()), 60,
                 "the deleted topic's offset translation saved", mirror)
        (ranges_file,) = ranges_files()

        def newest() -> int:
            return max(int(p.name[4:]) for p in ranges_file.parent.glob("gen-*"))

        before = newest()
        dropped = f"the state of {gone} dropped"
        _recreate(source_cluster, gone, 1, lambda: wait_for(
            lambda: dropped in mirror.output(), 120, "the deleted topic's state dropped", mirror))
        ranges = ranges_file.read_text()
        assert gone not in ranges and kept in ranges, ranges
        # the generation of the restart without the deleted topic
        ids = ranges_file.parent / f"gen-{before + 1}" / "topic-ids.json"
        wait_for(ids.exists, 60, "the query started without the deleted topic", mirror)
        assert gone not in ids.read_text()
        produce(source_cluster, gone, _tagged("new", {0: 25}))
        expected[gone][0] += read_partitions(source_cluster, gone)[0]
        wait_for(lambda: _mirrored(destination_cluster, f"source.{gone}", expected[gone]), 240,
                 "the topic created again mirrored from its start", mirror)
        code, _ = mirror.terminate()
        assert code == 0, mirror.output()[-3000:]
    finally:
        mirror.cleanup()


@pytest.mark.parametrize("mode", ["realtime", "micro-batch"])
def test_a_topic_deleted_while_mirrored_leaves_the_flow_within_seconds_quietly(
    source_cluster: LocalKafkaCluster, destination_cluster: LocalKafkaCluster,
    unique_topic: str, tmp_path: Path, mode: str,
) -> None:
    """Topics read every 10 minutes: a source topic deleted while mirrored is noticed within
    seconds all the same, and the query restarts without it. Real-time mode (the default): it
    fails the flow's next check of the source's leader epochs (every 5 s), which reads the topics
    at once; its consumer fetches it in vain meanwhile (the log keeps a burst of those
    warnings). Micro-batch mode: the query asks the source for the deleted partitions' offsets
    (retried until spark.network.timeout, and no batch of the kept topic either); 5 s of that
    and the topics are read at once. No ERROR line either way (Kafka's admin client logs one for
    a deleted topic it is asked about)."""
    kept, gone = f"{unique_topic}-kept", f"{unique_topic}-gone"
    for topic in (kept, gone):
        source_cluster.create_topic(topic, 1)
        produce(source_cluster, topic, _tagged("old", {0: 20}))
    config = tmp_path / "mm2.properties"
    config.write_text(mm2_properties(
        source_cluster, destination_cluster,
        f"topics = {kept}|{gone}\nrefresh.topics.interval.seconds = 600\n"
        f"mirror.mode = {mode}\n"))
    mirror = MirrorProcess(["run", str(config), "--state-dir", str(tmp_path / "state")],
                           tmp_path / "mirror.log").start()
    try:
        for topic in (kept, gone):
            wait_for(lambda t=topic: len(read_partitions(destination_cluster, f"source.{t}")
                                         .get(0, [])) == 20, 240, f"{topic} mirrored", mirror)
        without = "mirroring 2 topics, 2 partitions"  # the heartbeats topic and the kept one
        runs_without = mirror.output().count(without)
        admin: Any = source_cluster.admin()
        for future in admin.delete_topics([gone], operation_timeout=30).values():
            future.result(timeout=60)
        wait_for(lambda: mirror.output().count(without) > runs_without, 60,
                 "the query restarted without the deleted topic", mirror)
        produce(source_cluster, kept, _tagged("new", {0: 10}))
        wait_for(lambda: len(read_partitions(destination_cluster, f"source.{kept}")
                             .get(0, [])) == 30, 120, "the kept topic mirrored on", mirror)
        code, _ = mirror.terminate()
        assert code == 0, mirror.output()[-3000:]
        output = mirror.output()
        assert not alarms(output), alarms(output)[:10]
        fetch_warnings = output.count("WARN FetchCollector")
        assert fetch_warnings <= 20, fetch_warnings
    finally:
        mirror.cleanup()
