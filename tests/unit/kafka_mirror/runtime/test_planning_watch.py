"""Micro-batch mode: a query asking the source for its offsets for seconds has the topics read
again, once per such wait (kafka_mirror.runtime.planning_watch)."""

from __future__ import annotations

from kafka_mirror.runtime.planning_watch import PLANNING_MESSAGE, PlanningWatch

ASKING = {"isTriggerActive": True, "message": f"{PLANNING_MESSAGE} GroupedKafkaStream[...]"}
WRITING = {"isTriggerActive": True, "message": "Processing new data"}
WAITING = {"isTriggerActive": False, "message": "Waiting for next trigger"}


def test_a_wait_for_offsets_past_the_limit_is_told_once() -> None:
    watch = PlanningWatch(seconds=5.0)
    assert [watch.overdue(ASKING, t) for t in (100.0, 103.0, 105.5, 106.5, 200.0)] == \
        [None, None, 5.5, None, None]


def test_a_batch_planned_ends_the_wait_and_the_next_one_is_told_again() -> None:
    watch = PlanningWatch(seconds=5.0)
    assert watch.overdue(ASKING, 0.0) is None
    assert watch.overdue(ASKING, 6.0) == 6.0
    assert watch.overdue(WRITING, 7.0) is None and watch.since is None
    assert watch.overdue(ASKING, 8.0) is None
    assert watch.overdue(ASKING, 12.0) is None  # 4 s of this wait
    assert watch.overdue(ASKING, 13.0) == 5.0


def test_short_waits_between_batches_are_not_told() -> None:
    watch = PlanningWatch(seconds=5.0)
    for second in range(0, 60, 2):  # each batch asks for a second, then writes, then waits
        assert watch.overdue(ASKING, float(second)) is None
        assert watch.overdue(WAITING, second + 1.0) is None
