"""The progress line: totals, rate, lag and where each batch's time went."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from kafka_mirror.config.mm2 import mm2_from_text
from kafka_mirror.engine.batch_writer import BatchWritten
from kafka_mirror.engine.batches import event_from_progress
from kafka_mirror.engine.realtime import RealTimeProgress, parse_ranges
from kafka_mirror.observability.progress import ProgressReporter, batch_time_text

CONFIG = """clusters = A, B
A.bootstrap.servers = 127.0.0.1:1
B.bootstrap.servers = 127.0.0.1:2
A->B.enabled = true
"""


def _progress(batch: int, start: int, end: int) -> SimpleNamespace:
    source = SimpleNamespace(
        startOffset=f'{{"t":{{"0":{start}}}}}', endOffset=f'{{"t":{{"0":{end}}}}}',
        latestOffset=f'{{"t":{{"0":{end}}}}}')
    return SimpleNamespace(
        sources=[source], batchId=batch, inputRowsPerSecond=10.0, processedRowsPerSecond=10.0,
        batchDuration=300, timestamp="2026-11-24T21:00:00.000Z",
        durationMs={"triggerExecution": 300, "latestOffset": 20, "walCommit": 30,
                    "addBatch": 200, "commitOffsets": 40, "queryPlanning": 10})


def test_batch_phases_in_the_event_and_the_progress_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    flow = mm2_from_text(CONFIG).flows[0]
    reporter = ProgressReporter(interval=0.0)
    with caplog.at_level(logging.INFO, logger="kafka_mirror.observability.progress"):
        for batch in range(2):
            written = BatchWritten(flow, batch, (), 5, 50,
                                   {"targetEndsBefore": 4.0, "write": 150.0,
                                    "targetEndsAfter": 6.0})
            event = event_from_progress(flow, _progress(batch, batch * 5, batch * 5 + 5), written)
            assert event.phases_ms["addBatch"] == 200.0
            assert event.phases_ms["writer.write"] == 150.0
            reporter.on_batch(event)
    line = caplog.records[-1].getMessage()
    assert "10 records" in line
    assert ("per batch 300 ms: latestOffset 20, queryPlanning 10, walCommit 30, addBatch 200, "
            "commitOffsets 40 (writer: targetEndsBefore 4, write 150, targetEndsAfter 6)") in line


def test_batch_time_text_without_batches_is_empty() -> None:
    assert batch_time_text({}, 0) == ""
    assert batch_time_text({"addBatch": 5.0}, 1) == ""


def test_a_realtime_flow_logs_every_interval_without_batches(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Real-time mode reports every drain (about once a second): one line per interval, with
    the records of every drain since, and no batch count (drains are not batches)."""
    flow = mm2_from_text(CONFIG + "mirror.mode = realtime\n").flows[0]
    reporter = ProgressReporter(interval=3600.0)
    progress = RealTimeProgress(flow)
    with caplog.at_level(logging.INFO, logger="kafka_mirror.observability.progress"):
        for drain in range(3):
            progress.add(parse_ranges(flow, {"t": 1}, (
                f"A.t\t0\t{drain * 5}\t{drain * 5 + 5}\t{drain * 5}\t{drain * 5 + 5}\t1\t5\t50\t3\n"
            )))
            reporter.on_batch(progress.report({("t", 0): drain * 5 + 5}, {("t", 0): 20}))
        assert not caplog.records  # within the interval
        reporter.interval = 0.0
        reporter.on_batch(progress.report({("t", 0): 15}, {("t", 0): 20}))
    line = caplog.records[-1].getMessage()
    assert line.startswith("flow A->B: 15 records, 0.0 MB copied; ") and "batches" not in line
    assert line.endswith("lag 5 records")
