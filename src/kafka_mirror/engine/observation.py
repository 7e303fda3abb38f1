"""What a batch observes of its records in the JVM for the replication latency metric
(:mod:`kafka_mirror.observability.metrics` turns the counts into a histogram)."""

from __future__ import annotations

# ages (ms, at the batch's start) the JVM counts records under; the buckets less a batch's run
# time fall between them
AGE_GRID_MS = (0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 20_000,
               30_000, 60_000, 120_000, 300_000)


def observe_columns() -> dict[str, str]:
    """Spark SQL aggregates over a batch's source rows (column ``timestamp``) that latency
    needs: the batch's own time (``current_timestamp()`` is fixed per micro-batch), the mean and
    oldest record time, and per grid age the records at most that old."""
    ts = "unix_millis(timestamp)"
    now = "unix_millis(current_timestamp())"
    columns = {
        "batch_ms": f"max({now})",
        "ts_avg_ms": f"avg({ts})",
        "ts_min_ms": f"min({ts})",
    }
    for age in AGE_GRID_MS:
        columns[f"age_le_{age}"] = f"count_if({now} - {ts} <= {age})"
    return columns
