"""The flow query's projection into target records (kafka_mirror.engine.flow_query) and the
micro-batch observation (kafka_mirror.engine.observation), on a real Spark session: target topic
names per replication policy, the headers with the markers after them, the observed counts; and
none of it built through Spark's SQL parser (a mirror's start does not pay for it)."""

from __future__ import annotations

import datetime
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from kafka_mirror.engine.flow_query import _target_records, topic_column
from kafka_mirror.engine.observation import AGE_GRID_MS, observe_columns
from kafka_mirror.kafka.clients import OFFSET_HEADER, TIMESTAMP_HEADER
from kafka_mirror.mm2.policy import (
    DefaultReplicationPolicy,
    IdentityReplicationPolicy,
    ReplicationPolicy,
    TargetTopicNames,
)

pytestmark = pytest.mark.spark

WHEN = datetime.datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=datetime.UTC)
MILLIS = int(WHEN.timestamp() * 1000)
TOPICS = ["orders", "heartbeats", "x.heartbeats", "heartbeats.x", "it's"]


def source_rows(spark: Any) -> Any:
    """A record per topic of :data:`TOPICS`, the first with headers, of the source's schema."""
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
    schema = StructType([
        StructField("key", BinaryType()), StructField("value", BinaryType()),
        StructField("topic", StringType()), StructField("partition", IntegerType()),
        StructField("offset", LongType()), StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
        StructField("headers", ArrayType(header)),
    ])
    rows = [(b"k", b"vv", topic, 3, 40 + i, WHEN, 0,
             [("h", b"1")] if i == 0 else None) for i, topic in enumerate(TOPICS)]
    return spark.createDataFrame(rows, schema)


def flow(policy: ReplicationPolicy, realtime: bool) -> Any:
    return SimpleNamespace(realtime=realtime, policy=policy,
                           source=SimpleNamespace(alias="A"))


class NamedPolicy(DefaultReplicationPolicy):
    """A policy with names of its own per topic (as a Java policy's are)."""

    def target_topic_names(self, source_alias: str, topics: Any) -> TargetTopicNames:
        return TargetTopicNames(names={t: f"{source_alias}-{t}!" for t in topics if t != "it's"})


@pytest.mark.parametrize(("policy", "expected"), [
    (DefaultReplicationPolicy(), [f"A.{t}" for t in TOPICS]),
    (IdentityReplicationPolicy(),
     ["orders", "A.heartbeats", "A.x.heartbeats", "heartbeats.x", "it's"]),
    (NamedPolicy(), ["A-orders!", "A-heartbeats!", "A-x.heartbeats!", "A-heartbeats.x!", None]),
], ids=["default", "identity", "names"])
def test_target_topic_names_per_policy(spark: Any, policy: ReplicationPolicy,
                                       expected: list[str | None]) -> None:
    records = _target_records(source_rows(spark), flow(policy, True), dict.fromkeys(TOPICS, 1),
                              with_latency=False)
    got = {bytes(row["headers"][-1]["value"]): row["topic"] for row in records.collect()}
    # each record by its source offset (the last header): the name the policy gives its topic
    assert [got[str(40 + i).encode()] for i in range(len(TOPICS))] == expected
    names = policy.target_topic_names("A", TOPICS)
    assert [names.target(t) for t in TOPICS] == expected


def test_names_of_thousands_of_topics(spark: Any) -> None:
    """A policy's name per topic for 3,000 topics: each record gets its topic's."""
    from pyspark.sql import functions as F

    names = {f"t{i}": f"A-t{i}!" for i in range(3000)}
    rows = spark.range(0, 3000, 1, 1).select(
        F.concat(F.lit("t"), F.col("id").cast("string")).alias("topic"))
    named = rows.select(F.col("topic"), topic_column(TargetTopicNames(names=names))
                        .alias("target")).collect()
    assert {row["topic"]: row["target"] for row in named} == names


def test_a_flow_of_no_topics_names_none(spark: Any) -> None:
    records = _target_records(source_rows(spark), flow(NamedPolicy(), True), {},
                              with_latency=False)
    assert {row["topic"] for row in records.collect()} == {None}


