"""The batch writer's target end offsets before a batch: read from the target, or taken from the
end of the previous batch when it ended exactly where this one starts."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from kafka_mirror.config.mm2 import mm2_from_text
from kafka_mirror.engine.batch_writer import BatchWriter, BatchWritten, run_write_hooks
from kafka_mirror.kafka.internal_topics import InternalTopicError

CONFIG = """clusters = A, B
A.bootstrap.servers = 127.0.0.1:1
B.bootstrap.servers = 127.0.0.1:2
A->B.enabled = true
"""


class CountingTarget:
    def __init__(self) -> None:
        self.calls = 0

    def end_offsets(self, partitions: list[tuple[str, int]], timeout: float = 30.0
                    ) -> dict[tuple[str, int], int]:
        self.calls += 1
        return {tp: 100 for tp in partitions}


def test_ends_before_come_from_the_previous_batch_only_when_it_ended_where_this_starts(
    tmp_path: Path,
) -> None:
    flow = mm2_from_text(CONFIG).flows[0]
    writer = BatchWriter(flow, tmp_path, {}, CountingTarget())
    moved = [("t", 0), ("t", 1)]
    start = {("t", 0): 50, ("t", 1): 70}
    assert writer._ends_before(moved, start) is None  # nothing known yet

    writer._last_after = {("A.t", 0): (50, 400), ("A.t", 1): (70, 900)}
    assert writer._ends_before(moved, start) == {("A.t", 0): 400, ("A.t", 1): 900}
    # used once: a batch that failed in between leaves nothing behind
    assert writer._ends_before(moved, start) is None

    # a partition that did not end where this batch starts: read everything from the target
    writer._last_after = {("A.t", 0): (50, 400), ("A.t", 1): (69, 899)}
    assert writer._ends_before(moved, start) is None
    # a partition moving for the first time
    writer._last_after = {("A.t", 0): (50, 400)}
    assert writer._ends_before(moved, start) is None


def test_py4j_does_not_log_a_refused_batch_as_an_error() -> None:
    """py4j logs an exception of a Python callback with ``logger.exception``: the refusal of a
    batch while stopping (StoppingBetweenBatches) is not an error and is not logged."""
    import logging
    import sys

    from kafka_mirror.engine.batch_writer import StoppingBetweenBatches

    py4j = logging.getLogger("py4j.clientserver")

    def record(exc: BaseException) -> logging.LogRecord:
        try:
            raise exc
        except BaseException:
            return py4j.makeRecord(py4j.name, logging.ERROR, __file__, 1, "There was an "
                                   "exception while executing the Python Proxy", (),
                                   sys.exc_info())

    assert not all(f.filter(record(StoppingBetweenBatches("flow a->b: stopping before batch 3")))
                   for f in py4j.filters)
    assert all(f.filter(record(RuntimeError("boom"))) for f in py4j.filters)


def test_a_refused_batch_waits_for_the_stop_and_is_refused_as_an_interruption(
    tmp_path: Path,
) -> None:
    """While stopping, a batch is refused only once the query is no longer active (Spark's
    stop under way), with a Java InterruptedException as its cause: Spark then takes the
    refusal for the stop's interruption and ends the query as stopped, not failed."""
    from types import SimpleNamespace

    import pytest

    from kafka_mirror.engine.batch_writer import StoppingBetweenBatches

    class Interrupted(Exception):
        """Stands for py4j's error of a Java call that threw (its text: the call, then the
        Java exception and its stack trace)."""

    Interrupted.__module__, Interrupted.__name__ = "py4j.protocol", "Py4JJavaError"

    calls: list[str] = []

    class Thread:
        @staticmethod
        def currentThread() -> SimpleNamespace:
            return SimpleNamespace(interrupt=lambda: calls.append("interrupt"))

        @staticmethod
        def sleep(millis: int) -> None:
            calls.append("sleep")
            raise Interrupted("An error occurred while calling z:java.lang.Thread.sleep.\n"
                              ": java.lang.InterruptedException: sleep interrupted\n"
                              + "\tat java.base/java.lang.Thread.sleep(Native Method)\n" * 500)

    jvm = SimpleNamespace(java=SimpleNamespace(lang=SimpleNamespace(Thread=Thread)))
    frame = SimpleNamespace(sparkSession=SimpleNamespace(_jvm=jvm))
    flow = mm2_from_text(CONFIG).flows[0]
    writer = BatchWriter(flow, tmp_path, {}, CountingTarget())
    answers = iter([True, True, False])

    def active() -> bool:
        calls.append("active?")
        return next(answers)

    writer.query_active = active
    writer.stopping.set()
    import re
    import traceback

    with pytest.raises(StoppingBetweenBatches) as refused:
        writer(frame, 7)
    assert writer.refused.is_set()
    assert calls == ["active?", "active?", "active?", "interrupt", "sleep"]
    # what the JVM reads (py4j sends the traceback's text): Spark's PROXY_ERROR expression
    # (StreamExecution.scala, Spark 4.2.0) finds the interruption, and its match starts near the
    # end of the text (the expression's recursion grows with the text after the match's start)
    text = "".join(traceback.format_exception(refused.value))
    proxy_error = re.compile(r"py4j.protocol.Py4JJavaError: An error occurred while calling"
                             r"((.|\r\n|\r|\n)*)(java.lang.InterruptedException|"
                             r"java.io.InterruptedIOException|"
                             r"java.nio.channels.ClosedByInterruptException)")
    found = proxy_error.search(text)
    assert found is not None, text
    assert len(text) - found.start() < 300, text
    assert "StoppingBetweenBatches: flow A->B: stopping before batch 7; py4j" in text


