"""Failures in a row are logged once a minute, not each round, whichever thread repeats them."""

from __future__ import annotations

import logging
import threading

import pytest

from kafka_mirror.failure_streak import FailureStreak
from kafka_mirror.runtime.periodic import Periodic


def _lines(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == level]


def test_a_streak_warns_on_the_first_and_every_60th_failure_and_says_when_it_works_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    streak = FailureStreak(logging.getLogger("test.streak"), "checkpoints")
    with caplog.at_level(logging.DEBUG, logger="test.streak"):
        for n in range(121):
            streak.failed(f"timed out {n}")
        streak.succeeded()
        streak.succeeded()  # nothing more to say
        streak.failed("again")
    assert _lines(caplog, logging.WARNING) == [
        "checkpoints failed (1 in a row): timed out 0",
        "checkpoints failed (61 in a row): timed out 60",
        "checkpoints failed (121 in a row): timed out 120",
        "checkpoints failed (1 in a row): again"]
    assert len(_lines(caplog, logging.DEBUG)) == 118
    assert _lines(caplog, logging.INFO) == ["checkpoints working again (121 failed before)"]


def test_a_periodic_task_that_fails_round_after_round_logs_through_its_streak(
    caplog: pytest.LogCaptureFixture,
) -> None:
    rounds: list[int] = []
    done = threading.Event()

    def action() -> None:
        rounds.append(1)
        if len(rounds) == 65:
            done.set()
        if len(rounds) <= 62:
            raise RuntimeError("cluster unreachable")

    with caplog.at_level(logging.DEBUG, logger="kafka_mirror.runtime.periodic"):
        task = Periodic("heartbeats", 0.0, action).start()
        assert done.wait(10)
        task.stop()
    assert _lines(caplog, logging.WARNING) == [
        "heartbeats failed (1 in a row): cluster unreachable",
        "heartbeats failed (61 in a row): cluster unreachable"]
    assert _lines(caplog, logging.INFO) == ["heartbeats working again (62 failed before)"]
    assert task.failures.count == 0
