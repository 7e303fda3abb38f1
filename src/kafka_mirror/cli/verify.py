"""Compare source and target per partition: record counts and an order-sensitive checksum.

The checksum covers each record's position in its partition, key, value, headers and
timestamp; it is computed by Spark batch reads, so records never pass through Python.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kafka_mirror.config.model import FlowSpec
from kafka_mirror.kafka.clients import spark_source_options

_SUMMARY = (
    "SELECT topic, partition, count(1) AS records, "
    "bit_xor(xxhash64(pos, key, value, headers, unix_millis(timestamp))) AS checksum "
    "FROM (SELECT *, row_number() OVER (PARTITION BY topic, partition ORDER BY offset) AS pos "
    "FROM {view}) "
    "GROUP BY topic, partition"
)


@dataclass(frozen=True)
class PartitionCheck:
    source_topic: str
    target_topic: str
    partition: int
    source_records: int
    target_records: int
    source_checksum: int | None
    target_checksum: int | None

    @property
    def ok(self) -> bool:
        return (
            self.source_records == self.target_records
            and self.source_checksum == self.target_checksum
        )

    def describe(self) -> str:
        where = f"{self.source_topic}[{self.partition}] -> {self.target_topic}[{self.partition}]"
        if self.ok:
            return f"OK    {where}: {self.source_records} records"
        if self.source_records != self.target_records:
            return (
                f"DIFF  {where}: source has {self.source_records} records, "
                f"target has {self.target_records}"
            )
        return f"DIFF  {where}: {self.source_records} records each, contents differ"


def _summaries(
    spark: Any, options: Mapping[str, str], topics: Mapping[str, int]
) -> dict[tuple[str, int], tuple[int, int]]:
    """(records, checksum) per topic partition, from one Spark batch job over all topics."""
    if not topics:
        return {}
    reader = spark.read.format("kafka")
    for key, value in options.items():
        if key != "maxOffsetsPerTrigger":
            reader = reader.option(key, value)
    assign = {topic: list(range(count)) for topic, count in sorted(topics.items())}
    frame = (
        reader.option("assign", json.dumps(assign))
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
    )
    view = "kafka_mirror_verify"
    frame.createOrReplaceTempView(view)
    rows = spark.sql(_SUMMARY.format(view=view)).collect()
    return {
        (str(r["topic"]), int(r["partition"])): (int(r["records"]), int(r["checksum"]))
        for r in rows
    }


def verify_flow(spark: Any, flow: FlowSpec, topics: Mapping[str, int]) -> list[PartitionCheck]:
    """Check every partition of ``topics`` (source name -> partition count) of the flow."""
    target_opts = {
        k: v for k, v in spark_source_options(flow).items() if not k.startswith("kafka.")
    } | {f"kafka.{k}": v for k, v in _target_reader_props(flow).items()}
    source = _summaries(spark, spark_source_options(flow), topics)
    target = _summaries(
        spark, target_opts, {flow.target_topic(t): n for t, n in topics.items()}
    )
    checks = []
    for topic, count in sorted(topics.items()):
        target_topic = flow.target_topic(topic)
        for partition in range(count):
            s_records, s_sum = source.get((topic, partition), (0, None))
            t_records, t_sum = target.get((target_topic, partition), (0, None))
            checks.append(
                PartitionCheck(topic, target_topic, partition, s_records, t_records, s_sum, t_sum)
            )
    return checks


def _target_reader_props(flow: FlowSpec) -> dict[str, str]:
    from kafka_mirror.kafka.clients import admin_properties

    return admin_properties(flow.target) | {"isolation.level": "read_committed"}
