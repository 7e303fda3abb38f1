"""Taking over from other mirrors without re-copying or gaps, and the way back to MM2.

Real stock MirrorMaker 2 (dedicated mode), real ``kafka-mirror`` processes, the session's two
KRaft clusters:

- MM2 -> kafka-mirror: MM2 stops (gracefully) mid-stream; ``kafka-mirror run`` with the SAME
  mm2.properties and no state of its own starts each partition where MM2's Connect offsets
  topic says MM2 stopped;
- MM1 -> kafka-mirror: ``kafka-mirror legacy`` starts at the offsets the consumer config's
  group committed;
- kafka-mirror -> MM2, no export step: the positions kafka-mirror keeps in MM2's Connect offsets
  topic as it runs (``mirror.positions.in.kafka``) make a started MM2 copy only what
  kafka-mirror did not; ``kafka-mirror offsets export-mm2`` writes the same positions from the
  state dir.
"""

from __future__ import annotations

import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from mirror_process import (
    CLI,
    MirrorProcess,
    Record,
    end_offsets,
    first_occurrences,
    read_partitions,
)

from kafka_mirror.config.model import ClusterSpec
from kafka_mirror.control.mm2_positions import (
    mm2_offsets_topic,
    read_mm2_positions,
    write_mm2_positions,
)
from kafka_mirror.engine.acked_positions import copied_positions
from kafka_mirror.state.kept_positions import KeptPositions
from kafka_mirror_testing.localcluster import LocalKafkaCluster, write_properties
from kafka_mirror_testing.records import Message, produce
from kafka_mirror_testing.stock_mm2 import RECORDS_ONLY, StockMirrorMaker2, mm2_properties
from kafka_mirror_testing.waiting import wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

MM2_HEAP = "384m"
# The kafka-mirror keys appended to MM2's own properties: one file serves both mirrors.
SPARK_KEYS = "spark.driver.memory = 768m\nspark.master = local[2]\n"


def _letters() -> str:
    """8 random lowercase letters (aliases must not collide between tests on shared clusters)."""
    return "".join(chr(ord("a") + int(c, 16)) for c in uuid.uuid4().hex[:8])


LINGER = {"linger.ms": "5"}


def _numbered(partitions: int, start: int, count: int, tag: str) -> Iterator[Message]:
    """Records ``start .. start+count-1``, round robin over the partitions, each one unique."""
    for i in range(start, start + count):
        yield Message(key=f"{tag}-k{i % 13}".encode(), value=f"{tag}-v{i}".encode(),
                      partition=i % partitions, headers=[("n", str(i).encode())])


def _write_config(path: Path, props: dict[str, str], extra: str = "") -> Path:
    """MM2's properties, then the kafka-mirror keys, as one file."""
    write_properties(path, props)
    with path.open("a", encoding="utf-8") as out:
        out.write(SPARK_KEYS + extra)
    return path


def _mm2_props(source: LocalKafkaCluster, destination: LocalKafkaCluster, topic: str,
               source_alias: str, target_alias: str) -> dict[str, str]:
    return mm2_properties(
        source.bootstrap, destination.bootstrap, topics=topic,
        source_alias=source_alias, target_alias=target_alias,
        extra=RECORDS_ONLY,  # for both mirrors
    )


def _total(cluster: LocalKafkaCluster, topic: str) -> int:
    return sum(end_offsets(cluster, topic).values())


def _caught_up(source: LocalKafkaCluster, topic: str, destination: LocalKafkaCluster,
               target: str) -> bool:
    src = end_offsets(source, topic)
    dst = end_offsets(destination, target)
    return bool(src) and all(dst.get(p, -1) >= end for p, end in src.items())


def _state_positions(state_dir: Path) -> dict[tuple[str, int], int]:
    """The positions each flow in ``state_dir`` recorded (its last committed batch's, or in
    real-time mode its acknowledged records')."""
    flows = [d for d in state_dir.iterdir() if d.is_dir()] if state_dir.is_dir() else []
    return {tp: o for d in flows for tp, o in (copied_positions(d) or {}).items()}


def _spec(cluster: LocalKafkaCluster, alias: str) -> ClusterSpec:
    return ClusterSpec(alias=alias, client={"bootstrap.servers": cluster.bootstrap})


