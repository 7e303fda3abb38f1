"""Progress a person can read while the mirror runs: per flow totals, rates and lag."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from kafka_mirror.engine.batches import BatchCommitted

log = logging.getLogger("kafka_mirror.progress")


@dataclass
class FlowTotals:
    records: int = 0
    bytes: int = 0
    batches: int = 0
    reported_at: float = field(default_factory=time.monotonic)
    reported_records: int = 0
    reported_bytes: int = 0


class ProgressReporter:
    """Logs one line per flow at most every ``interval`` seconds."""

    def __init__(self, interval: float = 10.0) -> None:
        self.interval = interval
        self.totals: dict[str, FlowTotals] = {}

    def on_batch(self, event: BatchCommitted) -> None:
        name = event.flow.name
        totals = self.totals.setdefault(name, FlowTotals())
        if event.moved:
            totals.records += event.records
            totals.bytes += event.bytes
            totals.batches += 1
        now = time.monotonic()
        elapsed = now - totals.reported_at
        if totals.batches > 1 and elapsed < self.interval:
            return
        records = totals.records - totals.reported_records
        size = totals.bytes - totals.reported_bytes
        if totals.reported_records == 0 or elapsed < 1.0:
            # nothing to measure against yet: Spark's rate for the batch itself
            rate = event.process_rate
            byte_rate = rate * (event.bytes / event.records) if event.records else 0.0
        else:
            rate, byte_rate = records / elapsed, size / elapsed
        log.info(
            "flow %s: %d records, %.1f MB copied in %d batches; %.0f records/s, %.2f MB/s; "
            "lag %d records",
            name,
            totals.records,
            totals.bytes / 1e6,
            totals.batches,
            rate,
            byte_rate / 1e6,
            event.lag,
        )
        totals.reported_at = now
        totals.reported_records = totals.records
        totals.reported_bytes = totals.bytes
