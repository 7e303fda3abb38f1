"""The exactly-once restart plan (``plan_restart``): which records of a cut batch are already on
the target, proven record by record, with in-memory partitions standing for the source's and
the target's logs (offsets may have gaps, as on a compacted or transactional topic)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from kafka_mirror.engine.exactly_once import (
    Counted,
    Found,
    Read,
    RecordView,
    Short,
    TargetEnds,
    plan_restart,
)


def _record(offset: int, value: str, ts: int = 1) -> RecordView:
    # the digest stands for the JVM's (timestamp, key, value, headers): equal records, equal text
    return RecordView(offset, f"{ts}/{value}")


class FakeLog:
    """A record reader over fixed partitions: (topic, partition) -> records in offset order."""

    def __init__(self, partitions: dict[tuple[str, int], list[RecordView]]) -> None:
        self.partitions = partitions
        self.closed = False
        self.passes: list[int] = []  # partitions read in each pass

    def first_and_nth(self, reads: Sequence[Read]) -> dict[tuple[str, int], Found]:
        self.passes.append(len(reads))
        found: dict[tuple[str, int], Found] = {}
        for read in reads:
            log = self.partitions[(read.topic, read.partition)]
            records = [r for r in log if r.offset >= read.start]
            end = log[-1].offset + 1 if log else 0
            found[(read.topic, read.partition)] = (
                Short(len(records), end) if len(records) < read.n
                else Counted(records[0], records[read.n - 1]))
        return found

    def close(self) -> None:
        self.closed = True


# source orders[0]: offsets 10, 12, 13, 20 (gaps); the cut batch started at 10 and the target
# held 100 records when it started
SOURCE = {("orders", 0): [_record(o, f"v{o}") for o in (10, 12, 13, 20)]}


def _target(*values: str) -> dict[tuple[str, int], list[RecordView]]:
    return {("A.orders", 0): [_record(100 + i, v) for i, v in enumerate(values)]}


def _plan(tmp_path: Path, target: dict[tuple[str, int], list[RecordView]],
          recorded: bool = True):  # type: ignore[no-untyped-def]
    ends = TargetEnds(tmp_path / "target-ends.json")
    if recorded:
        ends.record({("orders", 0): (10, 100)})
    logs = {"source": FakeLog(SOURCE), "target": FakeLog(target)}
    end = {("A.orders", 0): 100 + len(target[("A.orders", 0)])}
    plan = plan_restart({("orders", 0): 10}, lambda t: f"A.{t}", ends, lambda tps: end,
                        lambda: logs["source"], lambda: logs["target"])  # type: ignore[arg-type,return-value]
    return plan, logs


def test_records_of_the_cut_batch_on_the_target_are_skipped(tmp_path: Path) -> None:
    plan, logs = _plan(tmp_path, _target("v10", "v12", "v13"))
    assert plan.positions == {("orders", 0): 14}  # after source offset 13, the third record
    (skip,) = plan.skips
    assert (skip.source_start, skip.resume, skip.target_start, skip.target_end) == (10, 14, 100,
                                                                                      103)
    assert skip.records == 3
    assert plan.fallbacks == {}
    assert logs["source"].closed and logs["target"].closed


def test_nothing_written_since_the_batch_started_resumes_where_it_was(tmp_path: Path) -> None:
    plan, logs = _plan(tmp_path, _target())
    assert plan.positions == {("orders", 0): 10} and not plan.skips and not plan.fallbacks
    assert not logs["source"].closed  # no reader was needed


def test_no_recorded_target_end_is_no_skip(tmp_path: Path) -> None:
    plan, _ = _plan(tmp_path, _target("v10"), recorded=False)
    assert plan.positions == {("orders", 0): 10} and not plan.skips and not plan.fallbacks


def test_a_different_last_record_falls_back_to_at_least_once(tmp_path: Path) -> None:
    plan, _ = _plan(tmp_path, _target("v10", "v12", "other"))
    assert plan.positions == {("orders", 0): 10} and not plan.skips
    assert "is not source record orders[0]@13" in plan.fallbacks[("orders", 0)]


def test_a_different_first_record_falls_back_to_at_least_once(tmp_path: Path) -> None:
    plan, _ = _plan(tmp_path, _target("other", "v12", "v13"))
    assert plan.positions == {("orders", 0): 10}
    assert "A.orders[0]@100 is not source record orders[0]@10" in plan.fallbacks[("orders", 0)]


def test_more_on_the_target_than_the_source_holds_falls_back(tmp_path: Path) -> None:
    plan, _ = _plan(tmp_path, _target("v10", "v12", "v13", "v20", "v21"))
    assert "fewer than the 5 on the target" in plan.fallbacks[("orders", 0)]


def test_a_target_that_shrank_falls_back(tmp_path: Path) -> None:
    ends = TargetEnds(tmp_path / "target-ends.json")
    ends.record({("orders", 0): (10, 100)})
    plan = plan_restart({("orders", 0): 10}, lambda t: f"A.{t}", ends,
                        lambda tps: {("A.orders", 0): 90}, lambda: FakeLog(SOURCE),  # type: ignore[arg-type,return-value]
                        lambda: FakeLog(_target()))  # type: ignore[arg-type,return-value]
    assert "ends at 90, before offset 100" in plan.fallbacks[("orders", 0)]


def _plan_gone(tmp_path: Path, pairs: list[tuple[int, int]], target_end: int,
               log_start: int):  # type: ignore[no-untyped-def]
    """The plan from source offset 10 (target 100) once the source's log starts at
    ``log_start``: the cut batch's records are no longer there to read."""
    ends = TargetEnds(tmp_path / "target-ends.json")
    for pair in pairs:
        ends.record({("orders", 0): pair})
    asked: list[list[tuple[str, int]]] = []

    def starts(tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        asked.append(tps)
        return {tp: log_start for tp in tps}

    def unread() -> FakeLog:
        raise AssertionError("records deleted on the source are not read")

    plan = plan_restart({("orders", 0): 10}, lambda t: f"A.{t}", ends,
                        lambda tps: {("A.orders", 0): target_end}, unread, unread,  # type: ignore[arg-type]
                        starts)
    return plan, asked


def test_records_gone_from_the_source_are_skipped_as_the_writer_recorded(tmp_path: Path) -> None:
    # the cut batch wrote source 10..599 to target 100..689 and recorded it; retention then
    # deleted the source's records up to 1000
    plan, asked = _plan_gone(tmp_path, [(10, 100), (600, 690)], 690, 1000)
    assert plan.positions == {("orders", 0): 600} and not plan.fallbacks
    (skip,) = plan.skips
    assert (skip.source_start, skip.resume, skip.target_start, skip.target_end) == (10, 600, 100,
                                                                                      690)
    assert asked == [[("orders", 0)]]


def test_records_gone_and_no_write_recorded_up_to_the_target_end_fall_back(
        tmp_path: Path) -> None:
    # the write was cut: the target grew, but no pair records where it ends now
    plan, _ = _plan_gone(tmp_path, [(10, 100)], 150, 1000)
    assert plan.positions == {("orders", 0): 10} and not plan.skips
    assert "from offset 10 are gone (its log starts at 1000)" in plan.fallbacks[("orders", 0)]


def test_log_starts_are_asked_only_when_the_target_grew(tmp_path: Path) -> None:
    plan, asked = _plan_gone(tmp_path, [(10, 100)], 100, 1000)
    assert plan.positions == {("orders", 0): 10} and asked == []


def test_target_ends_first_and_recorded_positions(tmp_path: Path) -> None:
    ends = TargetEnds(tmp_path / "target-ends.json")
    assert ends.first_position(("orders", 0)) is None
    for pair in [(10, 100), (600, 690), (700, 790)]:
        ends.record({("orders", 0): pair})
    assert ends.first_position(("orders", 0)) == 10
    assert ends.position_at(("orders", 0), 690) == 600
    assert ends.position_at(("orders", 0), 691) is None


def test_all_partitions_are_proven_together_in_one_pass_over_each_cluster(
        tmp_path: Path) -> None:
    # five partitions of the cut batch, each with 2 of its records on the target (the third
    # partition's last one differs, the fourth's source holds one record only): one source
    # reader reads the 5 partitions in one pass, one target reader the 4 it must check in one
    partitions = range(5)
    source = {("orders", p): [_record(o, f"v{p}.{o}") for o in ((10,) if p == 3 else (10, 11, 12))]
              for p in partitions}
    target = {("A.orders", p): [_record(100, f"v{p}.10"),
                                _record(101, "other" if p == 2 else f"v{p}.11")]
              for p in partitions}
    ends = TargetEnds(tmp_path / "target-ends.json")
    ends.record({("orders", p): (10, 100) for p in partitions})
    opened: list[FakeLog] = []

    def reader(logs: dict[tuple[str, int], list[RecordView]]) -> FakeLog:
        opened.append(FakeLog(logs))
        return opened[-1]

    plan = plan_restart({("orders", p): 10 for p in partitions}, lambda t: f"A.{t}", ends,
                        lambda tps: {tp: 102 for tp in tps},
                        lambda: reader(source), lambda: reader(target))  # type: ignore[arg-type,return-value]
    assert plan.positions == {("orders", p): 10 if p in (2, 3) else 12 for p in partitions}
    assert [skip.partition for skip in plan.skips] == [0, 1, 4]
    assert "is not source record orders[2]@11" in plan.fallbacks[("orders", 2)]
    assert "the source holds 1 records from offset 10 to its end 11, fewer than the 2" \
        in plan.fallbacks[("orders", 3)]
    assert plan.fallback_ends == {("orders", 2): 102, ("orders", 3): 102}
    assert [log.passes for log in opened] == [[5], [4]] and all(log.closed for log in opened)
