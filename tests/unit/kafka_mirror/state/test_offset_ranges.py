"""Offset translation rules and MirrorMaker 2's record formats, without a broker.

The byte examples are those of ../shared/reference/mm2-internals.md (run against Kafka's jars);
tests/engine/test_failover.py reads our records back with Kafka's own connect-mirror-client.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from kafka_mirror.config.mm2 import mm2_from_text
from kafka_mirror.engine.batch_writer import partition_copies
from kafka_mirror.errors import ConfigError
from kafka_mirror.mm2.policy import DefaultReplicationPolicy, IdentityReplicationPolicy
from kafka_mirror.mm2.records import Checkpoint, Heartbeat, OffsetSync
from kafka_mirror.state import offset_ranges
from kafka_mirror.state.offset_ranges import CopiedRange, OffsetRanges, PartitionRanges

BASE = (
    "clusters = A, B\nA.bootstrap.servers = a:1\nB.bootstrap.servers = b:1\n"
    "A->B.enabled = true\n"
)


def test_record_bytes_match_kafka() -> None:
    sync = OffsetSync("t", 0, 5, 7)
    assert sync.key().hex() == "00017400000000"
    assert sync.value().hex() == "0000000000000005" "0000000000000007"
    checkpoint = Checkpoint("g", "A.t", 1, 10, 8, "")
    assert checkpoint.key().hex() == "0001670003412e7400000001"
    assert checkpoint.value().hex() == "0000" "000000000000000a" "0000000000000008" "0000"
    beat = Heartbeat("A", "B", 1_700_000_000_000)
    assert beat.key().hex() == "000141" "000142"
    assert beat.value().hex() == "0000" "0000018bcfe56800"
    for record in (sync, checkpoint, beat):
        assert type(record).decode(record.key(), record.value() + b"trailing") == record


def test_internal_topic_names_follow_the_policy() -> None:
    policy = DefaultReplicationPolicy()
    assert policy.offset_syncs_topic("B") == "mm2-offset-syncs.B.internal"
    assert policy.checkpoints_topic("A") == "A.checkpoints.internal"
    assert policy.is_internal_topic("A.checkpoints.internal")
    assert policy.is_internal_topic("mm2-offsets.A.internal")
    assert policy.is_internal_topic("__consumer_offsets") and policy.is_internal_topic(".x")
    assert not policy.is_internal_topic("heartbeats")
    assert not policy.is_internal_topic("foo.internal")
    assert policy.is_heartbeats_topic("B.A.heartbeats") and policy.is_heartbeats_topic("heartbeats")
    underscore = DefaultReplicationPolicy("_")
    assert underscore.offset_syncs_topic("B") == "mm2-offset-syncs_B_internal"
    assert not underscore.is_checkpoints_topic("A.checkpoints.internal")
    assert DefaultReplicationPolicy("_", False).checkpoints_topic("A") == "A.checkpoints.internal"
    # Java's split: ".t" comes from "", "t." from nobody
    assert policy.topic_source(".t") is None or policy.topic_source(".t") == ""
    assert policy.topic_source("t.") is None
    identity = IdentityReplicationPolicy()
    assert identity.format_remote_topic("A", "orders") == "orders"
    assert identity.format_remote_topic("A", "heartbeats") == "A.heartbeats"
    assert identity.topic_source("A.heartbeats") == "A"


def test_exact_ranges_translate_one_to_one_and_merge() -> None:
    ranges = PartitionRanges()
    ranges.add(CopiedRange(0, 300, 0, 300, True))
    ranges.add(CopiedRange(300, 600, 300, 600, True))
    assert len(ranges.ranges) == 1
    assert ranges.translate(0) == 0 and ranges.translate(437) == 437
    assert ranges.translate(600) == 600 and ranges.translate(900) == 600  # ahead: next copy


def test_inexact_batch_translates_to_its_start() -> None:
    ranges = PartitionRanges()
    ranges.add(CopiedRange(0, 100, 10, 110, True))
    ranges.add(CopiedRange(100, 200, 110, 190, False))  # 20 offsets were markers
    ranges.add(CopiedRange(200, 300, 190, 290, True))
    assert ranges.translate(150) == 110
    assert ranges.translate(100) == 110
    assert ranges.translate(250) == 240
    assert ranges.translate(5) == 15


def test_replayed_batch_prefers_the_newest_copy() -> None:
    ranges = PartitionRanges()
    ranges.add(CopiedRange(0, 500, 0, 500, True))  # written, then the process died
    ranges.add(CopiedRange(0, 500, 500, 1000, True))  # replayed after the restart
    assert ranges.translate(250) == 750
    assert ranges.translate(500) == 1000


def test_unknown_history_gives_no_translation() -> None:
    ranges = OffsetRanges()
    ranges.add("t", 0, CopiedRange(1000, 2000, 0, 1000, True))
    assert ranges.translate("t", 0, 10) is None
    assert ranges.translate("t", 1, 10) is None


@pytest.mark.parametrize("max_ranges", [1_000, 3])
def test_translation_never_skips_against_a_simulated_target(
    max_ranges: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Random batches with offset gaps, replays and foreign writes: for every offset, no source
    record at or after it is only on the target before the translated position (also when old
    ranges are merged to bound memory)."""
    monkeypatch.setattr(offset_ranges, "MAX_RANGES", max_ranges)
    rng = random.Random(7)
    for _round in range(30):
        target: list[int | None] = []  # source offset of each target record (None: foreign)
        ranges = PartitionRanges()
        source_records = sorted(rng.sample(range(400), 300))  # offsets that are records
        position = 0
        while position < 400:
            size = rng.randint(1, 60)
            start, end = position, min(400, position + size)
            if rng.random() < 0.15:
                target.append(None)  # someone else wrote to the partition
            before = len(target)
            batch = [o for o in source_records if start <= o < end]
            target.extend(batch)
            if rng.random() < 0.1:
                target.append(None)
            after = len(target)
            gap_free = len(batch) == end - start
            ranges.add(CopiedRange(start, end, before, after,
                                   gap_free and after - before == end - start))
            if rng.random() < 0.2 and position > 0:  # crash: replay from an earlier commit
                position = rng.randint(max(0, start - 60), start)
            else:
                position = end
        for group_offset in range(0, 401):
            translated = ranges.translate(group_offset)
            assert translated is not None
            wanted = [o for o in source_records if o >= group_offset]
            seen = {o for o in target[translated:] if o is not None}
            assert set(wanted) <= seen, (group_offset, translated)


