"""One flow as a Structured Streaming query: Kafka source to Kafka sink, all in the JVM."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kafka_mirror.config.model import FlowSpec
from kafka_mirror.engine.batch_writer import BatchWriter
from kafka_mirror.engine.observation import observe_columns
from kafka_mirror.engine.realtime import RealTimeWriter
from kafka_mirror.kafka.clients import OFFSET_HEADER, TIMESTAMP_HEADER, spark_source_options
from kafka_mirror.mm2.policy import sql_string

OBSERVATION = "kafka_mirror"
# io.kafkamirror.source.GroupedKafkaSource (jvm/source)
SOURCE_FORMAT = "kafka-mirror"

# The source timestamp travels as the last header; the producer interceptor turns it back
# into the record timestamp (Spark's Kafka sink has no timestamp column).
_MARKERS = (
    "CASE WHEN headers IS NULL THEN array({marker}) ELSE concat(headers, array({marker})) END"
)


def _marker(key: str, column: str) -> str:
    value = f"cast(cast({column} AS STRING) AS BINARY)"
    return f"named_struct('key', {sql_string(key)}, 'value', {value})"


_HEADERS = _MARKERS.format(marker=_marker(TIMESTAMP_HEADER, "unix_millis(timestamp)"))
# real-time mode: the source offset follows, for the interceptor's record of where each record
# landed (kafka_mirror.engine.realtime)
_REALTIME_HEADERS = _MARKERS.format(marker=", ".join((
    _marker(TIMESTAMP_HEADER, "unix_millis(timestamp)"), _marker(OFFSET_HEADER, "offset"))))


def mirror_frame(
    spark: Any, flow: FlowSpec, assignment: dict[str, int], start: str, with_latency: bool = False,
    groups: int | None = None, write_gate: str | None = None,
) -> Any:
    """The streaming DataFrame of target records for the assigned source partitions; in
    micro-batch mode its ``observe`` counts records and bytes (and, ``with_latency``, what the
    replication latency metric needs: :func:`kafka_mirror.engine.observation.observe_columns`); in
    real-time mode the producer interceptor counts them as the target acknowledges them.

    The source is kafka-mirror's own (``jvm/source``, format ``kafka-mirror``): the partitions
    are read in ``groups`` groups (default: one per Spark task slot), each by one task through
    one Kafka consumer kept between batches, and a micro-batch reads only the partitions that
    have new records. ``write_gate`` names the flow's gate in the driver's JVM
    (:mod:`kafka_mirror.engine.write_gate`): no record is read while it is closed."""
    reader = spark.readStream.format(SOURCE_FORMAT)
    for key, value in spark_source_options(flow).items():
        reader = reader.option(key, value)
    if groups is None:
        groups = int(spark.sparkContext.defaultParallelism)
    assign = {topic: list(range(count)) for topic, count in sorted(assignment.items())}
    source = (
        reader.option("assign", json.dumps(assign, separators=(",", ":")))
        .option("startingOffsets", start)
        .option("groups", str(max(1, groups)))
    )
    if write_gate:
        source = source.option("writeGate", write_gate)
    return _target_records(source.load(), flow, assignment, with_latency)


def _target_records(source: Any, flow: FlowSpec, assignment: dict[str, int],
                    with_latency: bool) -> Any:
    """``source`` (rows of the source's schema) observed and turned into target records."""
    from pyspark.sql import functions

    observed = source
    if not flow.realtime:
        size = "coalesce(length(key), 0) + coalesce(length(value), 0)"
        aggregates = {"records": "count(1)", "bytes": f"sum({size})"}
        if with_latency:
            aggregates |= observe_columns()
        observed = source.observe(
            OBSERVATION, *(functions.expr(sql).alias(name) for name, sql in aggregates.items())
        )
    return observed.selectExpr(
        f"{flow.policy.spark_topic_expression(flow.source.alias, assignment)} AS topic",
        "partition",
        "key",
        "value",
        f"{_REALTIME_HEADERS if flow.realtime else _HEADERS} AS headers",
    )


# one row of the source's schema (jvm/source Rows.SCHEMA), made up
_MADE_UP_ROW = (
    "CAST(NULL AS BINARY) AS key", "CAST('' AS BINARY) AS value", "{topic} AS topic",
    "0 AS partition", "id AS offset", "current_timestamp() AS timestamp", "0 AS timestampType",
    "CAST(NULL AS ARRAY<STRUCT<key: STRING, value: BINARY>>) AS headers",
)


def warm_frame(spark: Any, flow: FlowSpec, assignment: dict[str, int],
               with_latency: bool = False) -> None:
    """What a standby does once so that its first batch after a takeover does not load Spark:
    the flow's frame built (data source lookup, SQL parser, analyzer) with a ``foreachBatch``
    writer (PySpark's callback server), started never; and one local job of a made-up row
    through the same observation and projection into Spark's ``noop`` sink (code generation,
    the scheduler, a task). Nothing is read from or written to a cluster."""
    frame = mirror_frame(spark, flow, assignment, "latest", with_latency)
    if not flow.realtime:  # a real-time query has no foreachBatch writer
        frame.writeStream.foreachBatch(lambda _frame, _batch_id: None)
    topic = sql_string(min(assignment)) if assignment else "''"
    rows = spark.range(0, 1, 1, 1).selectExpr(*(c.format(topic=topic) for c in _MADE_UP_ROW))
    _target_records(rows, flow, assignment, with_latency).write.format("noop") \
        .mode("overwrite").save()


def start_query(
    spark: Any,
    flow: FlowSpec,
    assignment: dict[str, int],
    start: str,
    checkpoint: Path,
    batch_writer: BatchWriter | RealTimeWriter,
    with_latency: bool = False,
    groups: int | None = None,
    write_gate: str | None = None,
) -> Any:
    """Start the flow's query; each batch is flushed (acks=all) before Spark commits it."""
    frame = mirror_frame(spark, flow, assignment, start, with_latency, groups, write_gate)
    if isinstance(batch_writer, RealTimeWriter):
        return _start_realtime(frame, flow, checkpoint, batch_writer.sink_options)
    writer = frame.writeStream.foreachBatch(batch_writer)
    writer = writer.option("checkpointLocation", str(checkpoint)).queryName(flow.path_name)
    if flow.trigger_interval_ms > 0:
        writer = writer.trigger(processingTime=f"{flow.trigger_interval_ms} milliseconds")
    return writer.start()


def _start_realtime(frame: Any, flow: FlowSpec, checkpoint: Path, sink_options: dict[str, str]
                    ) -> Any:
    """Real-time mode: Spark's Kafka sink writes each record as it is read; every
    ``mirror.realtime.batch.duration.ms`` the tasks flush, Spark commits the positions they
    reached and starts the next batch at once."""
    writer = frame.writeStream.format("kafka").outputMode("update").options(**sink_options)
    writer = writer.option("checkpointLocation", str(checkpoint)).queryName(flow.path_name)
    return writer.trigger(realTime=f"{flow.realtime_batch_ms} milliseconds").start()
