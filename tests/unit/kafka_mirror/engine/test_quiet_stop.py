"""stop_quietly: Spark's loggers off while a query stops, back to their levels afterwards."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from kafka_mirror.engine.quiet_stop import MICRO_BATCH_STOP_NOISE, stop_quietly

OFF = "OFF"


class FakeLog4j:
    """The part of log4j's API stop_quietly calls, with each logger's level."""

    def __init__(self, levels: dict[str, str]) -> None:
        self.levels = levels
        self.log4j = SimpleNamespace(
            core=SimpleNamespace(config=SimpleNamespace(Configurator=self)),
            LogManager=self, Level=SimpleNamespace(OFF=OFF))
        self.jvm = SimpleNamespace(org=SimpleNamespace(apache=SimpleNamespace(
            logging=SimpleNamespace(log4j=self.log4j))))

    def getLogger(self, name: str) -> Any:
        return SimpleNamespace(getLevel=lambda: self.levels.get(name, "INFO"))

    def setLevel(self, name: str, level: str) -> None:
        self.levels[name] = level


class Query:
    def __init__(self, log4j: FakeLog4j, fails: bool = False) -> None:
        self.log4j, self.fails = log4j, fails
        self.levels_at_stop: dict[str, str] | None = None

    def stop(self) -> None:
        self.levels_at_stop = dict(self.log4j.levels)
        if self.fails:
            raise RuntimeError("stop failed")


def test_loggers_off_while_the_query_stops_then_restored_later() -> None:
    log4j = FakeLog4j({"org.apache.spark.scheduler.DAGScheduler": "WARN", "other": "INFO"})
    query = Query(log4j)
    scheduled: list[tuple[float, Callable[[], None]]] = []
    stop_quietly(log4j.jvm, query, MICRO_BATCH_STOP_NOISE, seconds=5.0,
                 later=lambda seconds, action: scheduled.append((seconds, action)))
    assert query.levels_at_stop == {"org.apache.spark.scheduler.DAGScheduler": OFF,
                                    "other": "INFO"}
    # Spark writes its stop messages from its own threads after stop(): still off until later
    assert log4j.levels["org.apache.spark.scheduler.DAGScheduler"] == OFF
    ((seconds, restore),) = scheduled
    assert seconds == 5.0
    restore()
    assert log4j.levels == {"org.apache.spark.scheduler.DAGScheduler": "WARN", "other": "INFO"}


def test_overlapping_stops_hold_the_loggers_off_until_the_last_window_ends() -> None:
    # a query restarted (topics changed), then the process stopped within the first window:
    # the first restore must not let the second stop's messages through, nor may the second
    # restore leave the logger off for good (it saw OFF when it began)
    log4j = FakeLog4j({"org.apache.spark.scheduler.DAGScheduler": "WARN"})
    scheduled: list[Callable[[], None]] = []
    first, second = Query(log4j), Query(log4j)
    for query in (first, second):
        stop_quietly(log4j.jvm, query, MICRO_BATCH_STOP_NOISE,
                     later=lambda _seconds, action: scheduled.append(action))
    assert first.levels_at_stop == second.levels_at_stop == {
        "org.apache.spark.scheduler.DAGScheduler": OFF}
    restore_first, restore_second = scheduled
    restore_first()
    assert log4j.levels["org.apache.spark.scheduler.DAGScheduler"] == OFF
    restore_second()
    assert log4j.levels["org.apache.spark.scheduler.DAGScheduler"] == "WARN"


def test_levels_restored_when_the_stop_fails() -> None:
    log4j = FakeLog4j({"org.apache.spark.scheduler.DAGScheduler": "WARN"})
    scheduled: list[Callable[[], None]] = []
    with pytest.raises(RuntimeError, match="stop failed"):
        stop_quietly(log4j.jvm, Query(log4j, fails=True), MICRO_BATCH_STOP_NOISE,
                     later=lambda _seconds, action: scheduled.append(action))
    (restore,) = scheduled
    restore()
    assert log4j.levels == {"org.apache.spark.scheduler.DAGScheduler": "WARN"}


def test_without_a_jvm_the_query_stops_as_it_is() -> None:
    stopped = []
    stop_quietly(None, SimpleNamespace(stop=lambda: stopped.append(True)), MICRO_BATCH_STOP_NOISE,
                 later=lambda _seconds, _action: pytest.fail("nothing to restore"))
    assert stopped == [True]


def test_a_jvm_without_log4j_still_stops_the_query() -> None:
    stopped = []
    stop_quietly(SimpleNamespace(), SimpleNamespace(stop=lambda: stopped.append(True)),
                 MICRO_BATCH_STOP_NOISE,
                 later=lambda _seconds, _action: pytest.fail("nothing to restore"))
    assert stopped == [True]
