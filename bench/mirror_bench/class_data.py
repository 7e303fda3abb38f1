"""The Spark driver's class data archive of the benchmark's kafka-mirror runs
(kafka_mirror.engine.class_data): built once per machine, and again when it no longer matches
the JVM or class path, before anything is measured. Every measured run then starts as a restarted
mirror does, mapping the classes, and none pays for building the archive."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

DIRECTORY = Path.home() / ".cache" / "kafka-mirror" / "bench-class-data"

# A driver JVM that loads what a mirror's driver loads (session, SQL, streaming, codegen, and the
# data path: kafka-mirror's source, Kafka's clients, Spark's Kafka sink, the interceptor), then
# builds the archive unless the one there was mapped.
_PRIME = textwrap.dedent(f"""
    import sys
    from pathlib import Path
    sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r})
    from mirror_bench.class_data import prime_here
    print(prime_here(Path(sys.argv[1])))
""")


def prime_here(directory: Path) -> str:
    """In this process (the one :func:`prime` starts): "mapped" when the driver JVM maps the
    archive in ``directory``, else "built" or "failed" after a streaming query and one batch of
    the mirror's own data path have loaded their classes."""
    import tempfile

    from kafka_mirror.engine.class_data import ClassData, RunningJvm
    from kafka_mirror.engine.session import build_session, connector_jars, spark_conf

    data = ClassData(directory)
    spark = build_session(data.spark_conf(spark_conf({}, {}, connector_jars(None))))
    try:
        jvm = RunningJvm.of(spark)
        if data.used_archive and jvm.sharing and data.matches(jvm):
            return "mapped"
        query = (spark.readStream.format("rate").option("rowsPerSecond", 1000).load()
                 .selectExpr("CAST(value AS STRING) AS value", "timestamp")
                 .writeStream.format("noop").trigger(processingTime="500 milliseconds").start())
        query.processAllAvailable()
        query.awaitTermination(3)
        query.stop()
        with tempfile.TemporaryDirectory(prefix="kafka-mirror-class-data-") as work:
            _mirror_a_batch(spark, Path(work))
        return "built" if data.dump(jvm) else "failed"
    finally:
        data.stop()
        spark.stop()


def _mirror_a_batch(spark: Any, work: Path) -> None:
    """One micro-batch of a flow's own frame (kafka_mirror.engine.flow_query) written through
    Spark's Kafka sink with the flow's sink options (the interceptor, latency on), from and to a
    throw-away broker, with the Java Admin client calls around a batch (end offsets, leader
    epochs)."""
    from confluent_kafka import Producer

    from kafka_mirror.config.mm2 import mm2_from_text
    from kafka_mirror.engine.flow_query import mirror_frame
    from kafka_mirror.engine.jvm_offsets import JvmEndOffsets
    from kafka_mirror.engine.leader_epochs import JvmLeaderEpochs
    from kafka_mirror.kafka.clients import spark_sink_options
    from kafka_mirror_testing.localcluster import LocalKafkaCluster

    broker = LocalKafkaCluster("class-data", work, heap="256m").start()
    try:
        for topic in ("prime", "a.prime"):
            broker.create_topic(topic, partitions=2)
        producer = Producer(broker.client_config())
        for i in range(100):
            producer.produce("prime", key=b"k%d" % i, value=b"v" * 100, partition=i % 2,
                             headers=[("h", b"v")])
        if producer.flush(30):
            raise RuntimeError("the class data prime's records were not delivered")
        flow = mm2_from_text(
            f"clusters = a, b\na.bootstrap.servers = {broker.bootstrap}\n"
            f"b.bootstrap.servers = {broker.bootstrap}\na->b.enabled = true\n"
            "a->b.topics = prime\nreplication.factor = 1\n", "class data prime").flows[0]
        frame = mirror_frame(spark, flow, {"prime": 2}, "earliest", with_latency=True)
        options = spark.sparkContext._jvm.java.util.HashMap(
            spark_sink_options(flow, latency=True, partitions=2))

        def write(batch: Any, _batch_id: int) -> None:
            batch._jdf.write().format("kafka").options(options).save()

        query = (frame.writeStream.foreachBatch(write)
                 .option("checkpointLocation", str(work / "checkpoint")).start())
        query.processAllAvailable()
        query.stop()
        admin = {"bootstrap.servers": broker.bootstrap}
        partitions = [("a.prime", 0), ("a.prime", 1)]
        ends, epochs = JvmEndOffsets(spark, admin), JvmLeaderEpochs(spark, admin)
        try:
            ends.end_offsets(partitions)
            epochs.latest(partitions)
        finally:
            ends.close()
            epochs.close()
    finally:
        broker.stop()


# The build at the caller's priority: kafka_mirror.engine.class_data builds at the lowest, right
# beside a running mirror, but a caller that waits for nothing else (the test command before its
# tests) saw that build starve past its time limit on a busy machine.
_CALLERS_PRIORITY = "import os\nos.setpriority = lambda *args: None\n"


def prime(directory: Path = DIRECTORY, *, lowest_priority: bool = True) -> str:
    """Make sure ``directory`` holds an archive this machine's driver JVM maps; returns what was
    done ("mapped": it was there; "built"; "failed": the runs go without). The archive is built
    at the lowest CPU priority, as a mirror builds it, unless ``lowest_priority`` is false."""
    began = time.monotonic()
    script = _PRIME if lowest_priority else _CALLERS_PRIORITY + _PRIME
    proc = subprocess.run([sys.executable, "-c", script, str(directory)], capture_output=True,
                          text=True, timeout=1200, check=False)
    lines = proc.stdout.strip().splitlines()
    outcome = lines[-1] if proc.returncode == 0 and lines else "failed"
    print(f"Spark driver class data ({directory}): {outcome} in {time.monotonic() - began:.0f} s",
          flush=True)
    if outcome == "failed":
        print(proc.stderr[-2000:], file=sys.stderr)
    return outcome
