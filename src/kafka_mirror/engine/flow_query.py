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
from kafka_mirror.mm2.policy import TargetTopicNames

OBSERVATION = "kafka_mirror"
# io.kafkamirror.source.GroupedKafkaSource (jvm/source)
SOURCE_FORMAT = "kafka-mirror"

# The source timestamp travels as the last header; the producer interceptor turns it back
# into the record timestamp (Spark's Kafka sink has no timestamp column). In real-time mode the
# source offset follows, for the interceptor's record of where each record landed
# (kafka_mirror.engine.realtime). Every column is built with the DataFrame API, not Spark SQL
# text: a query's start then never runs Spark's SQL parser, whose first use in a JVM (its
# grammar's tables built) took about 0.25 s of a mirror's start on a 2-core machine.


def _marker(key: str, column: Any) -> Any:
    """One header: ``key`` and ``column``'s value as text."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import BinaryType, StringType

    return F.struct(F.lit(key).alias("key"),
                    column.cast(StringType()).cast(BinaryType()).alias("value"))


def _headers(realtime: bool) -> Any:
    """The source record's headers with the markers after them."""
    from pyspark.sql import functions as F

    markers = [_marker(TIMESTAMP_HEADER, F.unix_millis(F.col("timestamp")))]
    if realtime:
        markers.append(_marker(OFFSET_HEADER, F.col("offset")))
    added = F.array(*markers)
    headers = F.col("headers")
    return F.when(headers.isNull(), added).otherwise(F.concat(headers, added))


def topic_column(names: TargetTopicNames) -> Any:
    """The target topic of each record, from its source column ``topic``."""
    from pyspark.sql import functions as F

    topic = F.col("topic")
    if names.names is not None:
        # one text literal that the optimizer folds into a map (a topic's name holds neither
        # "," nor ":"): a CASE built a branch at a time made py4j calls per topic and copied
        # the branches at each (4 s for 3,000 topics)
        text = ",".join(f"{source}:{target}" for source, target in sorted(names.names.items()))
        return F.try_element_at(F.str_to_map(F.lit(text), F.lit(","), F.lit(":")), topic)
    if not names.prefix:
        return topic
    renamed = F.concat(F.lit(names.prefix), topic)
    if names.suffix is None:
        return renamed
    return F.when(topic.endswith(names.suffix), renamed).otherwise(topic)


def mirror_frame(
    spark: Any, flow: FlowSpec, assignment: dict[str, int], start: str, with_latency: bool = False,
    groups: int | None = None, write_gate: str | None = None, run: str | None = None,
) -> Any:
    """The streaming DataFrame of target records for the assigned source partitions; in
    micro-batch mode its ``observe`` counts records and bytes (and, ``with_latency``, what the
    replication latency metric needs: :func:`kafka_mirror.engine.observation.observe_columns`); in
    real-time mode the producer interceptor counts them as the target acknowledges them.

    The source is kafka-mirror's own (``jvm/source``, format ``kafka-mirror``): the partitions
    are read in ``groups`` groups (default: one per Spark task slot), each by one task through
    one Kafka consumer kept between batches, and a micro-batch reads only the partitions that
    have new records. ``write_gate`` names the flow's gate in the driver's JVM
    (:mod:`kafka_mirror.engine.write_gate`): no record is read while it is closed. ``run``
    names the query run whose open readers the JVM counts (real-time mode: a stopped run's
    tasks are waited for)."""
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
    if run:
        source = source.option("run", run)
    return _target_records(source.load(), flow, assignment, with_latency)


def _target_records(source: Any, flow: FlowSpec, assignment: dict[str, int],
                    with_latency: bool) -> Any:
    """``source`` (rows of the source's schema) observed and turned into target records."""
    observed = source
    if not flow.realtime:
        observed = source.observe(OBSERVATION, *observe_columns(with_latency))
    names = flow.policy.target_topic_names(flow.source.alias, assignment)
    return observed.select(
        topic_column(names).alias("topic"),
        "partition",
        "key",
        "value",
        _headers(flow.realtime).alias("headers"),
    )


def _made_up_rows(spark: Any, topic: str) -> Any:
    """One row of the source's schema (jvm/source ``Rows.SCHEMA``), made up."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, BinaryType, StringType, StructField, StructType

    header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
    return spark.range(0, 1, 1, 1).select(
        F.lit(None).cast(BinaryType()).alias("key"), F.lit("").cast(BinaryType()).alias("value"),
        F.lit(topic).alias("topic"), F.lit(0).alias("partition"), F.col("id").alias("offset"),
        F.current_timestamp().alias("timestamp"), F.lit(0).alias("timestampType"),
        F.lit(None).cast(ArrayType(header)).alias("headers"))


def warm_frame(spark: Any, flow: FlowSpec, assignment: dict[str, int],
               with_latency: bool = False) -> None:
    """What a standby does once so that its first batch after a takeover does not load Spark:
    the flow's frame built (data source lookup, analyzer) with a ``foreachBatch`` writer
    (PySpark's callback server), started never; and one local job of a made-up row through the
    same observation and projection into Spark's ``noop`` sink (code generation, the scheduler,
    a task). Nothing is read from or written to a cluster."""
    frame = mirror_frame(spark, flow, assignment, "latest", with_latency)
    if not flow.realtime:  # a real-time query has no foreachBatch writer
        frame.writeStream.foreachBatch(lambda _frame, _batch_id: None)
    rows = _made_up_rows(spark, min(assignment) if assignment else "")
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
    run = batch_writer.run_key if isinstance(batch_writer, RealTimeWriter) else None
    frame = mirror_frame(spark, flow, assignment, start, with_latency, groups, write_gate, run)
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
