"""Real-time mode, exactly once (kafka_mirror.runtime.realtime_flow): where the target ended at
the positions the flow reached is recorded before the acknowledged positions move, at every run's
start and every drain, and kept in Kafka only while the instance holds the lease; a position
Spark committed past the last drain is proven from the drain's pair."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from kafka_mirror.config.mm2 import mm2_from_text
from kafka_mirror.config.model import FlowSpec
from kafka_mirror.engine.acked_positions import AckedPositions
from kafka_mirror.engine.batch_writer import run_write_hooks
from kafka_mirror.engine.exactly_once import TargetEnds
from kafka_mirror.engine.realtime import parse_ranges
from kafka_mirror.runtime.realtime_flow import RealTimeEnds, RealTimeFlow, StartNotRecorded

Key = tuple[str, int]


def _flow() -> FlowSpec:
    return mm2_from_text("clusters = A, B\nA.bootstrap.servers = a1:9092\n"
                         "B.bootstrap.servers = b1:9092\nA->B.enabled = true\n"
                         "mirror.mode = realtime\n").flows[0]


FLOW = _flow()


class Kept:
    """The positions kept in Kafka, as the hook sees them."""

    topic = "mm2-offsets.A.internal"

    def __init__(self) -> None:
        self.kept: list[tuple[dict[Key, tuple[int, int]], dict[str, str]]] = []
        self.down = False

    def keep(self, pairs: Mapping[Key, tuple[int, int]], topic_ids: Mapping[str, str]) -> int:
        if self.down:
            raise RuntimeError("cluster B unreachable")
        self.kept.append((dict(pairs), dict(topic_ids)))
        return len(pairs)


class Source:
    """The source's offsets, and the calls made for them."""

    def __init__(self, starts: dict[Key, int], ends: dict[Key, int]) -> None:
        self.starts, self.ends = starts, ends
        self.calls: list[str] = []

    def log_start_offsets(self, partitions: list[Key], timeout: float = 30.0) -> dict[Key, int]:
        self.calls.append(f"starts {sorted(partitions)}")
        return {tp: self.starts[tp] for tp in partitions}

    def end_offsets(self, partitions: list[Key], timeout: float = 30.0) -> dict[Key, int]:
        self.calls.append(f"ends {sorted(partitions)}")
        return {tp: self.ends[tp] for tp in partitions}


def _drained(text: str, assignment: dict[str, int]) -> Any:
    return parse_ranges(FLOW, assignment, text)


def _parts(tmp_path: Path, held: list[bool] | None = None
           ) -> tuple[TargetEnds, Kept, AckedPositions, RealTimeEnds]:
    ends = TargetEnds(tmp_path / "target-ends.json")
    kept = Kept()
    acked = AckedPositions(tmp_path / "acked-positions.json")
    hook = RealTimeEnds(FLOW, ends, kept, lambda: {"orders": "id-1"},  # type: ignore[arg-type]
                        None if held is None else (lambda: held[-1]))
    return ends, kept, acked, hook


def test_a_drain_records_where_the_target_ended_before_the_positions_move(
        tmp_path: Path) -> None:
    ends, kept, acked, hook = _parts(tmp_path)
    order: list[str] = []
    target_record = ends.record

    def record(pairs: Mapping[Key, tuple[int, int]]) -> None:
        order.append("target ends")
        target_record(pairs)

    ends.record = record  # type: ignore[method-assign]
    acked_moved = acked.on_written

    def moved(event: Any) -> None:
        order.append("acknowledged positions")
        acked_moved(event)

    acked.on_written = moved  # type: ignore[method-assign]
    # two ranges of partition 0 (a gap: not one to one), one of partition 1
    run_write_hooks([hook, acked], _drained(
        "A.orders\t0\t10\t13\t100\t103\t1\t3\t30\t5\n"
        "A.orders\t0\t15\t20\t103\t108\t1\t5\t50\t5\n"
        "A.orders\t1\t0\t4\t0\t4\t1\t4\t40\t5\n", {"orders": 2}))
    assert order == ["target ends", "acknowledged positions"]
    assert ends.target_end(("orders", 0), 20) == 108 and ends.target_end(("orders", 1), 4) == 4
    assert kept.kept == [({("orders", 0): (20, 108), ("orders", 1): (4, 4)}, {"orders": "id-1"})]
    assert acked.positions() == {("orders", 0): 20, ("orders", 1): 4}
    # on disk: a restart reads them
    assert TargetEnds(tmp_path / "target-ends.json").target_end(("orders", 0), 20) == 108


