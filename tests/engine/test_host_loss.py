"""No single host holds the mirror (issue 28): a flow's positions and the target's ends after them
are kept in Kafka, in MirrorMaker 2's Connect offsets topic on the target, so that a host lost with
its state dir is replaced by a mirror with an empty one that neither copies the log again nor
writes a record twice.

The first mirror is killed (kill -9) while every partition holds part of a batch Spark never
committed (the destination throttles its producer, as in test_exactly_once.py); its state dir is
then deleted, and a second mirror starts with an empty state dir of its own. It must resume from
the positions kept in Kafka, prove from the target ends kept with them what the cut batch already
wrote, and leave every source record on the target exactly once, in order.
"""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

import pytest
from cut_batches import (
    MIRROR_ONLY,
    SKIPPED,
    assert_each_once,
    committed_everything,
    committed_positions,
    committed_records,
    kill_when,
    produce_transactional,
    restart_until,
    settled_ends,
)
from mirror_process import end_offsets, mm2_properties, read_with_offsets

from kafka_mirror_testing.localcluster import LocalKafkaCluster

pytestmark = [pytest.mark.kafka, pytest.mark.spark]
OFFSETS_TOPIC = "mm2-offsets.source.internal"
RESUMED = re.compile(r"the state dir holds no committed batch: (\d+) partitions resume from the "
                     rf"positions kept in {re.escape(OFFSETS_TOPIC)} on cluster 'destination'")


def test_a_host_lost_with_its_state_dir_is_replaced_exactly_once(
    source_cluster: LocalKafkaCluster, destination_cluster: LocalKafkaCluster,
    unique_topic: str, tmp_path: Path,
) -> None:
    partitions, per_partition = 3, 4_000
    topic, target_topic = unique_topic, f"source.{unique_topic}"
    source_cluster.create_topic(topic, partitions)
    produce_transactional(source_cluster, topic, partitions, per_partition)
    config = tmp_path / "mm2.properties"
    config.write_text(mm2_properties(
        source_cluster, destination_cluster,
        f"topics = {topic}\nmirror.max.records.per.batch = 4000\n" + MIRROR_ONLY))
    lost, replacement = tmp_path / "lost-host-state", tmp_path / "new-host-state"
    total = partitions * per_partition
    source = read_with_offsets(source_cluster, topic)

    def cut_and_kept() -> bool:
        """A committed batch, every partition writing the next one, positions kept in Kafka."""
        positions = committed_positions(lost, topic)
        if not positions or not sum(end_offsets(destination_cluster, OFFSETS_TOPIC).values()):
            return False
        committed = committed_records(source, positions)
        ends = end_offsets(destination_cluster, target_topic)
        return all(ends.get(p, 0) > committed[p] for p in range(partitions))

    began = kill_when(["run", str(config), "--state-dir", str(lost)], tmp_path / "mirror-1.log",
                      destination_cluster, cut_and_kept,
                      "a batch cut short with positions kept in Kafka")
    cut = settled_ends(destination_cluster, target_topic)
    assert 0 < sum(cut.values()) < total, cut
    shutil.rmtree(lost)  # the host is gone, and its disk with it

    second = restart_until(["run", str(config), "--state-dir", str(replacement)],
                           tmp_path / "mirror-2.log", destination_cluster, target_topic, total,
                           committed_everything(source_cluster, topic, replacement))
    took = time.monotonic() - began
    log = second.output()
    resumed = RESUMED.search(log)
    # the flow's partitions (and those of the heartbeats topic, mirrored too)
    assert resumed and int(resumed[1]) >= partitions, log[-3000:]
    assert not re.search(r"resumes at-least-once", log), log[-3000:]
    skipped = sum(int(m["records"]) for m in SKIPPED.finditer(log))
    assert assert_each_once(source_cluster, topic, destination_cluster, target_topic) == total
    print(f"host lost (kill -9, state dir deleted) with {sum(cut.values())} of {total} records "
          f"on the target; the replacement (empty state dir) resumed {partitions} partitions "
          f"from the positions kept in {OFFSETS_TOPIC}, skipped {skipped} records the cut "
          f"batches had written: 0 lost, 0 duplicates; kill to everything across {took:.0f} s")
