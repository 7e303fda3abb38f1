"""Real-time mode's parts that need no cluster: the interceptor's ranges as copies, the
positions acknowledged records give, the task slots a real-time flow holds, the session's
master and the sink options and producer defaults of a run."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from kafka_mirror.config.mm2 import mm2_from_text
from kafka_mirror.config.model import FlowSpec
from kafka_mirror.engine.acked_positions import AckedPositions
from kafka_mirror.engine.batch_writer import BatchWritten
from kafka_mirror.engine.positions import Positions
from kafka_mirror.engine.realtime import (
    RealTimeProgress,
    RealTimeWriter,
    new_run_key,
    parse_ranges,
    realtime_groups,
)
from kafka_mirror.engine.session import DEFAULT_SPARK_CONF, realtime_master
from kafka_mirror.errors import MirrorError
from kafka_mirror.kafka.clients import COPIES_RUN_CONFIG, producer_properties, spark_sink_options
from kafka_mirror.state.offset_ranges import CopiedRange


def _flow(extra: str = "mirror.mode = realtime\n") -> FlowSpec:
    return mm2_from_text("clusters = A, B\nA.bootstrap.servers = a1:9092\n"
                         "B.bootstrap.servers = b1:9092\nA->B.enabled = true\n" + extra).flows[0]


FLOW = _flow()


def test_ranges_become_copies_of_the_source_partitions() -> None:
    text = ("A.orders\t1\t10\t13\t100\t103\t1\t3\t300\t12\n"
            "A.orders\t1\t15\t40\t103\t110\t0\t7\t700\t-1\n"
            "A.other\t0\t0\t1\t0\t1\t1\t1\t9\t99\n"  # not this run's topic: dropped
            "garbage\n")
    written = parse_ranges(FLOW, {"orders": 2}, text, batch_id=4)
    copies = written.copies
    where = [(c.topic, c.partition, c.target_topic) for c in copies]
    assert where == [("orders", 1, "A.orders")] * 2
    assert copies[0].copied == CopiedRange(10, 13, 100, 103, True)
    assert copies[1].copied == CopiedRange(15, 40, 103, 110, False)
    assert (written.batch_id, written.records, written.bytes, written.age_max_ms) == (
        4, 10, 1000, 12.0)


def test_progress_is_reported_after_every_drain_and_counts_each_record_once() -> None:
    progress = RealTimeProgress(FLOW)
    idle = progress.report({("orders", 0): 5}, {("orders", 0): 5})
    assert (idle.records, idle.moved, idle.batch_id, idle.lag) == (0, False, -1, 0)
    progress.add(_written(("orders", 0, 5, 9)))
    progress.add(None)  # a drain that found nothing
    progress.add(parse_ranges(FLOW, {"orders": 1}, "A.orders\t0\t9\t10\t4\t5\t1\t1\t50\t7\n"))
    event = progress.report({("orders", 0): 10}, {("orders", 0): 12})
    assert (event.records, event.bytes, event.moved, event.lag) == (5, 50, True, 2)
    assert event.source_start == {("orders", 0): 5} and event.observed == {"age_max_ms": 7.0}
    # a batch end: its id and duration; nothing counted twice
    ended = progress.report({("orders", 0): 10}, {("orders", 0): 12}, batch_id=3, duration=60.0)
    assert (ended.batch_id, ended.duration, ended.records, ended.moved) == (3, 60.0, 0, False)
    assert ended.observed == {}


def test_a_realtime_flow_reads_a_group_of_partitions_per_task_slot() -> None:
    assignment = {"orders": 6, "audit": 2}
    # by default one group per two cores, at least one
    assert realtime_groups(FLOW, assignment, slots=32, taken=2, cores=8) == 4
    assert realtime_groups(FLOW, assignment, slots=32, taken=29, cores=8) == 3
    assert realtime_groups(FLOW, {"orders": 1}, slots=32, taken=0, cores=8) == 1
    assert realtime_groups(FLOW, assignment, slots=32, taken=0, cores=2) == 1
    assert realtime_groups(FLOW, assignment, slots=32, taken=0, cores=1) == 1
    # mirror.realtime.groups, within the partitions and the free slots
    chosen = replace(FLOW, realtime_groups=6)
    assert realtime_groups(chosen, assignment, slots=32, taken=0, cores=2) == 6
    assert realtime_groups(chosen, {"orders": 4}, slots=32, taken=0, cores=2) == 4
    assert realtime_groups(chosen, assignment, slots=32, taken=29, cores=2) == 3
    with pytest.raises(MirrorError, match=r"flow A->B: .* all 10 are held .*spark\.master"):
        realtime_groups(FLOW, assignment, slots=10, taken=10, cores=4)


def test_the_default_local_master_gets_room_for_realtime_flows() -> None:
    conf = dict(DEFAULT_SPARK_CONF)
    assert realtime_master(conf)["spark.master"] == "local[32]"
    assert realtime_master(conf | {"spark.master": "local[4]"})["spark.master"] == "local[4]"


def test_each_run_has_its_own_producer() -> None:
    first, second = new_run_key(FLOW), new_run_key(FLOW)
    assert first != second and first.startswith("A_to_B:")
    options = spark_sink_options(FLOW, copies_run=first)
    assert options[f"kafka.{COPIES_RUN_CONFIG}"] == first
    assert f"kafka.{COPIES_RUN_CONFIG}" not in spark_sink_options(FLOW)


def _counts(*counts: int) -> Callable[[str], int]:
    """A JVM method answering ``counts`` one after the other, then the last one on and on."""
    answers: Iterator[int] = iter(counts)
    last = [counts[-1]]

    def answer(_run: str) -> int:
        last[0] = next(answers, last[0])
        return last[0]

    return answer


def _writer(open_readers: Callable[[str], int], pending: Callable[[str], int],
            master: str = "local[2]") -> RealTimeWriter:
    """A run's writer attached to a made-up driver JVM with those two counts."""
    writer = RealTimeWriter(FLOW, Path("unused"), {}, "A_to_B:run", {"orders": 1})
    jvm = SimpleNamespace(io=SimpleNamespace(kafkamirror=SimpleNamespace(
        CopiedRanges=SimpleNamespace(pending=pending),
        source=SimpleNamespace(OpenReaders=SimpleNamespace(open=open_readers)))))
    writer.attach(SimpleNamespace(sparkContext=SimpleNamespace(_jvm=jvm, master=master)))
    return writer