def test_pairs_are_kept_in_kafka_only_while_the_lease_is_held(tmp_path: Path) -> None:
    held = [True]
    ends, kept, _, hook = _parts(tmp_path, held)
    hook.on_written(_drained("A.orders\t0\t0\t5\t0\t5\t1\t5\t50\t1\n", {"orders": 1}))
    held.append(False)  # the lease lapsed: a zombie's pairs stay in its own state dir
    hook.on_written(_drained("A.orders\t0\t5\t9\t5\t9\t1\t4\t40\t1\n", {"orders": 1}))
    assert [pairs for pairs, _ in kept.kept] == [{("orders", 0): (5, 5)}]
    assert ends.target_end(("orders", 0), 9) == 9


def test_a_failure_to_keep_them_is_reported_once(tmp_path: Path,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    ends, kept, _, hook = _parts(tmp_path)
    kept.down = True
    with caplog.at_level(logging.INFO, logger="kafka_mirror.runtime.realtime_flow"):
        for end in (5, 6, 7):
            hook.on_written(_drained(f"A.orders\t0\t{end - 1}\t{end}\t{end - 1}\t{end}\t1\t1\t"
                                     "10\t1\n", {"orders": 1}))
        kept.down = False
        hook.on_written(_drained("A.orders\t0\t7\t8\t7\t8\t1\t1\t10\t1\n", {"orders": 1}))
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "flow A->B: positions not kept in mm2-offsets.A.internal (cluster B unreachable); a "
        "restart elsewhere proves its start from the last ones kept",
        "flow A->B: positions kept in mm2-offsets.A.internal again"]
    assert ends.target_end(("orders", 0), 7) == 7  # recorded locally all along


def test_a_run_records_the_targets_end_at_every_partitions_start(tmp_path: Path) -> None:
    ends, kept, acked, hook = _parts(tmp_path)
    flow = RealTimeFlow(FLOW, Source({("orders", 1): 3, ("new", 0): 0}, {}),  # type: ignore[arg-type]
                        acked, [hook, acked], hook)
    asked: list[list[Key]] = []

    def target_now(partitions: list[Key]) -> dict[Key, int]:
        asked.append(partitions)
        return {tp: 1000 + tp[1] for tp in partitions}

    ends.record({("orders", 0): (40, 77)})  # proven at this start: not asked again
    known = flow.start_positions({("orders", 0): 40}, {"orders": 2, "new": 1}, target_now)
    # every partition explicit: those never mirrored from their log start
    assert known == {("orders", 0): 40, ("orders", 1): 3, ("new", 0): 0}
    assert asked == [[("A.new", 0), ("A.orders", 1)]]
    assert ends.target_end(("orders", 1), 3) == 1001 and ends.target_end(("new", 0), 0) == 1000
    assert ends.target_end(("orders", 0), 40) == 77
    assert kept.kept[-1][0] == {("orders", 1): (3, 1001), ("new", 0): (0, 1000)}
    assert acked.positions() == known


def test_a_first_run_from_the_latest_offsets_starts_there(tmp_path: Path) -> None:
    ends, _, acked, hook = _parts(tmp_path)
    latest = _flow_latest()
    source = Source({}, {("orders", 0): 50})
    flow = RealTimeFlow(latest, source, acked, [hook, acked], hook)  # type: ignore[arg-type]
    known = flow.start_positions(None, {"orders": 1}, lambda tps: {tp: 9 for tp in tps})
    assert known == {("orders", 0): 50} and source.calls == ["ends [('orders', 0)]"]
    assert ends.target_end(("orders", 0), 50) == 9


def _flow_latest() -> FlowSpec:
    return mm2_from_text("clusters = A, B\nA.bootstrap.servers = a1:9092\n"
                         "B.bootstrap.servers = b1:9092\nA->B.enabled = true\n"
                         "mirror.mode = realtime\nmirror.starting.offsets = latest\n").flows[0]