def test_partition_copies_exact_per_partition() -> None:
    flow = mm2_from_text(BASE).flows[0]
    start = {("t", 0): 0, ("t", 1): 10}
    end = {("t", 0): 100, ("t", 1): 30}
    before = {("A.t", 0): 5, ("A.t", 1): 0}
    after = {("A.t", 0): 105, ("A.t", 1): 20}
    copies = partition_copies(flow, start, end, before, after, records=120)
    assert [c.copied.exact for c in copies] == [True, True]
    # 119 records but 120 target offsets: something else wrote; nothing is taken as exact
    copies = partition_copies(flow, start, end, before, after, records=119)
    assert [c.copied.exact for c in copies] == [False, False]
    # partition 1 had 5 offsets without records (transaction markers): only it is inexact
    after_gap = {("A.t", 0): 105, ("A.t", 1): 15}
    copies = partition_copies(flow, start, end, before, after_gap, records=115)
    assert [c.copied.exact for c in copies] == [True, False]


def test_ranges_survive_a_restart(tmp_path: Path) -> None:
    ranges = OffsetRanges()
    ranges.add("t", 3, CopiedRange(0, 10, 4, 14, True))
    ranges.save(tmp_path / "r.json")
    again = OffsetRanges.load(tmp_path / "r.json")
    assert again.translate("t", 3, 5) == 9


def test_group_filter_and_bad_regex() -> None:
    flow = mm2_from_text(BASE + "groups = app-.*\ngroups.exclude = app-test\n").flows[0]
    assert flow.should_checkpoint("app-orders")
    assert not flow.should_checkpoint("app-test")
    assert not flow.should_checkpoint("kafka-mirror.A_to_B")
    assert not mm2_from_text(BASE).flows[0].should_checkpoint("console-consumer-1")
    with pytest.raises(ConfigError) as err:
        mm2_from_text(BASE + "groups = app-(\n")
    assert "groups" in str(err.value) and "app-(" in str(err.value)


def test_identity_both_ways_over_the_same_topics_is_refused() -> None:
    identity = (
        "replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy\n"
    )
    with pytest.raises(ConfigError) as err:
        mm2_from_text(BASE + identity + "B->A.enabled = true\ntopics = orders.*\n")
    assert "back and forth" in str(err.value)
    config = mm2_from_text(
        BASE + identity + "B->A.enabled = true\nA->B.topics = a\\\\..*\nB->A.topics = b\\\\..*\n"
    )
    assert len(config.flows) == 2


def test_unsupported_keys_are_reported_with_the_reason() -> None:
    config = mm2_from_text(BASE + "key.converter = x\ntasks.max = 4\n")
    notices = "\n".join(config.notices)
    assert "'key.converter' not supported: records are copied as bytes" in notices
    assert "'tasks.max' not supported" in notices


