"""The start line's step timings (kafka_mirror.runtime.start_phases)."""

from __future__ import annotations

from kafka_mirror.runtime.start_phases import StartPhases


def clock(*readings: float):  # type: ignore[no-untyped-def]
    values = iter(readings)
    return lambda: next(values)


def test_each_step_is_timed_from_the_end_of_the_one_before() -> None:
    phases = StartPhases(clock(10.0, 11.1, 11.12, 14.4, 15.8))
    phases.mark("kept positions")
    phases.mark("log starts")  # 0.02 s: left out
    phases.mark("cut batch proven")
    phases.mark("query")
    assert phases.describe() == (
        "started in 5.8 s: kept positions 1.1, cut batch proven 3.3, query 1.4")


def test_a_start_with_no_step_worth_naming_says_its_time_only() -> None:
    phases = StartPhases(clock(3.0, 3.01))
    phases.mark("query")
    assert phases.describe() == "started in 0.0 s"