def test_records_of_another_producer_on_the_target_are_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    """Exactly once assumes the flow alone writes its target partitions: a partition that grew
    by more than the batch copied, or that holds more than when the flow last saw it (a dead
    run's request a throttling broker held back), is reported with the count."""
    from kafka_mirror.engine.exactly_once import TargetEnds

    flow = mm2_from_text(CONFIG).flows[0]
    ends = TargetEnds(tmp_path / "target-ends.json")
    ends.record({("t", 0): (100, 400), ("t", 1): (70, 900)})
    writer = BatchWriter(flow, tmp_path, {}, CountingTarget(), ends, recount=False)
    moved = [("t", 0), ("t", 1)]
    start = {("t", 0): 100, ("t", 1): 70}
    late = writer._late_writes(moved, start, {("A.t", 0): 415, ("A.t", 1): 900}, 7)
    assert late == ("A.t[0] holds 15 records more (offsets 400..414) than when the flow last saw "
                    "its end at source offset 100")
    assert "A.t[0] holds 15 records more (offsets 400..414)" in caplog.text
    assert "they are on the target twice" in caplog.text
    assert "A.t[1]" not in caplog.text
    assert writer._late_writes(moved, start, {("A.t", 0): 400, ("A.t", 1): 900}, 7) == ""
    caplog.clear()
    end = {("t", 0): 110, ("t", 1): 80}
    writer._report_foreign_writes(moved, start, end, {("A.t", 0): 415, ("A.t", 1): 900},
                                  {("A.t", 0): 425, ("A.t", 1): 913}, 8)
    assert "A.t[1] grew by 3 records more than the batch copied (offsets 900..912)" in caplog.text
    assert "A.t[0]" not in caplog.text