def test_offset_syncs_location_and_check_config_listing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from kafka_mirror.cli.main import main
    from kafka_mirror.control.offset_syncs import offset_syncs_location

    flow = mm2_from_text(BASE).flows[0]
    cluster, topic = offset_syncs_location(flow)
    assert (cluster.alias, topic) == ("A", "mm2-offset-syncs.B.internal")
    flow = mm2_from_text(BASE + "offset-syncs.topic.location = target\n").flows[0]
    cluster, topic = offset_syncs_location(flow)
    assert (cluster.alias, topic) == ("B", "mm2-offset-syncs.A.internal")
    with pytest.raises(ConfigError):
        mm2_from_text(BASE + "offset-syncs.topic.location = elsewhere\n")

    config = tmp_path / "mm2.properties"
    config.write_text(BASE + "groups = app-.*\nsync.group.offsets.enabled = true\n"
                      "sync.topic.acls.enabled = false\n", encoding="utf-8")
    assert main(["check-config", str(config)]) == 0
    out = capsys.readouterr().out
    assert ("offset syncs: mm2-offset-syncs.B.internal on A, about every second (acknowledged "
            "records)") in out
    assert "checkpoints: groups app-.* excluding console-consumer-.*" in out
    assert "into A.checkpoints.internal on B" in out
    assert "group offsets: committed on B every 60 s for absent or empty groups" in out
    assert "topic ACLs: not synced" in out
    assert "heartbeats: every 1 s into heartbeats on B" in out
    assert "heartbeats also for pairs that mirror nothing (as MirrorMaker 2 does): B->A" in out


def test_a_range_recorded_again_is_kept_once() -> None:
    """A restart that counts the same cut batch twice (the first batch after it found late
    records and refused itself) records the skipped range twice: kept once, the ranges stay
    seamless; a range that moves on is added as before."""
    from kafka_mirror.state.offset_ranges import CopiedRange, PartitionRanges

    ranges = PartitionRanges()
    ranges.add(CopiedRange(0, 4000, 0, 3885, True))
    skipped = CopiedRange(4000, 6299, 3885, 6106, False)
    ranges.add(skipped)
    ranges.add(skipped)
    assert ranges.ranges == [CopiedRange(0, 4000, 0, 3885, True), skipped]
    ranges.add(CopiedRange(6299, 6400, 6106, 6207, True))
    assert ranges.ranges[-1] == CopiedRange(6299, 6400, 6106, 6207, True)
    assert len(ranges.ranges) == 3


def test_ranges_from_syncs_keep_the_last_run_below_the_kept_position() -> None:
    from kafka_mirror.state.offset_ranges import ranges_from_syncs

    # an earlier incarnation (syncs that go back), a sync written twice, one past the kept pair
    syncs = [(500, 500), (900, 900), (0, 1000), (0, 1000), (10, 1010), (10, 1020), (80, 1090)]
    facts = ranges_from_syncs(syncs, 50, 1060)
    assert [(r.source_start, r.target_start) for r in facts] == [
        (0, 1000), (10, 1010), (10, 1020), (50, 1060)]
    ranges = OffsetRanges()
    ranges.merge("t", 0, facts)
    assert ranges.translate("t", 0, 0) == 1000
    assert ranges.translate("t", 0, 10) == 1020  # the later copy: every later record follows it
    assert ranges.translate("t", 0, 30) == 1021
    assert ranges.translate("t", 0, 60) == 1060
    assert ranges_from_syncs([], 7, 9) == [CopiedRange(7, 7, 9, 9, False)]


def test_a_sync_stated_again_by_a_new_writer_keeps_the_earlier_ones() -> None:
    """A takeover proves records its predecessor copied past the positions it kept and writes
    their syncs: they go back in the topic, but say what earlier syncs say (a rewind resets)."""
    from kafka_mirror.state.offset_ranges import ranges_from_syncs

    # b's syncs up to 10249; a, taking over from b's position kept at 9917, proves 9917..10333
    syncs = [(7250, 7250), (8000, 8000), (9917, 9917), (10249, 10249), (9917, 9917),
             (10333, 10333), (10334, 10334)]
    facts = ranges_from_syncs(syncs, 10400, 10400)
    assert [r.source_start for r in facts] == [7250, 8000, 9917, 10249, 10333, 10334, 10400]
    # between two syncs on the upstream side, but below the earlier one downstream: a rewind
    rewound = ranges_from_syncs([(0, 100), (50, 150), (20, 90), (30, 100)], 40, 110)
    assert [(r.source_start, r.target_start) for r in rewound] == [(20, 90), (30, 100),
                                                                   (40, 110)]


def test_merged_facts_sit_among_the_partitions_own_ranges_in_source_order() -> None:
    ranges = OffsetRanges()
    ranges.add("t", 0, CopiedRange(100, 200, 1100, 1200, True))
    ranges.merge("t", 0, [CopiedRange(10, 11, 1010, 1011, True),
                          CopiedRange(300, 300, 1300, 1300, False)])
    assert [r.source_start for _, pr in ranges.items() for r in pr.ranges] == [10, 100, 300]
    assert ranges.translate("t", 0, 150) == 1150 and ranges.translate("t", 0, 400) == 1300
    assert ranges.dirty
