"""What a (re)start that skipped records of a cut batch logs (kafka_mirror.runtime.
exactly_once_restart): a line per partition for the first few, then one summary, so that a
takeover at thousands of partitions does not print a line each at INFO."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from kafka_mirror.config.mm2 import mm2_from_text
from kafka_mirror.engine.exactly_once import Skip, TargetEnds
from kafka_mirror.observability.null_metrics import NullMetrics
from kafka_mirror.runtime.exactly_once_restart import SKIP_LINES, ExactlyOnceRestart

FLOW = mm2_from_text("clusters = A, B\nA.bootstrap.servers = a1:9092\n"
                     "B.bootstrap.servers = b1:9092\nA->B.enabled = true\n").flows[0]


def _restart(tmp_path: Path, hooked: list[Any]) -> ExactlyOnceRestart:
    class Hook:
        def on_written(self, written: Any) -> None:
            hooked.append(written)

    return ExactlyOnceRestart(FLOW, None, TargetEnds(tmp_path / "ends.json"),  # type: ignore[arg-type]
                              [Hook()], lambda: None, NullMetrics())  # type: ignore[list-item]


@pytest.mark.parametrize("partitions", [3, 2000])
def test_skips_are_logged_a_line_each_for_the_first_few_then_summed_up(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, partitions: int) -> None:
    hooked: list[Any] = []
    skips = [Skip("orders", p, 10, 12, 100, 102) for p in range(partitions)]
    with caplog.at_level(logging.INFO, logger="kafka_mirror.runtime.exactly_once_restart"):
        assert _restart(tmp_path, hooked)._record_skips(skips) == 2 * partitions
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    each = [line for line in lines if "records of the batch cut short are already" in line]
    assert len(each) == min(partitions, SKIP_LINES)
    assert "orders[0]: 2 records of the batch cut short are already on the target " \
        "(A.orders[0] offsets 100..101): resuming at source offset 12 instead of 10" in each[0]
    if partitions > SKIP_LINES:
        assert lines[-1].endswith(
            f"and {partitions - SKIP_LINES} partitions more with {2 * (partitions - SKIP_LINES)} "
            "records of the batch cut short already on the target, skipped likewise "
            f"({2 * partitions} records in all; each partition's line at DEBUG)")
        assert len(lines) == SKIP_LINES + 1
    else:
        assert len(lines) == partitions
    # every skipped range reaches the write hooks (offset translation, offset syncs)
    (written,) = hooked
    assert len(written.copies) == partitions
