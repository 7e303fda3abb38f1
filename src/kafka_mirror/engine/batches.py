"""What happens after each committed micro-batch: the hook point of the control plane.

Spark reports a batch's progress only after its commit is recorded, and the batch writer returns
only after the producer flushed with acks from the target; so when a hook runs, everything up
to ``source_end`` is on the target. (Hooks that need exact target offsets attach to the batch
writer instead: progress events arrive while the next batch is already writing.)
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from kafka_mirror.config.model import FlowSpec
from kafka_mirror.engine.batch_writer import BatchWritten
from kafka_mirror.engine.positions import Positions

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BatchCommitted:
    """One committed micro-batch of one flow (or an idle trigger, when ``records`` is 0)."""

    flow: FlowSpec
    batch_id: int
    source_start: Positions
    source_end: Positions
    source_latest: Positions
    target_end: Positions
    records: int
    bytes: int
    input_rate: float
    process_rate: float
    duration: float = 0.0  # seconds the batch took
    observed: Mapping[str, Any] = field(default_factory=dict)  # the flow's observe() row
    # when the batch was planned (Unix time): when Spark read ``source_latest``
    planned: float | None = None
    # where the batch's time went, ms: Spark's ``durationMs`` (triggerExecution, latestOffset,
    # walCommit, addBatch, commitOffsets, ...) and the batch writer's steps within addBatch
    phases_ms: Mapping[str, float] = field(default_factory=dict)

    @property
    def moved(self) -> bool:
        return self.source_end != self.source_start

    @property
    def lag(self) -> int:
        """Records (offsets) on the source not yet on the target, after this batch."""
        return sum(
            max(0, latest - self.source_end.get(tp, latest))
            for tp, latest in self.source_latest.items()
        )


class BatchHook(Protocol):
    def on_batch(self, event: BatchCommitted) -> None: ...


def parse_offsets(text: Any) -> Positions:
    """Kafka source offsets as Spark reports them (JSON text, or already parsed)."""
    if not text or text in ("None", "null"):
        return {}
    parsed = json.loads(text) if isinstance(text, str) else text
    if not isinstance(parsed, dict):
        return {}
    return {
        (topic, int(p)): int(o)
        for topic, parts in parsed.items()
        if isinstance(parts, dict)
        for p, o in parts.items()
    }


def progress_time(text: Any) -> float | None:
    """A progress event's ``timestamp`` (ISO 8601, UTC) as Unix time; None when unreadable."""
    if not isinstance(text, str) or not text:
        return None
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def observed_row(progress: Any, name: str) -> dict[str, Any]:
    """What the flow's ``observe`` computed over the batch."""
    metrics = getattr(progress, "observedMetrics", None) or {}
    row = metrics.get(name)
    if row is None:
        return {}
    return dict(row.asDict() if hasattr(row, "asDict") else row)


def event_from_progress(
    flow: FlowSpec, progress: Any, written: BatchWritten | None,
    row: Mapping[str, Any] | None = None,
) -> BatchCommitted:
    """The committed batch as Spark's progress reports it, with the sizes and target offsets
    its :class:`BatchWriter` measured."""
    source = progress.sources[0]
    start = parse_offsets(source.startOffset)
    end = parse_offsets(source.endOffset)
    moved = end != start and written is not None
    return BatchCommitted(
        flow=flow,
        batch_id=int(progress.batchId),
        source_start=start,
        source_end=end,
        source_latest=parse_offsets(source.latestOffset),
        target_end=written.target_end if moved and written else {},
        records=written.records if moved and written else 0,
        bytes=written.bytes if moved and written else 0,
        input_rate=float(progress.inputRowsPerSecond or 0.0),
        process_rate=float(progress.processedRowsPerSecond or 0.0),
        duration=float(getattr(progress, "batchDuration", 0) or 0) / 1000.0,
        observed=dict(row or {}),
        planned=progress_time(getattr(progress, "timestamp", None)),
        phases_ms=batch_phases(progress, written),
    )


def batch_phases(progress: Any, written: BatchWritten | None) -> dict[str, float]:
    """Spark's ``durationMs`` of the batch, plus the writer's own steps when it wrote."""
    phases = {str(k): float(v) for k, v in (getattr(progress, "durationMs", None) or {}).items()}
    if written is not None:
        phases |= {f"writer.{k}": v for k, v in written.timings.items()}
    return phases


def run_hooks(hooks: Sequence[BatchHook], event: BatchCommitted) -> None:
    for hook in hooks:
        try:
            hook.on_batch(event)
        except Exception:
            log.exception("flow %s: batch hook %s failed", event.flow.name, type(hook).__name__)