def _run(config: Path, tmp_path: Path, name: str) -> MirrorProcess:
    return MirrorProcess(["run", str(config), "--state-dir", str(tmp_path / f"state-{name}")],
                         tmp_path / f"{name}.log").start()


# ------------------------------------------------------------------ MM2 -> kafka-mirror


def test_takeover_from_mirrormaker2_mid_stream(
    source_cluster: LocalKafkaCluster, destination_cluster: LocalKafkaCluster,
    unique_topic: str, tmp_path: Path,
) -> None:
    began = time.monotonic()
    topic, parts = unique_topic, 3
    n1, n2, n3 = 3000, 3000, 3000
    s, d = f"s{_letters()}", f"d{_letters()}"
    remote = f"{s}.{topic}"
    source_cluster.create_topic(topic, parts)
    produce(source_cluster, topic, _numbered(parts, 0, n1, "one"), **LINGER)
    props = _mm2_props(source_cluster, destination_cluster, topic, s, d)
    config = _write_config(tmp_path / "mm2.properties", props)

    mm2 = StockMirrorMaker2(config, tmp_path / "mm2", heap=MM2_HEAP)
    def produce_mid_stream() -> None:  # n2 records over ~4 s while MM2 copies them
        for chunk in range(20):
            produce(source_cluster, topic,
                    _numbered(parts, n1 + chunk * (n2 // 20), n2 // 20, "two"), **LINGER)
            time.sleep(0.2)

    writer = threading.Thread(target=produce_mid_stream)
    try:
        mm2.start(wait_started=120)  # MM2 reads the file with the spark.* keys in it
        wait_for(lambda: _total(destination_cluster, remote) >= n1, 120, "MM2 copied n1")
        writer.start()
        wait_for(lambda: _total(destination_cluster, remote) >= n1 + 300, 60,
                 "MM2 copying n2")
    finally:
        code = mm2.stop(timeout=60)  # SIGTERM: MM2 flushes its offsets on the way out
        if writer.ident is not None:
            writer.join(60)
    assert not writer.is_alive()
    mm2_log = mm2.log_path.read_text(errors="replace")
    spark_lines = [line for line in mm2_log.splitlines() if "spark." in line]
    print(f"MM2 exit code {code}; its lines on the spark.* keys: {spark_lines[:4]}")
    assert "Kafka MirrorMaker started" in mm2_log

    copied_by_mm2 = end_offsets(destination_cluster, remote)
    offsets_topic = mm2_offsets_topic(props, s, d)
    assert offsets_topic == f"mm2-offsets.{s}.internal"
    stored = read_mm2_positions(_spec(destination_cluster, d), offsets_topic, s)
    print(f"MM2 stopped having copied {copied_by_mm2} of {end_offsets(source_cluster, topic)} "
          f"(n1 + n2 = {n1 + n2}); its stored positions {stored}")
    assert n1 + 300 <= sum(copied_by_mm2.values())
    assert set(stored) == {(topic, p) for p in range(parts)}
    for p in range(parts):
        assert stored[(topic, p)] <= copied_by_mm2[p]  # never past what it copied

    produce(source_cluster, topic, _numbered(parts, n1 + n2, n3, "three"), **LINGER)
    mirror = _run(config, tmp_path, "mirror")
    try:
        wait_for(lambda: _caught_up(source_cluster, topic, destination_cluster, remote), 240,
                 "kafka-mirror caught up", mirror)
        exit_code, _ = mirror.terminate()
        assert exit_code == 0, mirror.output()[-3000:]
    finally:
        mirror.cleanup()
    output = mirror.output()
    assert (f"taking over from MirrorMaker 2: {parts} partitions start where its offsets topic "
            f"{offsets_topic} says it stopped") in output, output[-3000:]

    src = read_partitions(source_cluster, topic)
    dst = read_partitions(destination_cluster, remote)
    duplicates: dict[int, int] = {}
    for p, records in src.items():
        assert first_occurrences(dst[p]) == records, f"{remote}[{p}]: gap or disorder"
        duplicates[p] = len(dst[p]) - len(records)
        # kafka-mirror started exactly at MM2's stored position: it re-copied precisely what
        # MM2 had copied after its last offset flush (0 after a graceful stop), at most one
        # MM2 poll (max.poll.records 500)
        assert duplicates[p] == copied_by_mm2[p] - stored[(topic, p)], duplicates
        assert duplicates[p] <= 500, duplicates
    assert sum(len(r) for r in src.values()) == n1 + n2 + n3
    print(f"MM2 -> kafka-mirror takeover: {sum(duplicates.values())} duplicates "
          f"{duplicates}; {time.monotonic() - began:.0f}s")


def test_takeover_mm2_off_copies_from_the_beginning(
    source_cluster: LocalKafkaCluster, destination_cluster: LocalKafkaCluster,
    unique_topic: str, tmp_path: Path,
) -> None:
    """``mirror.takeover.mm2 = false``: MM2's positions (written as MM2 writes them) unused."""
    topic, parts = unique_topic, 2
    s, d = f"s{_letters()}", f"d{_letters()}"
    remote = f"{s}.{topic}"
    source_cluster.create_topic(topic, parts)
    produce(source_cluster, topic, _numbered(parts, 0, 200, "all"), **LINGER)
    props = _mm2_props(source_cluster, destination_cluster, topic, s, d)
    offsets_topic = mm2_offsets_topic(props, s, d)
    write_mm2_positions(_spec(destination_cluster, d), offsets_topic, s,
                        {(topic, 0): 60, (topic, 1): 40})
    config = _write_config(tmp_path / "mm2.properties", props, "mirror.takeover.mm2 = false\n")
    mirror = _run(config, tmp_path, "mirror")
    try:
        wait_for(lambda: _caught_up(source_cluster, topic, destination_cluster, remote), 240,
                 "kafka-mirror copied everything", mirror)
        exit_code, _ = mirror.terminate()
        assert exit_code == 0, mirror.output()[-3000:]
    finally:
        mirror.cleanup()
    assert "taking over from MirrorMaker 2" not in mirror.output()
    src = read_partitions(source_cluster, topic)
    dst = read_partitions(destination_cluster, remote)
    for p, records in src.items():
        assert dst[p] == records, f"{remote}[{p}] is not the whole source partition"


# ------------------------------------------------------------------ MM1 -> kafka-mirror


def test_takeover_from_mm1_group(
    source_cluster: LocalKafkaCluster, destination_cluster: LocalKafkaCluster,
    unique_topic: str, tmp_path: Path,
) -> None:
    began = time.monotonic()
    topic, group = f"mm1-{unique_topic}", f"mm1-group-{_letters()}"
    committed = {0: 150, 1: 90}
    source_cluster.create_topic(topic, 2)
    produce(source_cluster, topic, _numbered(2, 0, 400, "mm1"), **LINGER)
    # where MirrorMaker 1 stopped: its consumer group's committed offsets
    consumer = Consumer(source_cluster.client_config(**{"group.id": group}))
    try:
        consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in committed.items()],
                        asynchronous=False)
    finally:
        consumer.close()

    consumer_config = tmp_path / "consumer.properties"
    consumer_config.write_text(f"bootstrap.servers={source_cluster.bootstrap}\n"
                               f"group.id={group}\nauto.offset.reset=earliest\n")
    producer_config = tmp_path / "producer.properties"
    producer_config.write_text(f"bootstrap.servers={destination_cluster.bootstrap}\nacks=all\n")
    mirror = MirrorProcess(
        ["legacy", "--consumer.config", str(consumer_config),
         "--producer.config", str(producer_config), "--whitelist", topic,
         "--state-dir", str(tmp_path / "state"),
         "--spark-conf", "spark.driver.memory=768m", "--spark-conf", "spark.master=local[2]"],
        tmp_path / "legacy.log",
    ).start()
    try:
        wait_for(lambda: all(end_offsets(destination_cluster, topic).get(p, -1) >= 200 - o
                             for p, o in committed.items()),
                 240, "legacy mirror copied from the committed offsets", mirror)
        exit_code, _ = mirror.terminate()
        assert exit_code == 0, mirror.output()[-3000:]
    finally:
        mirror.cleanup()
    assert f"first run starts at the offsets group {group} committed" in mirror.output()

    src = read_partitions(source_cluster, topic)
    dst = read_partitions(destination_cluster, topic)
    for p, offset in committed.items():
        assert len(src[p]) == 200
        # nothing before the committed offset, nothing after it missing, nothing twice
        assert dst[p] == src[p][offset:], f"{topic}[{p}]"
    print(f"MM1 group takeover: {time.monotonic() - began:.0f}s")


# ------------------------------------------------------------------ kafka-mirror -> MM2


def test_way_back_to_mirrormaker2(
    source_cluster: LocalKafkaCluster, destination_cluster: LocalKafkaCluster,
    unique_topic: str, tmp_path: Path,
) -> None:
    began = time.monotonic()
    topic, parts = unique_topic, 2
    s, d = f"s{_letters()}", f"d{_letters()}"
    remote = f"{s}.{topic}"
    source_cluster.create_topic(topic, parts)
    produce(source_cluster, topic, _numbered(parts, 0, 200, "first"), **LINGER)
    props = _mm2_props(source_cluster, destination_cluster, topic, s, d)
    config = _write_config(tmp_path / "mm2.properties", props)

    mirror = _run(config, tmp_path, "mirror")
    try:
        wait_for(lambda: _caught_up(source_cluster, topic, destination_cluster, remote), 240,
                 "kafka-mirror copied 200", mirror)
        # and the flow recorded its positions in the state directory (export-mm2's source below;
        # the records are on the target a moment before that)
        ends = {(topic, p): end for p, end in end_offsets(source_cluster, topic).items()}
        wait_for(lambda: _state_positions(tmp_path / "state-mirror") == ends, 60,
                 "the positions recorded in the state directory", mirror)
        exit_code, _ = mirror.terminate()
        assert exit_code == 0, mirror.output()[-3000:]
    finally:
        mirror.cleanup()

    # no export step: kafka-mirror kept its positions where MM2 resumes from as it ran (the
    # last ones at its stop)
    offsets_topic = mm2_offsets_topic(props, s, d)
    copied = {(topic, p): end for p, end in end_offsets(source_cluster, topic).items()}
    kept = KeptPositions(_spec(destination_cluster, d), offsets_topic, s,
                         admin=None).read()  # type: ignore[arg-type]  # reads only
    assert {tp: k.position for tp, k in kept.items()} == copied, kept
    # kafka-mirror's own records: the target's end after them too (each record once, in order)
    assert {tp: k.target_end for tp, k in kept.items()} == copied, kept

    produce(source_cluster, topic, _numbered(parts, 200, 100, "second"), **LINGER)
    mm2 = StockMirrorMaker2(config, tmp_path / "mm2", heap=MM2_HEAP)
    try:
        mm2.start(wait_started=120)
        wait_for(lambda: _total(destination_cluster, remote) >= 300, 120, "MM2 copied 100")
        ends = {(topic, p): end for p, end in end_offsets(source_cluster, topic).items()}
        # MM2 committed its positions past every record: anything it would copy twice, it
        # copied before
        wait_for(lambda: read_mm2_positions(_spec(destination_cluster, d), offsets_topic, s)
                 == ends, 60, "MM2's positions committed at the source's end")
    finally:
        mm2.stop(timeout=60)
    src = read_partitions(source_cluster, topic)
    dst: dict[int, list[Record]] = read_partitions(destination_cluster, remote)
    for p, records in src.items():
        assert dst[p] == records, f"{remote}[{p}]: MM2 copied something twice or missed it"
    assert read_mm2_positions(_spec(destination_cluster, d), offsets_topic, s) == {
        (topic, p): len(records) for p, records in src.items()
    }
    # the explicit hand-back (positions from the state dir) writes what kafka-mirror copied
    run = subprocess.run(
        [*CLI, "offsets", "export-mm2", str(config), "--state-dir", str(tmp_path / "state-mirror")],
        capture_output=True, text=True, timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"{parts} partitions written to {offsets_topic} on {d}" in run.stdout
    kept = KeptPositions(_spec(destination_cluster, d), offsets_topic, s,
                         admin=None).read()  # type: ignore[arg-type]
    assert {tp: k.position for tp, k in kept.items()} == copied
    print(f"kafka-mirror -> MM2 (no export step): {time.monotonic() - began:.0f}s")