@pytest.mark.parametrize("realtime", [True, False], ids=["realtime", "micro-batch"])
def test_headers_keep_the_records_own_and_add_the_markers(spark: Any, realtime: bool) -> None:
    records = _target_records(source_rows(spark), flow(DefaultReplicationPolicy(), realtime),
                              dict.fromkeys(TOPICS, 1), with_latency=True)
    rows = {row["topic"]: row for row in records.collect()}
    assert list(records.columns) == ["topic", "partition", "key", "value", "headers"]
    markers = [(TIMESTAMP_HEADER, str(MILLIS).encode())]
    for i, topic in enumerate(TOPICS):
        row = rows[f"A.{topic}"]
        assert (row["partition"], bytes(row["key"]), bytes(row["value"])) == (3, b"k", b"vv")
        expected = ([("h", b"1")] if i == 0 else []) + markers
        if realtime:
            expected.append((OFFSET_HEADER, str(40 + i).encode()))
        assert [(h["key"], bytes(h["value"])) for h in row["headers"]] == expected


def test_the_observed_counts(spark: Any) -> None:
    row = source_rows(spark).agg(*observe_columns(with_latency=True)).collect()[0]
    assert (row["records"], row["bytes"]) == (len(TOPICS), 3 * len(TOPICS))
    assert (row["ts_avg_ms"], row["ts_min_ms"]) == (MILLIS, MILLIS)
    now = row["batch_ms"]
    assert now >= MILLIS
    # every record is older than the grid's ages below its age, and counted from there on
    age = now - MILLIS
    assert [row[f"age_le_{g}"] for g in AGE_GRID_MS] == [
        len(TOPICS) if age <= g else 0 for g in AGE_GRID_MS]
    plain = source_rows(spark).agg(*observe_columns()).columns
    assert plain == ["records", "bytes"]


# a driver JVM of its own that logs the classes it loads, and runs the mirror's projection
PARSER_CHECK = """
import sys
from types import SimpleNamespace
from kafka_mirror.engine.flow_query import _made_up_rows, _target_records
from kafka_mirror.engine.session import build_session, connector_jars, spark_conf
from kafka_mirror.mm2.policy import IdentityReplicationPolicy, TargetTopicNames
conf = spark_conf({"spark.master": "local[1]",
                   "spark.driver.extraJavaOptions": f"-Xlog:class+load=info:file={sys.argv[1]}"},
                  {}, connector_jars(None))
spark = build_session(conf)
named = SimpleNamespace(target_topic_names=lambda alias, topics: TargetTopicNames(
    names={t: f"{alias}-{t}" for t in topics}))
for realtime, policy in ((True, IdentityReplicationPolicy()), (False, named)):
    flow = SimpleNamespace(realtime=realtime, policy=policy, source=SimpleNamespace(alias="A"))
    records = _target_records(_made_up_rows(spark, "t"), flow, {"t": 1}, True)
    records.write.format("noop").mode("overwrite").save()
spark.stop()
"""


def test_neither_the_ml_functions_nor_the_sql_parser_are_loaded(tmp_path: Path) -> None:
    """What a mirror's start does not pay for (about 0.5 s and 0.25 s of it on a 2-core
    machine): the session does not register spark-mllib's SQL functions (its class path's
    session extension), and the mirror's projection and observation, built and run, do not use
    Spark's SQL parser (its grammar's tables are built at its first use)."""
    classes = tmp_path / "classes.log"
    subprocess.run([sys.executable, "-c", PARSER_CHECK, str(classes)], check=True,
                   timeout=300, capture_output=True)
    loaded = classes.read_text()
    assert "org.apache.spark.sql.execution.datasources.noop.NoopWriter$ " in loaded  # it ran
    assert "org.apache.spark.sql.ml.InternalFunctionRegistration" not in loaded
    assert "org.apache.spark.sql.catalyst.parser.SqlBaseParser " not in loaded
