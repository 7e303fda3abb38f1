"""A flow's positions kept in MM2's Connect offsets topic: what is written (MM2's record with the
target's end and the topic ID beside ``offset``), how often, and what a read returns; with
hand-written writer and reader in place of the cluster."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kafka_mirror.config.model import ClusterSpec
from kafka_mirror.kafka.internal_topics import InternalRecord, InternalTopicError
from kafka_mirror.mm2.offsets_records import mm2_source_key, mm2_source_value, parse_stored_offset
from kafka_mirror.state.kept_positions import KeptPositions

TOPIC = "mm2-offsets.A.internal"


class FakeWriter:
    def __init__(self, written: list[list[tuple[bytes | None, bytes | None]]],
                 fail: list[bool]) -> None:
        self.written = written
        self.fail = fail
        self.ensured: list[tuple[int, int]] = []
        self.waits: list[tuple[str, float | None]] = []
        self.cut = False

    def cut_short(self) -> None:
        self.cut = True

    def ensure_topic(self, admin: Any, replication_factor: int, partitions: int) -> int:
        self.ensured.append((replication_factor, partitions))
        return partitions

    def write(self, records: list[tuple[bytes | None, bytes | None]],
              timeout: float | None = None) -> int:
        self.waits.append(("write", timeout))
        if self.fail and self.fail.pop(0):
            raise InternalTopicError("positions not kept in", TOPIC, "B", "1 record(s) not "
                                     "acknowledged within 30s")
        self.written.append(list(records))
        return len(records)

    def close(self, timeout: float = 10.0) -> None:
        self.waits.append(("close", timeout))


class FakeReader:
    def __init__(self, records: list[InternalRecord]) -> None:
        self.records = records

    def read_latest(self) -> dict[bytes | None, InternalRecord]:
        latest: dict[bytes | None, InternalRecord] = {}
        for record in self.records:
            if record.value is None:
                latest.pop(record.key, None)
            else:
                latest[record.key] = record
        return latest


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _kept(written: list[Any], clock: Clock, interval_ms: int = 1_000,
          records: list[InternalRecord] | None = None, fail: list[bool] | None = None
          ) -> KeptPositions:
    return KeptPositions(
        ClusterSpec("B", {"bootstrap.servers": "127.0.0.1:2"}), TOPIC, "A", admin=None,  # type: ignore[arg-type]
        interval_ms=interval_ms, clock=clock,
        writer_factory=lambda *a, **k: FakeWriter(written, fail if fail is not None else []),
        reader_factory=lambda *a, **k: FakeReader(records or []),
    )


def test_the_newest_pair_per_partition_is_written_once_per_interval() -> None:
    written: list[Any] = []
    clock = Clock()
    kept = _kept(written, clock)
    assert kept.keep({("t", 0): (10, 110), ("t", 1): (5, 205)}, {"t": "idT"}) == 2
    clock.now += 0.4
    assert kept.keep({("t", 0): (20, 120)}, {"t": "idT"}) == 0  # within the interval: pending
    clock.now += 0.4
    assert kept.keep({("t", 0): (30, 130)}, {"t": "idT"}) == 0
    clock.now += 0.3
    assert kept.keep({}, {"t": "idT"}) == 1
    first, second = written
    assert first[0] == (mm2_source_key("A", "t", 0),
                        b'{"offset":9,"kafka-mirror.target.end":110,"kafka-mirror.topic.id":"idT"}')
    assert second == [(mm2_source_key("A", "t", 0),
                       b'{"offset":29,"kafka-mirror.target.end":130,"kafka-mirror.topic.id":"idT"}')]
    # MM2 reads these as its own: the offset of the last record copied
    assert parse_stored_offset(second[0][1] or b"") == 29
    assert kept.flush() == 0


def test_a_failed_write_keeps_the_pairs_for_the_next() -> None:
    written: list[Any] = []
    kept = _kept(written, Clock(), interval_ms=0, fail=[True])
    with pytest.raises(InternalTopicError, match=r"positions not kept in mm2-offsets\.A\.internal"):
        kept.keep({("t", 0): (10, 110)}, {})
    assert kept.keep({("t", 1): (4, 44)}, {}) == 2
    assert [json.loads(v or b"") for _, v in written[0]] == [
        {"offset": 9, "kafka-mirror.target.end": 110},
        {"offset": 3, "kafka-mirror.target.end": 44}]


def test_a_stop_writes_what_is_pending() -> None:
    written: list[Any] = []
    clock = Clock()
    kept = _kept(written, clock)
    kept.keep({("t", 0): (10, 110)}, {})
    kept.keep({("t", 0): (11, 111)}, {})
    kept.close()
    assert [json.loads(v or b"")["offset"] for _, v in written[-1]] == [10]


def test_a_stop_waits_at_most_what_the_stop_has_left() -> None:
    # the teardown's budget (kafka_mirror.runtime.teardown.StopBudget) bounds the last write and
    # the close; without one, the positions' own timeout
    for given, waited in ((2.5, 2.5), (None, 30.0), (99.0, 30.0)):
        kept = _kept([], Clock())
        kept.keep({("t", 0): (10, 110)}, {})  # written at once, with the positions' timeout
        kept.keep({("t", 0): (11, 111)}, {})  # pending: within the interval
        writer = kept._open()
        assert isinstance(writer, FakeWriter)
        kept.close(given)
        assert writer.waits == [("write", None), ("write", waited), ("close", waited)]


def test_the_close_after_a_failed_last_write_gets_what_the_write_left() -> None:
    # both clusters gone: the write spends the wait, the producer's close must not wait it again
    clock = Clock()
    kept = _kept([], clock)
    kept.keep({("t", 0): (10, 110)}, {})
    kept.keep({("t", 0): (11, 111)}, {})
    writer = kept._open()
    assert isinstance(writer, FakeWriter)

    def spent(records: Any, timeout: float | None = None) -> int:
        clock.now += 30.0
        raise InternalTopicError("positions not kept in", TOPIC, "B", "not acknowledged")

    writer.write = spent  # type: ignore[method-assign]
    kept.close(30.0)
    assert writer.waits[-1] == ("close", 0.0)


def test_a_read_returns_the_last_record_per_partition_of_this_source() -> None:
    def rec(offset: int, key: bytes, value: bytes | None) -> InternalRecord:
        return InternalRecord(0, offset, key, value)

    key0, key1, key2 = (mm2_source_key("A", "t", p) for p in range(3))
    records = [
        rec(0, key0, b'{"offset":4,"kafka-mirror.target.end":40,"kafka-mirror.topic.id":"x"}'),
        rec(1, key0, b'{"offset":9,"kafka-mirror.target.end":90,"kafka-mirror.topic.id":"x"}'),
        rec(2, key1, mm2_source_value(7)),  # MM2's own: no target end
        rec(3, key2, b'{"offset":3}'),
        rec(4, key2, None),  # a tombstone: no position
        rec(5, mm2_source_key("C", "t", 0), mm2_source_value(99)),  # another source cluster
        rec(6, b'["MirrorCheckpointConnector",{}]', b'{"offset":1}'),
    ]
    found = _kept([], Clock(), records=records).read()
    assert {tp: (k.position, k.target_end, k.topic_id) for tp, k in found.items()} == {
        ("t", 0): (10, 90, "x"), ("t", 1): (7, None, None)}


def test_the_topic_is_created_with_the_flow_s_layout() -> None:
    """offset.storage.replication.factor and .partitions reach the topic's creation (MM2's
    defaults otherwise: the broker's replication factor, 25 partitions)."""
    ensured: list[tuple[int, int]] = []

    def writer(*_: Any, **__: Any) -> FakeWriter:
        made = FakeWriter([], [])
        made.ensured = ensured
        return made

    for layout, expected in (({}, (-1, 25)), ({"replication_factor": 3, "partitions": 5}, (3, 5))):
        kept = KeptPositions(
            ClusterSpec("B", {"bootstrap.servers": "127.0.0.1:2"}), TOPIC, "A", admin=None,  # type: ignore[arg-type]
            interval_ms=0, writer_factory=writer, **layout)  # type: ignore[arg-type]
        kept.keep({("t", 0): (1, 1)}, {})
        assert ensured.pop() == expected


def test_a_stop_cuts_the_drains_writes_short_and_the_close_still_writes() -> None:
    # the writer made after the stop began is cut short too; the close's write is given its
    # timeout (the writer waits a given timeout whole: kafka_mirror.kafka.internal_topics)
    for opened_before in (True, False):
        kept = _kept([], Clock())
        if opened_before:
            kept.keep({("t", 0): (10, 110)}, {})
        kept.cut_short()
        kept.keep({("t", 0): (11, 111)}, {})
        kept.keep({("t", 0): (12, 112)}, {})  # pending: within the interval
        writer = kept._open()
        assert isinstance(writer, FakeWriter)
        assert writer.cut
        kept.close(7.0)
        assert writer.waits[-2:] == [("write", 7.0), ("close", 7.0)]
