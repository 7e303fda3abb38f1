"""Where a flow's query starts: resume, re-created topics, takeover, records deleted meanwhile;
with a hand-written source admin and the flow's state in a temporary directory."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from kafka_mirror.config.mm2 import mm2_from_text
from kafka_mirror.config.model import ClusterSpec, FlowSpec
from kafka_mirror.engine.acked_positions import AckedPositions
from kafka_mirror.engine.exactly_once import TargetEnds
from kafka_mirror.engine.positions import FlowState, Positions
from kafka_mirror.runtime.resume import ResumePlanner
from kafka_mirror.state.departed import DepartedTopics
from kafka_mirror.state.offset_ranges import CopiedRange, OffsetRanges

CONFIG = """clusters = A, B
A.bootstrap.servers = 127.0.0.1:1
B.bootstrap.servers = 127.0.0.1:2
A->B.enabled = true
mirror.mode = micro-batch
"""
Key = tuple[str, int]


class FakeAdmin:
    """A source cluster: partitions, a consumer group's offsets, log starts and ends, IDs."""

    def __init__(self, partitions: dict[str, int], log_starts: dict[Key, int] | None = None,
                 groups: dict[str, dict[Key, int]] | None = None,
                 ids: dict[str, str] | None = None) -> None:
        self.topics = partitions
        self.log_starts = log_starts or {}
        self.groups = groups or {}
        self.ids = ids or {}
        self.asked: list[str] = []

    def partitions(self, wanted: Callable[[str], bool]) -> list[Key]:
        return [(t, p) for t, n in sorted(self.topics.items()) if wanted(t) for p in range(n)]

    def committed_offsets(self, group: str, partitions: Iterable[Key], timeout: float = 30.0
                          ) -> dict[Key, tuple[int, str]]:
        self.asked.append(group)
        offsets = self.groups.get(group, {})
        return {tp: (offsets[tp], "") for tp in partitions if tp in offsets}

    def log_start_offsets(self, partitions: list[Key], timeout: float = 30.0) -> dict[Key, int]:
        return {tp: self.log_starts.get(tp, 0) for tp in partitions}

    def end_offsets(self, partitions: list[Key], timeout: float = 30.0) -> dict[Key, int]:
        return {tp: 1000 for tp in partitions}

    def topic_ids(self, topics: list[str], timeout: float = 30.0) -> dict[str, str] | None:
        return {t: self.ids[t] for t in topics if t in self.ids}


class FakeMm2:
    """MirrorMaker 2's offsets topic: the positions it holds, and where it was read."""

    def __init__(self, positions: Positions) -> None:
        self.positions = positions
        self.read: list[tuple[str, str, str]] = []

    def __call__(self, cluster: ClusterSpec, topic: str, source: str) -> Positions:
        self.read.append((cluster.alias, topic, source))
        return self.positions


def _flow(**changes: Any) -> FlowSpec:
    return replace(mm2_from_text(CONFIG).flows[0], **changes)


def _committed(state: FlowState, ids: dict[str, str], positions: dict[str, dict[str, int]]
               ) -> None:
    """A checkpoint generation that committed one batch ending at ``positions``."""
    gen = state.new_generation(ids)
    (gen / "offsets").mkdir()
    (gen / "offsets" / "0").write_text("v1\n{}\n" + json.dumps(positions) + "\n")
    (gen / "commits").mkdir()
    (gen / "commits" / "0").write_text("v1\n{}\n")


class Planned:
    def __init__(self, tmp_path: Path, flow: FlowSpec, admin: FakeAdmin,
                 mm2: FakeMm2 | None = None) -> None:
        self.state = FlowState(tmp_path / "flow")
        self.ranges = OffsetRanges()
        self.saved = 0
        self.mm2 = mm2 or FakeMm2({})
        self.planner = ResumePlanner(
            flow, admin, self.state, self.ranges, AckedPositions(tmp_path / "acked.json"),
            None, self._save, {}, self.mm2,
        )

    def _save(self) -> None:
        self.saved += 1


