"""Progress a person can read while the mirror runs: per flow totals, rates and lag."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from kafka_mirror.engine.batches import BatchCommitted

log = logging.getLogger("kafka_mirror.observability.progress")


@dataclass
class FlowTotals:
    records: int = 0
    bytes: int = 0
    batches: int = 0
    reported_at: float = field(default_factory=time.monotonic)
    reported_records: int = 0
    reported_bytes: int = 0
    # since the last line: batches that moved records, and the ms of each phase summed
    window_batches: int = 0
    window_phases: dict[str, float] = field(default_factory=dict)


class ProgressReporter:
    """Logs one line per flow at most every ``interval`` seconds (in micro-batch mode the first
    two batches at once; real-time mode reports every second, its drains are not batches)."""

    def __init__(self, interval: float = 10.0) -> None:
        self.interval = interval
        self.totals: dict[str, FlowTotals] = {}

    def on_batch(self, event: BatchCommitted) -> None:
        name = event.flow.name
        totals = self.totals.setdefault(name, FlowTotals())
        if event.moved or event.records:
            totals.records += event.records
            totals.bytes += event.bytes
            totals.batches += 1
            totals.window_batches += 1
            for phase, ms in event.phases_ms.items():
                totals.window_phases[phase] = totals.window_phases.get(phase, 0.0) + ms
        now = time.monotonic()
        elapsed = now - totals.reported_at
        if (totals.batches > 1 or event.flow.realtime) and elapsed < self.interval:
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
            "flow %s: %d records, %.1f MB copied%s; %.0f records/s, %.2f MB/s; lag %d records%s",
            name,
            totals.records,
            totals.bytes / 1e6,
            "" if event.flow.realtime else f" in {totals.batches} batches",
            rate,
            byte_rate / 1e6,
            event.lag,
            batch_time_text(totals.window_phases, totals.window_batches),
        )
        totals.window_batches = 0
        totals.window_phases = {}
        totals.reported_at = now
        totals.reported_records = totals.records
        totals.reported_bytes = totals.bytes


# Spark's phases of a micro-batch, in the order they run (durationMs keys), then the batch
# writer's steps inside addBatch
_PHASES = ("latestOffset", "queryPlanning", "walCommit", "addBatch", "commitOffsets")
_WRITER = ("writer.sourceEpochs", "writer.targetEndsBefore", "writer.write",
           "writer.targetEndsAfter")


def batch_time_text(phases: dict[str, float], batches: int) -> str:
    """``; per batch 950 ms: latestOffset 20, ...`` (averages), or '' without batches."""
    if not batches or "triggerExecution" not in phases:
        return ""
    parts = [f"{p} {phases[p] / batches:.0f}" for p in _PHASES if p in phases]
    writer = [f"{p.removeprefix('writer.')} {phases[p] / batches:.0f}" for p in _WRITER
              if p in phases]
    text = f"; per batch {phases['triggerExecution'] / batches:.0f} ms: " + ", ".join(parts)
    return text + (" (writer: " + ", ".join(writer) + ")" if writer else "")
