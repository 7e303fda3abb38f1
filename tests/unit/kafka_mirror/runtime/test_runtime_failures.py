"""A flow's failures told apart: kinds, failures no restart cures, the refused batch."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from kafka_mirror.config.mm2 import mm2_from_text
from kafka_mirror.config.model import FlowSpec
from kafka_mirror.runtime.failures import (
    PERMANENT_FAILURES,
    error_kind,
    failed_for_good,
    failure_reason,
    permanent_failure,
    refused_batch,
)
from kafka_mirror.runtime.flow import FlowRunner

CONFIG = """clusters = A, B
A.bootstrap.servers = 127.0.0.1:1
B.bootstrap.servers = 127.0.0.1:2
A->B.enabled = true
"""


def _flow() -> FlowSpec:
    return mm2_from_text(CONFIG).flows[0]


@pytest.mark.parametrize(("error", "kind"), [
    ("org.apache.kafka.common.errors.TopicAuthorizationException: Not authorized", "authorization"),
    ("SaslAuthenticationException: bad password", "authorization"),
    ("RecordTooLargeException: The message is 2000000 bytes", "record_rejected"),
    ("CorruptRecordException: bad CRC", "record_rejected"),
    ("TimeoutException: Topic t not present in metadata after 60000 ms", "unreachable"),
    ("Connection to node 1 (localhost/127.0.0.1:9092) could not be established", "unreachable"),
    ("java.lang.IllegalStateException: something else", "other"),
])
def test_error_kinds(error: str, kind: str) -> None:
    assert error_kind(error) == kind


def test_permanent_failures_are_those_no_restart_cures() -> None:
    for name in PERMANENT_FAILURES:
        assert permanent_failure(f"org.apache.kafka.common.errors.{name}: no") == name
    assert permanent_failure("TimeoutException: Expiring 3 record(s)") is None


def test_failure_reason() -> None:
    trace = ("org.apache.spark.SparkException: Job aborted\n"
             "  Caused by: org.apache.kafka.common.errors.RecordTooLargeException: too big\n"
             "  at org.apache.kafka...\n")
    assert failure_reason(trace, "RecordTooLargeException") == "RecordTooLargeException: too big"
    assert failure_reason(trace, "CorruptRecordException") == \
        "org.apache.spark.SparkException: Job aborted"


def _offsets(checkpoint: Path, batch: int, positions: dict[str, dict[str, int]]) -> None:
    (checkpoint / "offsets").mkdir(parents=True, exist_ok=True)
    (checkpoint / "offsets" / str(batch)).write_text(
        "v1\n" + json.dumps({"batchWatermarkMs": 0}) + "\n" + json.dumps(positions) + "\n")


def _commit(checkpoint: Path, batch: int) -> None:
    (checkpoint / "commits").mkdir(parents=True, exist_ok=True)
    (checkpoint / "commits" / str(batch)).write_text("v1\n{}\n")


def test_refused_batch_names_the_records_of_the_batch_not_committed(tmp_path: Path) -> None:
    _offsets(tmp_path, 0, {"t": {"0": 10, "1": 5}})
    _commit(tmp_path, 0)
    _offsets(tmp_path, 1, {"t": {"0": 15, "1": 5}})
    assert refused_batch(_flow(), tmp_path) == \
        "cluster 'B' refused batch 1 (t[0] offsets 10..14 -> A.t[0])"


def test_refused_batch_unknown(tmp_path: Path) -> None:
    assert refused_batch(_flow(), tmp_path) is None  # no batch planned
    _offsets(tmp_path, 0, {"t": {"0": 10}})
    _commit(tmp_path, 0)
    assert refused_batch(_flow(), tmp_path) is None  # every batch committed
    _offsets(tmp_path, 1, {"t": {"0": 10}})
    assert refused_batch(_flow(), tmp_path) is None  # the pending batch moves nothing


def test_failed_for_good_leads_with_the_refused_records(tmp_path: Path) -> None:
    _offsets(tmp_path, 0, {"t": {"0": 3}})
    _commit(tmp_path, 0)
    _offsets(tmp_path, 1, {"t": {"0": 4}})
    error = "Job aborted\nCaused by: RecordTooLargeException: too big"
    why = failed_for_good(_flow(), error, "RecordTooLargeException", tmp_path)
    assert why == ("cluster 'B' refused batch 1 (t[0] offsets 3..3 -> A.t[0]): "
                   f"RecordTooLargeException: too big\n{error}")
    assert failed_for_good(_flow(), error, "RecordTooLargeException", None) == \
        f"RecordTooLargeException: too big\n{error}"


def test_a_query_error_from_the_batch_function_is_named_by_its_cause() -> None:
    """py4j's first line says only that the batch function raised; the line reported is Spark's
    (or Kafka's) exception under it."""
    from kafka_mirror.runtime.failures import query_error_line

    error = (
        "An exception was raised by the Python Proxy. Return Message: Traceback (most recent "
        "call last):\n"
        '  File "/x/py4j/clientserver.py", line 644, in _call_proxy\n'
        "    return_value = getattr(self.pool[obj_id], method)(*params)\n"
        "py4j.protocol.Py4JJavaError: An error occurred while calling o195.save.\n"
        ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 1 in stage 0.0 "
        "failed 4 times, most recent failure: Lost task 1.3 in stage 0.0 (TID 6) (127.0.0.1 "
        "executor 1): java.lang.IllegalStateException: kafka-mirror refuses a retried task\n"
        "\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(x.scala:1)\n"
        "Caused by: java.lang.IllegalStateException: kafka-mirror refuses a retried task\n")
    assert query_error_line(error) == (
        "org.apache.spark.SparkException: Job aborted due to stage failure: Task 1 in stage 0.0 "
        "failed 4 times, most recent failure: Lost task 1.3 in stage 0.0 (TID 6) (127.0.0.1 "
        "executor 1): java.lang.IllegalStateException: kafka-mirror refuses a retried task")
    # any other first line is the report
    assert query_error_line("org.apache.kafka.common.errors.TimeoutException: x\n at y") == \
        "org.apache.kafka.common.errors.TimeoutException: x"
    # nothing better under the wrapper: its line
    assert query_error_line("An exception was raised by the Python Proxy. Return Message: "
                            "boom\nValueError: bad") == \
        "An exception was raised by the Python Proxy. Return Message: boom"


def test_a_retried_failure_of_a_call_into_the_jvm_is_reported_by_its_java_exception(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # py4j's first line names only the call; the line under it says what went wrong
    told: list[tuple[str, str]] = []
    metrics = SimpleNamespace(failed=lambda _flow, kind, line: told.append((kind, line)))
    runner: Any = SimpleNamespace(failures=0, retry_at=0.0, metrics=metrics,
                                  flow=SimpleNamespace(name="A->B"))
    error = Exception(
        "An error occurred while calling z:io.kafkamirror.EndOffsets.read.\n"
        ": org.apache.kafka.common.errors.TimeoutException: Timed out waiting for a node "
        "assignment. Call: listOffsets\n\tat io.kafkamirror.EndOffsets.read(EndOffsets.java:40)")
    with caplog.at_level(logging.WARNING, logger="kafka_mirror.runtime.flow"):
        FlowRunner.failed_attempt(runner, error, 100.0)
    line = ("org.apache.kafka.common.errors.TimeoutException: Timed out waiting for a node "
            "assignment. Call: listOffsets")
    assert told == [("unreachable", line)]
    assert runner.failures == 1 and runner.retry_at > 100.0
    assert [r.getMessage() for r in caplog.records] == [
        f"flow A->B: {line}; retrying in 2 s (attempt 1)"]