def test_a_stopped_run_settles_once_its_tasks_ended_and_their_records_were_acknowledged() -> None:
    # stopping a query returns before its tasks end: one still sends after the stop
    asked: list[str] = []
    tasks, records = _counts(2, 1, 0), _counts(3, 1, 0)

    def open_readers(run: str) -> int:
        asked.append("open")
        return tasks(run)

    def pending(run: str) -> int:
        asked.append("pending")
        return records(run)

    writer = _writer(open_readers, pending)
    assert not writer.settled_everywhere
    assert writer.settle(5.0) and writer.settled_everywhere
    assert asked == ["open"] * 3 + ["pending"] * 3


def test_a_run_with_executors_elsewhere_is_not_known_to_have_settled_everywhere() -> None:
    """Executors of a cluster run in JVMs of their own: their readers are not counted here (the
    restart waits until the target's end offsets stand still instead)."""
    writer = _writer(_counts(0), _counts(0), master="spark://127.0.0.1:7077")
    assert writer.settle(5.0) and not writer.settled_everywhere


@pytest.mark.parametrize("open_readers, pending", [(1, 0), (0, 1)], ids=["task", "record"])
def test_a_stopped_run_that_does_not_settle_in_time_says_so(open_readers: int,
                                                              pending: int) -> None:
    writer = _writer(_counts(open_readers), _counts(pending))
    assert not writer.settle(0.05) and not writer.settled_everywhere


def _written(*ranges: tuple[str, int, int, int]) -> BatchWritten:
    """(source topic, partition, source start, source end) copies of FLOW, as drained."""
    assignment: dict[str, int] = {}
    for topic, partition, _, _ in ranges:
        assignment[topic] = max(assignment.get(topic, 0), partition + 1)
    return parse_ranges(FLOW, assignment, "".join(
        f"A.{topic}\t{partition}\t{start}\t{end}\t0\t{end - start}\t1\t{end - start}\t0\t-1\n"
        for topic, partition, start, end in ranges))


