"""Offset syncs after every batch or drain (kafka_mirror.control.offset_syncs): two per partition
that maps one to one, none for one that does not, and none from an instance that lost the flow's
lease (what a resumed zombie drains late would come after its successor's syncs)."""

from __future__ import annotations

from typing import Any

from kafka_mirror.config.mm2 import mm2_from_text
from kafka_mirror.control.offset_syncs import OffsetSyncWriter
from kafka_mirror.engine.realtime import parse_ranges
from kafka_mirror.mm2.records import OffsetSync

FLOW = mm2_from_text("clusters = A, B\nA.bootstrap.servers = 127.0.0.1:1\n"
                     "B.bootstrap.servers = 127.0.0.1:2\nA->B.enabled = true\n"
                     "mirror.mode = realtime\n").flows[0]


class Writer:
    def __init__(self) -> None:
        self.syncs: list[OffsetSync] = []

    def write(self, records: Any, partition: int = 0) -> int:
        self.syncs += [OffsetSync.decode(key, value) for key, value in records]
        return len(self.syncs)


def _writer(held: list[bool] | None = None) -> tuple[OffsetSyncWriter, Writer]:
    syncs = OffsetSyncWriter(FLOW, {"A": None}, None,  # type: ignore[dict-item]
                             None if held is None else (lambda: held[-1]))
    fake = Writer()
    syncs.writer = fake  # type: ignore[assignment]
    return syncs, fake


DRAIN = ("A.orders\t0\t10\t13\t100\t103\t1\t3\t30\t1\n"  # maps one to one
         "A.orders\t1\t0\t9\t0\t5\t0\t5\t50\t1\n")  # gaps: no sync


def test_each_one_to_one_copy_gives_its_first_and_last_record() -> None:
    syncs, fake = _writer()
    syncs.on_written(parse_ranges(FLOW, {"orders": 2}, DRAIN))
    assert [(s.topic, s.partition, s.upstream_offset, s.offset) for s in fake.syncs] == [
        ("orders", 0, 10, 100), ("orders", 0, 12, 102)]


def test_an_instance_that_lost_the_lease_writes_no_syncs() -> None:
    held = [True]
    syncs, fake = _writer(held)
    syncs.on_written(parse_ranges(FLOW, {"orders": 2}, DRAIN))
    held.append(False)
    syncs.on_written(parse_ranges(FLOW, {"orders": 1}, "A.orders\t0\t13\t20\t103\t110\t1\t7\t"
                                                       "70\t1\n"))
    assert len(fake.syncs) == 2


def test_a_long_copy_gets_a_sync_every_offset_lag_max_records() -> None:
    """As MirrorMaker 2 (offset.lag.max, default 100): a copy of 250 records gets syncs at its
    first record, every 101 records after it, and its last; 0 means every record."""
    syncs, fake = _writer()
    syncs.on_written(parse_ranges(FLOW, {"orders": 1}, "A.orders\t0\t1000\t1250\t5000\t5250\t1\t"
                                                       "250\t2500\t1\n"))
    assert [(s.upstream_offset, s.offset) for s in fake.syncs] == [
        (1000, 5000), (1101, 5101), (1202, 5202), (1249, 5249)]
    every = mm2_from_text("clusters = A, B\nA.bootstrap.servers = 127.0.0.1:1\n"
                          "B.bootstrap.servers = 127.0.0.1:2\nA->B.enabled = true\n"
                          "offset.lag.max = 0\n").flows[0]
    dense = OffsetSyncWriter(every, {"A": None}, None)  # type: ignore[dict-item]
    dense.writer = Writer()  # type: ignore[assignment]
    dense.on_written(parse_ranges(every, {"orders": 1}, "A.orders\t0\t7\t10\t0\t3\t1\t3\t30\t1\n"))
    assert [s.upstream_offset for s in dense.writer.syncs] == [7, 8, 9]  # type: ignore[attr-defined]
