"""State files rewritten after every real-time drain keep their rows encoded between saves
(:class:`kafka_mirror.state.files.EncodedRows`): the file is the one a whole encoding gives,
whatever moved, was dropped or was read back."""

from __future__ import annotations

import json
from pathlib import Path

from kafka_mirror.engine.acked_positions import AckedPositions
from kafka_mirror.engine.exactly_once import TargetEnds
from kafka_mirror.state.files import EncodedRows, encode


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
    assert json.loads(path.read_text()) == expected
    again = TargetEnds(path)
    again.record({("t", 1): (11, 101)})
    expected[1]["pairs"] = [[10, 100], [11, 101]]
    assert json.loads(path.read_text()) == expected
    assert again.target_end(("t", 0), 7) == 52


def test_acknowledged_positions_file_follows_moves_drops_and_reloads(tmp_path: Path) -> None:
    path = tmp_path / "acked-positions.json"
    acked = AckedPositions(path)
    acked.seed({("t", 1): 4, ("t", 0): 9, ("u", 0): 1})
    acked.seed({("t", 1): 6, ("t", 0): 3})  # never back
    acked.drop_topic("u")
    assert json.loads(path.read_text()) == [{"topic": "t", "partition": 0, "offset": 9},
                                            {"topic": "t", "partition": 1, "offset": 6}]
    again = AckedPositions(path)
    again.seed({("t", 0): 10})
    assert again.positions() == {("t", 0): 10, ("t", 1): 6}
    assert json.loads(path.read_text())[0] == {"topic": "t", "partition": 0, "offset": 10}
    again.clear()
    assert not path.exists()
    again.seed({("v", 0): 2})
    assert json.loads(path.read_text()) == [{"topic": "v", "partition": 0, "offset": 2}]


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
    assert path.read_text() == whole(ranges)
    ranges.add("t", 0, CopiedRange(5, 9, 55, 59, True))
    ranges.merge("t", 1, [CopiedRange(20, 30, 130, 140, True)])
    ranges.drop_topic("u")
    ranges.save(path)
    assert path.read_text() == whole(ranges)
    again = OffsetRanges.load(path)
    assert again.translate("t", 0, 7) == 57
    again.add("v", 3, CopiedRange(0, 2, 0, 2, True))
    again.save(path)  # the first save after a load encodes every partition
    assert path.read_text() == whole(again) and '"topic":"t"' in path.read_text()
