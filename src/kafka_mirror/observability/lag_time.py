"""Lag in seconds per partition without reading records, as kafka-lag-exporter estimates it.

Every progress event of a flow already carries, per source partition, the source's end offset
(``latestOffset``, read when the batch was planned) and the mirror's position after the batch.
Each partition keeps a small table of (end offset, wall time it was first seen); the lag in
seconds is how long ago the end offset was first seen past the mirror's position, i.e. since the
oldest record the mirror has not copied was known to exist on the source; 0 when the mirror is at
the end.

Resolution: the end offset is sampled once per progress event (once per batch while records
flow, every ``spark.sql.streaming.noDataProgressEventInterval``, 10 s by default, when idle), so
the value is a lower bound of the oldest unmirrored record's age, low by at most the time between
two samples. Entries the mirror has passed are dropped; when a partition keeps more than
:data:`TABLE_SIZE` (the mirror far behind a source that keeps growing), every other older entry
is dropped, which halves the resolution of the table's old end but keeps its time span. The value
is computed when Prometheus scrapes, so it keeps growing while a flow is stuck.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

TABLE_SIZE = 64


class PartitionLagClock:
    """One partition's table of (source end offset, wall time first seen), oldest first."""

    def __init__(self, size: int = TABLE_SIZE) -> None:
        self.size = max(2, size)
        self.table: list[tuple[int, float]] = []
        self.position = 0

    def observe(self, end: int, position: int, at: float) -> None:
        """The source end offset ``end`` was seen at ``at`` (Unix time); the mirror's next
        offset to copy is ``position``."""
        if self.table and end < self.table[-1][0]:
            self.table.clear()  # the topic was deleted and created again: offsets restart
        self.position = position
        if not self.table or end > self.table[-1][0]:
            self.table.append((end, at))
        # entries at or below the position are behind the mirror; the first entry past it
        # tells when the oldest uncopied record was first known
        keep = next((i for i, (offset, _) in enumerate(self.table) if offset > position),
                    len(self.table))
        del self.table[:keep]
        if len(self.table) > self.size:
            newest = self.table[-1]
            self.table = [*self.table[:-1][::2], newest]

    def seconds(self, now: float) -> float:
        """Seconds since the source's end was first seen past the mirror's position."""
        if not self.table or self.table[-1][0] <= self.position:
            return 0.0
        return max(0.0, now - self.table[0][1])


class FlowLagClock:
    """Every partition of one flow; thread-safe (progress events and scrapes race)."""

    def __init__(self, size: int = TABLE_SIZE) -> None:
        self.size = size
        self.partitions: dict[tuple[str, int], PartitionLagClock] = {}
        self._lock = threading.Lock()

    def observe(self, latest: Mapping[tuple[str, int], int],
                position: Mapping[tuple[str, int], int], at: float) -> None:
        with self._lock:
            for tp, end in latest.items():
                clock = self.partitions.setdefault(tp, PartitionLagClock(self.size))
                clock.observe(end, position.get(tp, end), at)

    def seconds(self, tp: tuple[str, int], now: float) -> float:
        with self._lock:
            clock = self.partitions.get(tp)
            return clock.seconds(now) if clock is not None else 0.0

    def max_seconds(self, now: float) -> float | None:
        with self._lock:
            if not self.partitions:
                return None
            return max(c.seconds(now) for c in self.partitions.values())

    def forget(self, tp: tuple[str, int]) -> None:
        with self._lock:
            self.partitions.pop(tp, None)
