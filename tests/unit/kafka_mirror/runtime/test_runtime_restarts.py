"""A flow's restart decisions and the backoff of failed attempts (pure functions)."""

from __future__ import annotations

from kafka_mirror.runtime.restarts import (
    FAILURE,
    MAX_RETRY_SECONDS,
    RECORD_SIZE,
    TOPIC_RECREATED,
    TOPICS_CHANGED,
    Restart,
    restart_decision,
    retry_delay,
)


def test_changed_topics_restart_a_running_query() -> None:
    assert restart_decision({"a": 1}, {"a": 2}, True, 0, [], 0, 0) == Restart(TOPICS_CHANGED)
    assert restart_decision({"a": 1}, {"a": 1, "b": 1}, True, 0, [], 0, 0) == \
        Restart(TOPICS_CHANGED)


def test_a_first_start_is_no_restart_unless_after_a_failure() -> None:
    assert restart_decision({}, {"a": 1}, False, 0, [], 0, 0) == Restart(None)
    assert restart_decision({}, {"a": 1}, False, 3, [], 0, 0) == Restart(FAILURE)


def test_a_query_that_stopped_starts_again_on_the_same_topics() -> None:
    assert restart_decision({"a": 1}, {"a": 1}, False, 0, [], 0, 0) == Restart(TOPICS_CHANGED)


def test_a_recreated_topic_restarts_the_running_query() -> None:
    assert restart_decision({"a": 1}, {"a": 1}, True, 0, ["a"], 0, 0) == \
        Restart(TOPIC_RECREATED)


def test_a_larger_record_size_restarts_the_running_query() -> None:
    assert restart_decision({"a": 1}, {"a": 1}, True, 0, [], 2_000_000, 1_000_000) == \
        Restart(RECORD_SIZE)
    assert restart_decision({"a": 1}, {"a": 1}, True, 0, [], 1_000_000, 2_000_000) is None


def test_nothing_to_do_while_the_query_runs_on_its_topics() -> None:
    assert restart_decision({"a": 1}, {"a": 1}, True, 0, [], 100, 100) is None


def test_an_empty_assignment() -> None:
    # nothing matched before and nothing matches now: nothing starts
    assert restart_decision({}, {}, False, 0, [], 0, 0) is None
    assert restart_decision({}, {}, False, 2, [], 0, 0) is None
    # every topic went: the query stops (a change of topics)
    assert restart_decision({"a": 1}, {}, True, 0, [], 0, 0) == Restart(TOPICS_CHANGED)


def test_backoff_doubles_up_to_its_limit() -> None:
    assert [retry_delay(n) for n in range(1, 8)] == [2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0]
    assert retry_delay(1000) == MAX_RETRY_SECONDS
