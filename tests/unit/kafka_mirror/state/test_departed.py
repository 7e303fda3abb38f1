"""Since when source topics have been out of a flow (state.departed), with a hand-set clock."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from kafka_mirror.state.departed import DepartedTopics

DAY_MS = 86_400_000


class Clock:
    def __init__(self) -> None:
        self.seconds = 1_700_000_000.0

    def __call__(self) -> float:
        return self.seconds

    def days(self, n: float) -> None:
        self.seconds += n * 86_400


def test_a_topic_out_of_the_flow_expires_after_the_retention_and_is_timed_no_longer(
    tmp_path: Path,
) -> None:
    clock = Clock()
    departed = DepartedTopics(tmp_path / "departed.json", clock)
    assert departed.expired({"a", "b"}, {"a", "b"}, 7 * DAY_MS) == []
    assert departed.expired({"a"}, {"a", "b"}, 7 * DAY_MS) == []  # b leaves now
    clock.days(6.9)
    assert departed.expired({"a"}, {"a", "b"}, 7 * DAY_MS) == []
    clock.days(0.1)
    assert departed.expired({"a"}, {"a", "b"}, 7 * DAY_MS) == ["b"]
    assert departed.since == {}
    # its state gone, it is not among the kept topics any more
    assert departed.expired({"a"}, {"a"}, 7 * DAY_MS) == []


def test_a_topic_back_in_the_flow_starts_over_and_the_wait_survives_a_restart(
    tmp_path: Path,
) -> None:
    clock = Clock()
    path = tmp_path / "departed.json"
    departed = DepartedTopics(path, clock)
    departed.expired(set(), {"b"}, 7 * DAY_MS)
    clock.days(5)
    assert departed.expired({"b"}, {"b"}, 7 * DAY_MS) == []  # selected again
    assert departed.since == {}
    departed.expired(set(), {"b"}, 7 * DAY_MS)  # out again: timed from now
    clock.days(5)
    restarted = DepartedTopics(path, clock)
    assert restarted.expired(set(), {"b"}, 7 * DAY_MS) == []
    clock.days(2)
    assert restarted.expired(set(), {"b"}, 7 * DAY_MS) == ["b"]


def test_retention_0_drops_a_topic_as_soon_as_it_is_out(tmp_path: Path) -> None:
    departed = DepartedTopics(tmp_path / "departed.json", Clock())
    assert departed.expired({"a"}, {"a", "b", "c"}, 0) == ["b", "c"]
    assert not (tmp_path / "departed.json").exists()  # nothing left to time


def test_an_unreadable_file_times_again_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    path = tmp_path / "departed.json"
    path.write_text("[1, 2", encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        departed = DepartedTopics(path, Clock())
    assert departed.since == {}
    assert "departed.json is not readable" in caplog.text
    assert departed.expired(set(), {"b"}, DAY_MS) == []
