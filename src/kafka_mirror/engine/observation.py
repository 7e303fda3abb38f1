"""What a batch observes of its records in the JVM for the replication latency metric
(:mod:`kafka_mirror.observability.metrics` turns the counts into a histogram)."""

from __future__ import annotations

from typing import Any

# ages (ms, at the batch's start) the JVM counts records under; the buckets less a batch's run
# time fall between them
AGE_GRID_MS = (0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 20_000,
               30_000, 60_000, 120_000, 300_000)


def observe_columns(with_latency: bool = False) -> list[Any]:
    """The aggregates a micro-batch observes over its source rows (Spark columns): its records
    and their key and value bytes; ``with_latency``, what the latency metric needs as well: the
    batch's own time (``current_timestamp()`` is fixed per micro-batch), the mean and oldest
    record time, and per grid age the records at most that old."""
    from pyspark.sql import functions as F

    def size(column: str) -> Any:
        return F.coalesce(F.length(F.col(column)), F.lit(0))

    columns = [F.count(F.lit(1)).alias("records"),
               F.sum(size("key") + size("value")).alias("bytes")]
    if not with_latency:
        return columns
    ts = F.unix_millis(F.col("timestamp"))
    now = F.unix_millis(F.current_timestamp())
    columns += [F.max(now).alias("batch_ms"), F.avg(ts).alias("ts_avg_ms"),
                F.min(ts).alias("ts_min_ms")]
    columns += [F.count_if(now - ts <= F.lit(age)).alias(f"age_le_{age}")
                for age in AGE_GRID_MS]
    return columns