def test_resumes_from_the_last_committed_batch(tmp_path: Path) -> None:
    planned = Planned(tmp_path, _flow(), FakeAdmin({"t": 2}))
    assert planned.planner.resume_positions({"t": "id1"}) is None  # never ran
    _committed(planned.state, {"t": "id1"}, {"t": {"0": 5, "1": 7}})
    assert planned.planner.resume_positions({"t": "id1"}) == {("t", 0): 5, ("t", 1): 7}
    assert planned.saved == 0


def test_a_recreated_topic_is_dropped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    planned = Planned(tmp_path, _flow(), FakeAdmin({"t": 1, "u": 1}))
    _committed(planned.state, {"t": "old", "u": "idu"}, {"t": {"0": 5}, "u": {"0": 9}})
    planned.ranges.add("t", 0, CopiedRange(0, 5, 0, 5, True))
    planned.ranges.add("u", 0, CopiedRange(0, 9, 0, 9, True))
    with caplog.at_level(logging.WARNING):
        assert planned.planner.resume_positions({"t": "new", "u": "idu"}) == {("u", 0): 9}
        planned.planner.resume_positions({"t": "new", "u": "idu"})
    assert planned.ranges.translate("t", 0, 3) is None
    assert planned.ranges.translate("u", 0, 3) == 3
    assert planned.saved == 2
    reports = [r for r in caplog.records if "was deleted and created again" in r.getMessage()]
    assert len(reports) == 1  # once per new topic ID


def test_takeover_from_a_mirrormaker_1_group(tmp_path: Path) -> None:
    admin = FakeAdmin({"t": 2}, groups={"legacy": {("t", 0): 40, ("t", 1): 50}})
    mm2 = FakeMm2({("t", 0): 1})
    planned = Planned(tmp_path, _flow(takeover_group="legacy"), admin, mm2)
    assert planned.planner.takeover_positions() == {("t", 0): 40, ("t", 1): 50}
    assert admin.asked == ["legacy"]
    assert mm2.read == []  # the group's positions come first


def test_takeover_from_mirrormaker_2_positions(tmp_path: Path) -> None:
    mm2 = FakeMm2({("t", 0): 12})
    planned = Planned(tmp_path, _flow(), FakeAdmin({"t": 1}), mm2)
    assert planned.planner.takeover_positions() == {("t", 0): 12}
    assert mm2.read == [("B", "mm2-offsets.A.internal", "A")]


def test_no_takeover(tmp_path: Path) -> None:
    mm2 = FakeMm2({("t", 0): 12})
    planned = Planned(tmp_path, _flow(takeover_mm2=False), FakeAdmin({"t": 1}), mm2)
    assert planned.planner.takeover_positions() is None
    assert mm2.read == []


def test_records_deleted_before_they_were_mirrored_stop_the_flow(tmp_path: Path) -> None:
    admin = FakeAdmin({"t": 2}, log_starts={("t", 0): 20})
    planned = Planned(tmp_path, _flow(), admin)
    known = {("t", 0): 10, ("t", 1): 3}
    why = planned.planner.data_loss(known, {"t": 2})
    assert why is not None
    assert why.startswith("records were deleted on cluster 'A' (retention or deleted records) "
                          "before they were mirrored: ")
    assert why.endswith("mirror.fail.on.data.loss=true stops the flow (set it to false to skip "
                        "them)")
    # partitions no longer assigned are not checked
    assert planned.planner.data_loss(known, {"t": 0}) is None


