"""State files saved after every real-time drain keep their rows encoded between saves and grow
by the rows that changed (:class:`kafka_mirror.state.files.EncodedRows`): the file reads as the
whole array, whatever moved, was dropped or was read back; it is written whole again once the
appended rows outweigh the array; a torn last line costs that line only."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import pytest

from kafka_mirror.engine.acked_positions import AckedPositions
from kafka_mirror.engine.exactly_once import TargetEnds
from kafka_mirror.state.files import EncodedRows, encode, read_json


def _read(path: Path) -> Any:
    """The file's rows as every state reader reads them."""
    return read_json(path, lambda rows: rows, "nothing")


def test_rows_are_the_whole_array_in_key_order() -> None:
    rows = EncodedRows()
    rows.set(("b", 0), {"x": 1})
    rows.set(("a", 10), {"x": 2})
    rows.set(("a", 2), {"x": 3})
    rows.set(("b", 0), {"x": 4})
    rows.drop(("a", 10))
    rows.drop(("never", 0))
    assert rows.text() == encode([{"x": 3}, {"x": 4}])
    rows.clear()
    assert rows.text() == "[]"


def test_target_ends_file_follows_records_drops_and_reloads(tmp_path: Path) -> None:
    path = tmp_path / "target-ends.json"
    ends = TargetEnds(path)
    ends.record({("t", 1): (10, 100), ("t", 0): (5, 50), ("u", 0): (1, 1)})
    ends.record({("t", 0): (7, 52)})
    ends.drop_topic("u")
    expected = [{"topic": "t", "partition": 0, "pairs": [[5, 50], [7, 52]]},
                {"topic": "t", "partition": 1, "pairs": [[10, 100]]}]
    assert _read(path) == expected
    again = TargetEnds(path)
    again.record({("t", 1): (11, 101)})
    expected[1]["pairs"] = [[10, 100], [11, 101]]
    assert _read(path) == expected
    assert again.target_end(("t", 0), 7) == 52


def test_acknowledged_positions_file_follows_moves_drops_and_reloads(tmp_path: Path) -> None:
    path = tmp_path / "acked-positions.json"
    acked = AckedPositions(path)
    acked.seed({("t", 1): 4, ("t", 0): 9, ("u", 0): 1})
    acked.seed({("t", 1): 6, ("t", 0): 3})  # never back
    acked.drop_topic("u")
    assert _read(path) == [{"topic": "t", "partition": 0, "offset": 9},
                                            {"topic": "t", "partition": 1, "offset": 6}]
    again = AckedPositions(path)
    again.seed({("t", 0): 10})
    assert again.positions() == {("t", 0): 10, ("t", 1): 6}
    assert _read(path)[0] == {"topic": "t", "partition": 0, "offset": 10}
    again.clear()
    assert not path.exists()
    again.seed({("v", 0): 2})
    assert _read(path) == [{"topic": "v", "partition": 0, "offset": 2}]


def test_offset_ranges_file_is_the_whole_encoding_after_adds_merges_drops_and_reloads(
        tmp_path: Path) -> None:
    from kafka_mirror.state.offset_ranges import CopiedRange, OffsetRanges

    def whole(ranges: OffsetRanges) -> str:
        return encode([{"topic": t, "partition": p, "ranges": [r.as_dict() for r in pr.ranges]}
                       for (t, p), pr in sorted(ranges.items())])

    path = tmp_path / "offset-ranges.json"
    ranges = OffsetRanges()
    ranges.add("t", 1, CopiedRange(0, 10, 100, 110, True))
    ranges.add("t", 0, CopiedRange(0, 5, 50, 55, True))
    ranges.add("u", 0, CopiedRange(0, 1, 0, 1, True))
    ranges.save(path)
    assert path.read_text() == whole(ranges)  # the first save writes the file whole
    ranges.add("t", 0, CopiedRange(5, 9, 55, 59, True))
    ranges.merge("t", 1, [CopiedRange(20, 30, 130, 140, True)])
    ranges.save(path)
    assert path.read_text().count("\n") == 2  # the two rows changed, appended
    latest = {(r["topic"], r["partition"]): r for r in _read(path)}  # a later row of a key wins
    assert encode([latest[k] for k in sorted(latest)]) == whole(ranges)
    ranges.drop_topic("u")
    ranges.save(path)
    assert path.read_text() == whole(ranges)  # a row gone: written whole
    again = OffsetRanges.load(path)
    assert again.translate("t", 0, 7) == 57
    again.add("v", 3, CopiedRange(0, 2, 0, 2, True))
    again.save(path)  # the first save after a load encodes every partition
    assert path.read_text() == whole(again) and '"topic":"t"' in path.read_text()


def test_rows_changed_are_appended_until_they_outweigh_the_array(tmp_path: Path) -> None:
    path = tmp_path / "rows.json"
    rows = EncodedRows()
    for partition in range(10):
        rows.set(("t", partition), {"p": partition, "at": 0})
    rows.save(path, durable=True)
    whole = path.stat().st_size
    assert path.read_text() == rows.text()
    appends = 0
    while path.read_text().count("\n") == appends:
        appends += 1
        rows.set(("t", appends % 10), {"p": appends % 10, "at": appends})
        rows.save(path, durable=True)
        assert path.read_text().count("\n") in (appends, 0)
        assert {(r["p"], r["at"]) for r in _by_key(_read(path))} == {
            (r["p"], r["at"]) for r in json.loads(rows.text())}
    # written whole again once the appended lines would outweigh the array: at most twice its size
    assert path.read_text() == rows.text() and appends > 5
    assert path.stat().st_size <= 2 * whole
    rows.save(path)  # nothing changed: nothing written
    assert path.read_text() == rows.text()


def _by_key(rows: list[dict[str, int]]) -> list[dict[str, int]]:
    latest = {r["p"]: r for r in rows}
    return [latest[p] for p in sorted(latest)]


def test_a_torn_last_line_is_left_out_with_a_warning(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "target-ends.json"
    ends = TargetEnds(path)
    ends.record({("t", 0): (5, 50), ("t", 1): (10, 100)})
    ends.record({("t", 0): (7, 52)})
    with path.open("a", encoding="utf-8") as out:  # a crash during the next record
        out.write('\n{"topic":"t","partition":1,"pai')
    with caplog.at_level(logging.WARNING):
        again = TargetEnds(path)
    assert f"{path}: its last line is torn" in caplog.text
    assert again.target_end(("t", 0), 7) == 52 and again.target_end(("t", 1), 10) == 100
    again.record({("t", 1): (11, 101)})  # the first save after a load writes the file whole
    assert path.read_text().count("\n") == 0 and TargetEnds(path).target_end(("t", 1), 11) == 101


def test_a_torn_line_before_the_last_makes_the_file_unreadable(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "acked-positions.json"
    path.write_text('[{"topic":"t","partition":0,"offset":1}]\n{"topic":"t","par\n'
                    '{"topic":"t","partition":0,"offset":3}', encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        assert AckedPositions(path).positions() == {}
    assert f"{path} is not readable" in caplog.text


def test_a_file_removed_meanwhile_is_written_whole(tmp_path: Path) -> None:
    path = tmp_path / "rows.json"
    rows = EncodedRows()
    rows.set(("t", 0), {"x": 1})
    rows.save(path)
    os.unlink(path)
    rows.set(("t", 1), {"x": 2})
    rows.save(path)
    assert path.read_text() == rows.text()
