"""The one line that reports a failure."""

from __future__ import annotations

from kafka_mirror.errors import first_line, reason


def test_first_line_is_the_first_non_blank_line_cut_at_500() -> None:
    assert first_line("\n\n  second\nthird") == "second"
    assert first_line("x" * 600) == "x" * 500


def test_a_py4j_error_is_reported_by_the_java_exception() -> None:
    error = RuntimeError("An error occurred while calling z:io.kafkamirror.LeaderEpochs.latest.\n"
                         ": org.apache.kafka.common.errors.TimeoutException: Timed out\n\tat x")
    assert reason(error) == "org.apache.kafka.common.errors.TimeoutException: Timed out"
    assert reason(RuntimeError("plain\nsecond")) == "plain"
    # an exception without text is named by its type
    assert reason(TimeoutError()) == "TimeoutError"
    assert reason(RuntimeError("y" * 600)) == "y" * 500
