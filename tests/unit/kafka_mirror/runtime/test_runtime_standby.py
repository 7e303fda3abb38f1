"""A standby's warm-up (:mod:`kafka_mirror.runtime.standby`): run once, its preparation on the
caller's thread and its work on the spawned one; a failure of either is tried again after the
retry time, not before; a warm-up under way or done is not started again."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest

from kafka_mirror.runtime.standby import StandbyWarmUp


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Steps:
    """Counts preparations and works; fails the next ``prepare_fails`` / ``work_fails``."""

    def __init__(self, prepare_fails: int = 0, work_fails: int = 0) -> None:
        self.prepared = self.worked = 0
        self.prepare_fails, self.work_fails = prepare_fails, work_fails

    def prepare(self) -> Callable[[], None]:
        self.prepared += 1
        if self.prepare_fails:
            self.prepare_fails -= 1
            raise RuntimeError("Timed out waiting for a node assignment")
        return self.work

    def work(self) -> None:
        self.worked += 1
        if self.work_fails:
            self.work_fails -= 1
            raise RuntimeError("the source did not answer\nat org.apache.kafka...")


def test_warmed_once_and_said(caplog: pytest.LogCaptureFixture) -> None:
    spawned: list[Callable[[], None]] = []
    warm_up = StandbyWarmUp("a->b", spawned.append, Clock())
    steps = Steps()
    with caplog.at_level(logging.INFO, "kafka_mirror.runtime.standby"):
        warm_up.start(steps.prepare)
        assert steps.prepared == 1 and steps.worked == 0 and not warm_up.ready
        warm_up.start(steps.prepare)  # under way: not again
        assert steps.prepared == 1 and len(spawned) == 1
        spawned[0]()
    assert steps.worked == 1 and warm_up.ready
    assert "flow a->b: ready to take over (clients and query path warmed in 0.0 s)" in caplog.text
    warm_up.start(steps.prepare)  # done: not again
    assert steps.prepared == 1 and len(spawned) == 1


@pytest.mark.parametrize("fails", ["prepare", "work"])
def test_a_failed_warm_up_is_tried_again_after_the_retry_time(
        fails: str, caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    warm_up = StandbyWarmUp("a->b", lambda work: work(), clock, retry_seconds=30.0)
    steps = Steps(prepare_fails=int(fails == "prepare"), work_fails=int(fails == "work"))
    with caplog.at_level(logging.DEBUG, "kafka_mirror.runtime.standby"):
        warm_up.start(steps.prepare)
    assert not warm_up.ready
    assert "standby not prepared" in caplog.text and "trying again in 30 s" in caplog.text
    assert "org.apache" not in caplog.text  # the first line of the error only
    assert not [r for r in caplog.records if r.levelno > logging.DEBUG]
    clock.now += 29.0
    warm_up.start(steps.prepare)
    assert steps.prepared == 1
    clock.now += 1.0
    warm_up.start(steps.prepare)
    assert steps.prepared == 2 and steps.worked == 1 + int(fails == "work") and warm_up.ready