def test_records_deleted_are_skipped_without_fail_on_data_loss(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    admin = FakeAdmin({"t": 1}, log_starts={("t", 0): 20})
    planned = Planned(tmp_path, _flow(fail_on_data_loss=False), admin)
    with caplog.at_level(logging.WARNING):
        assert planned.planner.data_loss({("t", 0): 10}, {"t": 1}) is None
    assert "skipping records deleted on cluster 'A'" in caplog.text


def test_nothing_deleted(tmp_path: Path) -> None:
    admin = FakeAdmin({"t": 1}, log_starts={("t", 0): 10})
    planned = Planned(tmp_path, _flow(), admin)
    assert planned.planner.data_loss({("t", 0): 10}, {"t": 1}) is None


def test_the_state_of_a_topic_out_of_the_flow_goes_after_the_retention(tmp_path: Path) -> None:
    clock = [1_700_000_000.0]
    departed = DepartedTopics(tmp_path / "departed.json", lambda: clock[0])
    state = FlowState(tmp_path / "flow")
    ranges = OffsetRanges()
    acked = AckedPositions(tmp_path / "acked.json")
    ends = TargetEnds(tmp_path / "target-ends.json")
    saved: list[int] = []
    planner = ResumePlanner(_flow(topic_state_retention_ms=60_000), FakeAdmin({"t": 1}), state,
                            ranges, acked, ends, lambda: saved.append(1), {}, FakeMm2({}),
                            departed)
    for topic in ("t", "gone"):
        ranges.add(topic, 0, CopiedRange(0, 5, 0, 5, True))
        acked.seed({(topic, 0): 5})
        ends.record({(topic, 0): (5, 5)})
    ids = {"t": "idt", "gone": "idg"}
    assert planner.drop_departed({"t": 1}, ids) == ids  # "gone" is timed from now
    clock[0] += 59
    assert planner.drop_departed({"t": 1}, ids) == ids
    assert ranges.translate("gone", 0, 3) == 3 and saved == []
    clock[0] += 1
    assert planner.drop_departed({"t": 1}, ids) == {"t": "idt"}
    assert ranges.topics() == acked.topics() == ends.topics() == {"t"}
    assert ranges.translate("gone", 0, 3) is None
    assert TargetEnds(tmp_path / "target-ends.json").topics() == {"t"}  # on disk too
    assert saved == [1]


class FakeKept:
    """The positions kept in Kafka (kafka_mirror.state.kept_positions)."""

    topic = "mm2-offsets.A.internal"

    def __init__(self, kept: dict[Key, tuple[int, int | None, str | None]]) -> None:
        from kafka_mirror.state.kept_positions import KeptPosition
        self.kept = {tp: KeptPosition(*value) for tp, value in kept.items()}

    def read(self) -> dict[Key, Any]:
        return self.kept


def _with_kept(tmp_path: Path, kept: dict[Key, tuple[int, int | None, str | None]]
               ) -> tuple[ResumePlanner, TargetEnds, FlowState]:
    state = FlowState(tmp_path / "flow")
    ends = TargetEnds(tmp_path / "target-ends.json")
    planner = ResumePlanner(
        _flow(), FakeAdmin({"t": 3}), state, OffsetRanges(), AckedPositions(tmp_path / "a.json"),
        ends, lambda: None, {}, FakeMm2({}), kept=FakeKept(kept),  # type: ignore[arg-type]
    )
    return planner, ends, state


def test_a_new_host_resumes_from_the_positions_kept_in_kafka(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    planner, ends, _ = _with_kept(tmp_path, {
        ("t", 0): (10, 110, "id1"),
        ("t", 1): (20, None, None),  # MM2's own record: a takeover, not a resume
        ("t", 2): (30, 330, "old"),  # an earlier incarnation of the topic
        ("t", 5): (50, 550, "id1"),  # a partition the flow does not have
    })
    with caplog.at_level(logging.INFO):
        known = planner.with_kept_positions(None, {"t": 3}, {"t": "id1"})
    assert known == {("t", 0): 10}
    assert ends.target_end(("t", 0), 10) == 110  # the exactly-once restart proves from it
    assert "the state dir holds no committed batch: 1 partitions resume from the positions " \
        "kept in mm2-offsets.A.internal on cluster 'B'" in caplog.text


def test_kept_positions_move_a_stale_state_dir_on_never_back(tmp_path: Path) -> None:
    planner, ends, _ = _with_kept(tmp_path, {("t", 0): (10, 110, None), ("t", 1): (20, 220, None)})
    local = {("t", 0): 15, ("t", 1): 5, ("t", 2): 7}
    assert planner.with_kept_positions(local, {"t": 3}, {}) == {("t", 0): 15, ("t", 1): 20,
                                                                 ("t", 2): 7}
    assert ends.target_end(("t", 1), 20) == 220 and not ends.has(("t", 0))
    nothing_ahead = {("t", 0): 15, ("t", 1): 25}
    assert planner.with_kept_positions(nothing_ahead, {"t": 3}, {}) is nothing_ahead


def test_a_takeover_is_of_the_flows_partitions(tmp_path: Path) -> None:
    mm2 = FakeMm2({("t", 0): 12, ("other", 0): 5, ("t", 9): 1})
    planned = Planned(tmp_path, _flow(), FakeAdmin({"t": 2}), mm2)
    assert planned.planner.takeover_positions({"t": 2}) == {("t", 0): 12}
    assert planned.planner.takeover_positions({"u": 1}) is None


class FakeSyncs:
    """The offset syncs topic: per partition, (source, target) pairs in log order."""

    where = "mm2-offset-syncs.B.internal on cluster 'A'"

    def __init__(self, syncs: dict[Key, list[tuple[int, int]]]) -> None:
        self.syncs = syncs

    def __call__(self) -> dict[Key, list[tuple[int, int]]]:
        return self.syncs


def test_a_new_writer_rebuilds_offset_translation_from_the_offset_syncs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    ranges = OffsetRanges()
    saved: list[int] = []
    later: list[Callable[[], None]] = []
    planner = ResumePlanner(
        _flow(), FakeAdmin({"t": 3}), FlowState(tmp_path / "flow"), ranges,
        AckedPositions(tmp_path / "a.json"), TargetEnds(tmp_path / "ends.json"),
        lambda: saved.append(1), {}, FakeMm2({}),
        kept=FakeKept({("t", 0): (400, 1400, None), ("t", 1): (50, 90, None)}),  # type: ignore[arg-type]
        read_syncs=FakeSyncs({
            # batches 0-99 -> 1000-1099 and 200-299 -> 1150-1249 (one not one to one between)
            ("t", 0): [(0, 1000), (99, 1099), (200, 1150), (299, 1249), (450, 1450)],
            ("t", 2): [(5, 5)],  # a partition that does not resume from Kafka
        }),
        in_background=later.append,
    )
    with caplog.at_level(logging.INFO):
        planner.with_kept_positions(None, {"t": 3}, {})
        assert not planner.rebuilt.is_set()  # the checkpoints wait for it
        later.pop()()
    assert planner.rebuilt.is_set()
    # exact at each sync; between two, the record after the earlier one (never past it)
    assert ranges.translate("t", 0, 0) == 1000 and ranges.translate("t", 0, 99) == 1099
    assert ranges.translate("t", 0, 50) == 1001
    assert ranges.translate("t", 0, 200) == 1150 and ranges.translate("t", 0, 250) == 1151
    # from the kept position on: its target end (a sync past it is not used)
    assert ranges.translate("t", 0, 400) == 1400 and ranges.translate("t", 0, 450) == 1400
    assert ranges.translate("t", 1, 50) == 90 and ranges.translate("t", 1, 10) is None
    assert ranges.translate("t", 2, 5) is None
    assert saved
    assert "offset translation rebuilt for 1 of 2 partitions from 4 offset syncs in " \
        "mm2-offset-syncs.B.internal on cluster 'A'" in caplog.text


def test_a_restart_whose_own_ranges_reach_the_kept_positions_reads_no_syncs(
    tmp_path: Path,
) -> None:
    ranges = OffsetRanges()
    ranges.add("t", 0, CopiedRange(0, 400, 1000, 1400, True))  # this host copied up to 400
    read: list[int] = []

    class CountedSyncs(FakeSyncs):
        def __call__(self) -> dict[Key, list[tuple[int, int]]]:
            read.append(1)
            return self.syncs

    planner = ResumePlanner(
        _flow(), FakeAdmin({"t": 3}), FlowState(tmp_path / "flow"), ranges,
        AckedPositions(tmp_path / "a.json"), TargetEnds(tmp_path / "ends.json"), lambda: None,
        {}, FakeMm2({}), kept=FakeKept({("t", 0): (400, 1400, None)}),  # type: ignore[arg-type]
        read_syncs=CountedSyncs({}), in_background=lambda action: action(),
    )
    assert planner.with_kept_positions({("t", 0): 300}, {"t": 3}, {}) == {("t", 0): 400}
    assert read == [] and ranges.translate("t", 0, 350) == 1350


class CountedKept(FakeKept):
    """Kept positions that count their reads and may fail them."""

    def __init__(self, kept: dict[Key, tuple[int, int | None, str | None]]) -> None:
        super().__init__(kept)
        self.reads = 0
        self.failing = False

    def read(self) -> dict[Key, Any]:
        self.reads += 1
        if self.failing:
            raise OSError("cluster B is away")
        return super().read()


def _reading_ahead(tmp_path: Path, kept: CountedKept, mm2: FakeMm2, clock: list[float]
                   ) -> ResumePlanner:
    return ResumePlanner(
        _flow(), FakeAdmin({"t": 3}), FlowState(tmp_path / "flow"), OffsetRanges(),
        AckedPositions(tmp_path / "a.json"), TargetEnds(tmp_path / "target-ends.json"),
        lambda: None, {}, mm2, kept=kept,  # type: ignore[arg-type]
        clock=lambda: clock[0],
    )


def test_a_first_start_uses_what_was_read_ahead_while_the_session_started(
    tmp_path: Path,
) -> None:
    kept, mm2, clock = CountedKept({("t", 0): (10, 110, None)}), FakeMm2({("t", 1): 12}), [0.0]
    planner = _reading_ahead(tmp_path, kept, mm2, clock)
    planner.read_ahead()
    assert kept.reads == 1 and len(mm2.read) == 1
    kept.kept, mm2.positions = {}, {}  # read again, these would be found instead
    clock[0] += 5
    assert planner.with_kept_positions(None, {"t": 3}, {}) == {("t", 0): 10}
    assert planner.takeover_positions({"t": 3}) == {("t", 1): 12}
    assert kept.reads == 1 and len(mm2.read) == 1
    planner.forget_read_ahead()
    # the next start reads again
    assert planner.with_kept_positions(None, {"t": 3}, {}) is None
    assert planner.takeover_positions({"t": 3}) is None
    assert kept.reads == 2 and len(mm2.read) == 2


def test_what_was_read_ahead_long_ago_or_not_at_all_is_read_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    kept, mm2, clock = CountedKept({("t", 0): (10, 110, None)}), FakeMm2({}), [0.0]
    planner = _reading_ahead(tmp_path, kept, mm2, clock)
    planner.read_ahead()
    kept.kept = {}
    clock[0] += 31  # READ_AHEAD_SECONDS passed: the start reads now
    assert planner.with_kept_positions(None, {"t": 3}, {}) is None
    assert kept.reads == 2
    # a read that fails ahead is made again by the start, which reports its failure
    kept.failing = True
    planner.read_ahead()
    with caplog.at_level(logging.WARNING):
        assert planner.with_kept_positions(None, {"t": 3}, {}) is None
    assert kept.reads == 4
    assert "the positions kept in Kafka were not read (cluster B is away)" in caplog.text