def test_records_landing_late_refuse_the_batch_so_the_flow_counts_them(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A cut batch's records that reach the target after the restart counted it (a broker that
    stopped mid-write shows them only a while after it started again): the first batch that
    finds them is refused and names them, and the flow restarts the query, whose exactly-once
    restart counts them; nothing is written meanwhile."""
    from kafka_mirror.engine import batch_writer as module
    from kafka_mirror.engine.exactly_once import TargetEnds

    flow = mm2_from_text(CONFIG).flows[0]
    ends = TargetEnds(tmp_path / "target-ends.json")
    ends.record({("t", 0): (100, 400)})
    writer = BatchWriter(flow, tmp_path, {}, CountingTarget(), ends)
    monkeypatch.setattr(module, "batch_start_positions", lambda _c, _b: {("t", 0): 100})
    monkeypatch.setattr(module, "batch_end_positions", lambda _c, _b: {("t", 0): 120})
    monkeypatch.setattr(writer, "_check_source", lambda *_a: None)
    monkeypatch.setattr(writer, "_end_offsets", lambda _p, _b: {("A.t", 0): 542})

    class Refused(Exception):
        pass

    def refuse(_frame: object, batch_id: int) -> None:
        raise Refused(batch_id)

    monkeypatch.setattr(writer, "_refuse", refuse)
    with pytest.raises(Refused):
        writer(object(), 0)
    assert writer.late_writes == ("A.t[0] holds 142 records more (offsets 400..541) than when "
                                  "the flow last saw its end at source offset 100")
    assert writer.refused.is_set() and not writer.writing.is_set()
    assert "the query restarts to count them before writing" in caplog.text


def test_a_write_the_stop_interrupts_past_its_grace_ends_the_query_as_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past the stop's grace period Spark interrupts the write itself: its error (py4j's text
    of the Java InterruptedException and its whole stack trace) goes back as its first two
    lines, which Spark's match finds without overflowing the stream thread's stack; a failure
    while not stopping goes back as it is."""
    import re
    import traceback

    from kafka_mirror.engine.batch_writer import StoppingBetweenBatches

    class Interrupted(Exception):
        pass

    Interrupted.__module__, Interrupted.__name__ = "py4j.protocol", "Py4JJavaError"
    text = ("An error occurred while calling o168.save.\n: java.lang.InterruptedException\n"
            + "\tat java.base/java.lang.Object.wait(Native Method)\n" * 500)
    flow = mm2_from_text(CONFIG).flows[0]
    writer = BatchWriter(flow, tmp_path, {}, CountingTarget())

    def interrupted(frame: object, batch_id: int) -> None:
        writer.writing.set()
        raise Interrupted(text)

    monkeypatch.setattr(writer, "_write", interrupted)
    with pytest.raises(Interrupted):  # not stopping: a failure, retried by the flow
        writer(None, 3)
    writer.stopping.set()
    with pytest.raises(StoppingBetweenBatches) as stopped:
        writer(None, 4)
    message = "".join(traceback.format_exception(stopped.value))
    found = re.search(r"py4j.protocol.Py4JJavaError: An error occurred while calling"
                      r"((.|\r\n|\r|\n)*)(java.lang.InterruptedException)", message)
    assert found is not None and len(message) - found.start() < 300, message
    assert "flow A->B: batch 4 interrupted by the stop" in message
    assert writer.writing.is_set() and not writer.in_batch.is_set()  # the restart waits for it


class FailingHook:
    def __init__(self, error: Exception) -> None:
        self.error = error

    def on_written(self, event: BatchWritten) -> None:
        raise self.error


class CountingHook:
    def __init__(self) -> None:
        self.events: list[BatchWritten] = []

    def on_written(self, event: BatchWritten) -> None:
        self.events.append(event)


def test_a_hook_that_fails_leaves_the_others_a_cluster_fault_as_a_warning_a_defect_with_its_stack(
    caplog: pytest.LogCaptureFixture,
) -> None:
    flow = mm2_from_text(CONFIG).flows[0]
    event = BatchWritten(flow, 7, (), 0, 0)
    after = CountingHook()
    unanswered = InternalTopicError("offset syncs not written to", "mm2-offset-syncs.B.internal",
                                    "A", "5 record(s) not acknowledged within 30s")
    with caplog.at_level(logging.WARNING, logger="kafka_mirror.engine.batch_writer"):
        run_write_hooks([FailingHook(unanswered), FailingHook(KeyError("bug")), after], event)
    assert after.events == [event]
    (fault, defect) = caplog.records
    assert fault.levelno == logging.WARNING and fault.exc_info is None
    assert "not acknowledged within 30s" in fault.getMessage()
    assert defect.levelno == logging.ERROR and defect.exc_info is not None
