"""MM2's source positions as records (:mod:`kafka_mirror.control.mm2_positions`): what is written
for a set of positions, and which stored records a read turns into positions."""

from __future__ import annotations

import logging

import pytest

from kafka_mirror.control.mm2_positions import _source_position, position_records
from kafka_mirror.kafka.internal_topics import InternalRecord
from kafka_mirror.mm2.offsets_records import mm2_source_key

TOPIC = "mm2-offsets.A.internal"


def _record(key: bytes | None, value: bytes | None) -> InternalRecord:
    return InternalRecord(3, 17, key, value)


def test_position_records_sorted_with_tombstone_for_zero() -> None:
    records = position_records("A", {("orders", 1): 5, ("orders", 0): 0})
    assert records == [
        (mm2_source_key("A", "orders", 0), None),
        (mm2_source_key("A", "orders", 1), b'{"offset":4}'),
    ]


@pytest.mark.parametrize("position", [-1, True, 1.5])
def test_position_records_refuse_bad_positions(position: object) -> None:
    with pytest.raises(ValueError, match="orders-0"):
        position_records("A", {("orders", 0): position})  # type: ignore[dict-item]


def test_source_position_of_own_cluster() -> None:
    record = _record(mm2_source_key("A", "orders", 2), b'{"offset":41}')
    assert _source_position(TOPIC, "A", record) == (("orders", 2), 42)
    assert _source_position(TOPIC, "other", record) is None


def test_source_position_negative_is_no_position() -> None:
    assert _source_position(TOPIC, "A", _record(mm2_source_key("A", "t", 0), b'{"offset":-1}')) \
        is None


def test_source_position_other_connector_silently_ignored(caplog: pytest.LogCaptureFixture) -> None:
    record = _record(b'["MirrorCheckpointConnector",{"x":1}]', b'{"offset":1}')
    with caplog.at_level(logging.WARNING):
        assert _source_position(TOPIC, "A", record) is None
    assert not caplog.records


@pytest.mark.parametrize(
    ("key", "value", "warning"),
    [
        (b"not json", b'{"offset":1}', "is not a Connect offsets key"),
        (b'["MirrorSourceConnector", {"cluster":"A","partition":0,"topic":"t"}]',
         b'{"offset":1}', "is not byte-identical"),
        (mm2_source_key("A", "t", 0), b'{"offset":"1"}', 'value is not {"offset":<integer>}'),
    ],
)
def test_source_position_skips_what_mm2_would_not_use(
    key: bytes, value: bytes, warning: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        assert _source_position(TOPIC, "A", _record(key, value)) is None
    assert f"{TOPIC} partition 3 offset 17: skipped" in caplog.text
    assert warning in caplog.text


def test_a_position_kafka_mirror_kept_is_not_taken_for_mm2s() -> None:
    key = mm2_source_key("A", "t", 0)
    kept = InternalRecord(0, 0, key, b'{"offset":9,"kafka-mirror.target.end":90}')
    assert _source_position(TOPIC, "A", kept) is None
    mm2 = InternalRecord(0, 1, key, b'{"offset":9}')
    assert _source_position(TOPIC, "A", mm2) == (("t", 0), 10)
