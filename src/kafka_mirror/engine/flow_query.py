"""One flow as a Structured Streaming query: Kafka source to Kafka sink, all in the JVM."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kafka_mirror.clients import TIMESTAMP_HEADER, spark_sink_options, spark_source_options
from kafka_mirror.config.model import FlowSpec
from kafka_mirror.policy import sql_string

OBSERVATION = "kafka_mirror"

# The source timestamp travels as the last header; the producer interceptor turns it back
# into the record timestamp (Spark's Kafka sink has no timestamp column).
_HEADERS = (
    "CASE WHEN headers IS NULL THEN array({marker}) "
    "ELSE concat(headers, array({marker})) END"
).format(
    marker=(
        f"named_struct('key', {sql_string(TIMESTAMP_HEADER)}, "
        "'value', cast(cast(unix_millis(timestamp) AS STRING) AS BINARY))"
    )
)


def expr(text: str) -> Any:
    from pyspark.sql import functions

    return functions.expr(text)


def mirror_frame(spark: Any, flow: FlowSpec, assignment: dict[str, int], start: str) -> Any:
    """The streaming DataFrame of target records for the assigned source partitions."""
    reader = spark.readStream.format("kafka")
    for key, value in spark_source_options(flow).items():
        reader = reader.option(key, value)
    assign = {topic: list(range(count)) for topic, count in sorted(assignment.items())}
    source = (
        reader.option("assign", json.dumps(assign, separators=(",", ":")))
        .option("startingOffsets", start)
        .load()
    )
    out = source.selectExpr(
        f"{flow.policy.spark_topic_expression(flow.source.alias)} AS topic",
        "partition",
        "key",
        "value",
        f"{_HEADERS} AS headers",
    )
    size = "coalesce(length(key), 0) + coalesce(length(value), 0)"
    return out.observe(
        OBSERVATION, expr("count(1)").alias("records"), expr(f"sum({size})").alias("bytes")
    )


def start_query(
    spark: Any, flow: FlowSpec, assignment: dict[str, int], start: str, checkpoint: Path
) -> Any:
    """Start the flow's query; the sink flushes (acks=all) before a batch commits."""
    writer = mirror_frame(spark, flow, assignment, start).writeStream.format("kafka")
    for key, value in spark_sink_options(flow).items():
        writer = writer.option(key, value)
    writer = writer.option("checkpointLocation", str(checkpoint)).queryName(flow.path_name)
    if flow.trigger_interval_ms > 0:
        writer = writer.trigger(processingTime=f"{flow.trigger_interval_ms} milliseconds")
    return writer.start()