def test_acknowledged_positions_move_forward_only_and_survive_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "acked-positions.json"
    moves: list[Positions] = []

    def moved(flow: FlowSpec, positions: Positions) -> None:
        moves.append(positions)

    acked = AckedPositions(path, moved)
    acked.on_written(_written(("orders", 0, 0, 100), ("orders", 1, 5, 7)))
    # a stopped run's late acknowledgement of records the next run wrote again
    acked.on_written(_written(("orders", 0, 40, 60)))
    assert acked.positions() == {("orders", 0): 100, ("orders", 1): 7}
    assert moves == [{("orders", 0): 100, ("orders", 1): 7}]  # the second moved nothing
    # a crash: the next process reads the file
    again = AckedPositions(path)
    assert again.positions() == {("orders", 0): 100, ("orders", 1): 7}
    # the last committed batch wins where it is further, each partition on its own
    assert again.resume({("orders", 0): 80, ("orders", 1): 9, ("audit", 0): 3}) == {
        ("orders", 0): 100, ("orders", 1): 9, ("audit", 0): 3}
    assert again.resume(None) == {("orders", 0): 100, ("orders", 1): 7}
    # a run starts: where it starts is saved, behind positions stay
    again.seed({("orders", 0): 50, ("audit", 1): 7})
    assert AckedPositions(path).positions() == {
        ("orders", 0): 100, ("orders", 1): 7, ("audit", 1): 7}
    again.drop_topic("audit")
    # a topic deleted and created again starts over; micro-batch mode clears the file
    again.drop_topic("orders")
    assert again.resume(None) is None and not path.exists()
    again.on_written(_written(("audit", 0, 0, 1)))
    again.clear()
    assert not path.exists() and AckedPositions(path).positions() == {}


def test_a_save_the_state_disk_refuses_is_made_at_the_next_drain_and_moves_the_lag_then(
        tmp_path: Path) -> None:
    # a full state disk: the positions moved in memory but the save raised, and the lag group,
    # told with a save of a move, was never told (no later drain moved those partitions again)
    path = tmp_path / "acked-positions.json"
    moves: list[Positions] = []
    acked = AckedPositions(path, lambda flow, positions: moves.append(positions))
    full = {"on": True}
    save = acked._save

    def refused() -> None:
        if full["on"]:
            raise OSError(28, "No space left on device")
        save()

    acked._save = refused  # type: ignore[method-assign]
    with pytest.raises(OSError):
        acked.on_written(_written(("orders", 0, 0, 100)))
    assert moves == [] and not path.exists()  # the lag group waits for the state
    full["on"] = False
    acked.on_written(_written(("orders", 0, 50, 60)))  # moves nothing: the save is made now
    assert moves == [{("orders", 0): 100}]
    assert AckedPositions(path).positions() == {("orders", 0): 100}
    acked.on_written(_written(("orders", 0, 60, 70)))  # nothing moved, nothing unsaved
    assert len(moves) == 1


def test_realtime_producer_lingers_like_kafkas_default_unless_set() -> None:
    assert producer_properties(FLOW)["linger.ms"] == "5"
    assert producer_properties(_flow(""))["linger.ms"] == "5"  # the default mode
    assert producer_properties(_flow("mirror.mode = micro-batch\n"))["linger.ms"] == "20"
    tuned = _flow("mirror.mode = realtime\nB.producer.linger.ms = 50\n")
    assert producer_properties(tuned)["linger.ms"] == "50"


def test_an_unreadable_positions_file_falls_back_to_the_committed_batch(tmp_path: Path) -> None:
    path = tmp_path / "acked-positions.json"
    path.write_text("", encoding="utf-8")  # e.g. a machine crash before the write reached disk
    acked = AckedPositions(path)
    assert acked.resume({("orders", 0): 80}) == {("orders", 0): 80}
    acked.on_written(_written(("orders", 0, 80, 90)))
    assert AckedPositions(path).positions() == {("orders", 0): 90}