def test_a_position_spark_committed_past_the_last_drain_is_proven_from_the_drain(
        tmp_path: Path) -> None:
    ends, _, acked, hook = _parts(tmp_path)
    flow = RealTimeFlow(FLOW, Source({}, {}), acked, [hook, acked], hook)  # type: ignore[arg-type]
    ends.record({("orders", 0): (10, 110)})
    ends.record({("orders", 0): (20, 120)})
    ends.record({("orders", 1): (5, 5)})
    known = {("orders", 0): 25, ("orders", 1): 5, ("orders", 2): 7}
    # partition 0: committed at 25, drained at 20 (proven from 120 on); 1: a pair at its
    # position; 2: nothing recorded (resumes where it is)
    assert flow.proof_positions(known) == {("orders", 0): 20, ("orders", 1): 5,
                                           ("orders", 2): 7}
    assert ends.pair_at_or_before(("orders", 0), 19) == (10, 110)
    assert ends.pair_at_or_before(("orders", 0), 9) is None
    without = RealTimeFlow(FLOW, Source({}, {}), acked, [acked])  # type: ignore[arg-type]
    assert without.proof_positions(known) == known  # at-least-once: nothing to prove from


def test_a_start_whose_target_ends_are_not_read_is_retried_not_started(tmp_path: Path) -> None:
    ends, kept, acked, hook = _parts(tmp_path)
    flow = RealTimeFlow(FLOW, Source({("orders", 0): 3}, {}),  # type: ignore[arg-type]
                        acked, [hook, acked], hook)

    def target_now(partitions: list[Key]) -> dict[Key, int]:
        raise TimeoutError("the target did not answer within 30 s")

    with pytest.raises(StartNotRecorded) as raised:
        flow.start_positions(None, {"orders": 1}, target_now)
    assert str(raised.value) == (
        "where the run starts was not recorded: end offsets of 1 partitions not read "
        "(TimeoutError: the target did not answer within 30 s); not starting yet")
    assert ends.target_end(("orders", 0), 3) is None and not kept.kept


def test_progress_of_many_partitions_is_reported_less_often_than_every_drain(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Up to 400 partitions every drain reports the progress (the source's end offsets read,
    then the lag and metrics per partition); 1,000 partitions every 2.5 s, 2,000 and more every
    5 s; a batch end always. Counts of the drains between go with the next report."""
    from kafka_mirror.engine.realtime import RealTimeWriter
    from kafka_mirror.runtime import realtime_flow

    assert [realtime_flow.report_interval(n) for n in (8, 400, 1000, 2000, 10_000)] == \
        [0.0, 0.0, 2.5, 5.0, 5.0]

    class Writer(RealTimeWriter):
        def __init__(self) -> None:  # no query: what the drains found is given here
            self.next: Any = None

        def drain(self, batch_id: int = -1) -> Any:
            written, self.next = self.next, None
            return written

    now = [100.0]
    monkeypatch.setattr(realtime_flow.time, "monotonic", lambda: now[0])
    assignment = {"orders": 1000}
    keys = [("orders", p) for p in range(1000)]
    source = Source(dict.fromkeys(keys, 0), dict.fromkeys(keys, 7))
    acked = AckedPositions(tmp_path / "acked-positions.json")
    flow = RealTimeFlow(FLOW, source, acked, [])  # type: ignore[arg-type]
    reports: list[Any] = []

    class Reports:
        def on_batch(self, event: Any) -> None:
            reports.append(event)

    flow.progress_hooks = [Reports()]
    writer = Writer()
    for second in range(6):  # drains at 100 ... 105 s
        now[0] = 100.0 + second
        offsets = f"{second}\t{second + 1}\t{second}\t{second + 1}"
        writer.next = _drained(f"A.orders\t0\t{offsets}\t1\t1\t10\t5\n", assignment)
        flow.drain(writer, assignment)
    # at 100 s, then 2.5 s later at 103 s (the drains of 101-103), then not before 105.5 s
    assert [r.records for r in reports] == [1, 3]
    assert sum(1 for c in source.calls if c.startswith("ends")) == 2
    now[0] = 105.2
    flow.drain(writer, assignment, ended=(7, 1.0))  # a batch end: reported at once
    assert len(reports) == 3 and reports[-1].batch_id == 7 and reports[-1].records == 2


def test_the_epoch_check_asks_no_more_about_a_topic_that_left_the_flow(tmp_path: Path) -> None:
    """A topic deleted while the flow mirrored it fails the check it is asked about in; once
    the flow restarted without it, the next check goes on with the others only (it once kept
    the positions checked before the deletion, and failed every check from then on)."""
    class Unclean:
        """Stands for :class:`kafka_mirror.engine.leader_epochs.UncleanElections`."""

        def __init__(self) -> None:
            self.asked: list[list[Key]] = []

        def check_positions(self, checked: Mapping[Key, int], current: Mapping[Key, int],
                            read: Any = None) -> list[Any]:
            asked = sorted(set(checked) | set(current))
            self.asked.append(asked)
            if ("gone", 0) in asked and len(self.asked) > 1:
                raise RuntimeError("UnknownTopicOrPartitionException: gone")
            return []

    acked = AckedPositions(tmp_path / "acked-positions.json")
    acked.seed({("orders", 0): 5, ("gone", 0): 3})
    flow = RealTimeFlow(FLOW, Source({}, {}), acked, [])  # type: ignore[arg-type]
    unclean = Unclean()
    check: Any = unclean
    assert flow.check_source(check, {"orders": 1, "gone": 1}) == []
    flow._check_due = 0.0  # the next check is due
    assert flow.check_source(check, {"orders": 1}) == []
    assert unclean.asked == [[("gone", 0), ("orders", 0)], [("orders", 0)]]


def test_a_truncation_found_names_what_was_acknowledged_since_the_last_check(
        tmp_path: Path) -> None:
    """The check validates the positions acknowledged before the last check; what the target
    acknowledged since came from the lost log too and is named with them."""
    from kafka_mirror.engine.leader_epochs import TruncatedRange

    class Unclean:
        def check_positions(self, checked: Mapping[Key, int], current: Mapping[Key, int],
                            read: Any = None) -> list[TruncatedRange]:
            return [TruncatedRange("t", 0, 50, checked[("t", 0)] - 1)] if checked else []

    acked = AckedPositions(tmp_path / "acked-positions.json")
    acked.seed({("t", 0): 94})
    flow = RealTimeFlow(FLOW, Source({}, {}), acked, [])  # type: ignore[arg-type]
    check: Any = Unclean()
    assert flow.check_source(check, {"t": 1}) == []
    acked.seed({("t", 0): 100})
    flow._check_due = 0.0
    assert flow.check_source(check, {"t": 1}) == [TruncatedRange("t", 0, 50, 99)]


def test_the_report_due_with_an_epoch_check_reads_the_source_once_for_both(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With a client that reads leader epochs (the Spark driver's), the progress report due when
    an epoch check is reads the end offsets with the epochs (one ListOffsets request), after the
    positions acknowledged so far; the check takes that reading and those positions. At 2,000
    partitions (a report every 5 s) every check goes with a report; a check with no report
    within 6 s more reads by itself."""
    from kafka_mirror.engine.leader_epochs import UncleanElections
    from kafka_mirror.engine.realtime import RealTimeWriter
    from kafka_mirror.runtime import realtime_flow
    from kafka_mirror.state.source_epochs import SourceEpochs

    class Writer(RealTimeWriter):
        def __init__(self) -> None:  # no query
            pass

        def drain(self, batch_id: int = -1) -> Any:
            return None

    assignment = {"orders": 2000}
    keys = [("orders", p) for p in range(2000)]

    class Epochs(Source):
        """The driver's client: end offsets alone, or with the leader epochs."""

        def latest(self, partitions: list[Key], timeout: float | None = None
                   ) -> dict[Key, tuple[int, int]]:
            self.calls.append(f"latest {timeout}")
            return {tp: (self.ends[tp], 3) for tp in partitions}

        def divergence(self, marks: Any) -> dict[Key, int]:
            raise AssertionError("no epoch changed")

    now = [100.0]
    monkeypatch.setattr(realtime_flow.time, "monotonic", lambda: now[0])
    client = Epochs({}, dict.fromkeys(keys, 7))
    acked = AckedPositions(tmp_path / "acked-positions.json")
    acked.seed(dict.fromkeys(keys, 7))
    flow = RealTimeFlow(FLOW, client, acked, [])  # type: ignore[arg-type]
    flow.read_ends_with(client)
    unclean = UncleanElections(client, SourceEpochs(tmp_path / "epochs.json"), skip_lost=True)
    writer = Writer()
    for second in range(21):  # a tick a second: the drain, then the check
        now[0] = 100.0 + second
        flow.drain(writer, assignment)
        assert flow.check_source(unclean, assignment) == []
    # reports at 100, 105, 110, 115, 120 s, each with the epochs within the progress's wait of
    # 2 s (a stop's last drain with the source gone waits no longer); no other reading
    assert client.calls == ["latest 2.0"] * 5
    assert unclean.epochs.get(("orders", 1999)) == 3
    client.calls.clear()
    now[0] = 126.0  # no report since 120 s (the drains stopped): due at 125, read at 131
    assert flow.check_source(unclean, assignment) == [] and client.calls == []
    now[0] = 131.0
    assert flow.check_source(unclean, assignment) == [] and client.calls == ["latest None"]
