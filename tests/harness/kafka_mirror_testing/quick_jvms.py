"""JVM options for the test suites' own JVMs: brokers, Kafka's tools, stock MirrorMaker 2 and the
Spark driver of every ``kafka-mirror`` a test starts.

A test JVM lives for minutes and moves little data, so its cost is start-up and JIT compiling.
With the C1 compiler only (``-XX:TieredStopAtLevel=1``) a test takes about half the CPU
(tests/engine/test_topic_recreated.py on this 2-core machine: 81 CPU-seconds with the default
tiered compilers, 44 with C1 only), and CPU is what the suite waits on. Benchmarks, the demo and
deployed mirrors do not set it: their JVMs run as users run them (the benchmark's smoke test, run
under pytest, inherits it).
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

# read by LocalKafkaCluster and StockMirrorMaker2 for the JVMs they start
FLAGS_ENV = "KAFKA_MIRROR_TEST_JVM_FLAGS"
# Spark's launcher adds this to the driver's java command (SparkSubmitCommandBuilder)
SPARK_SUBMIT_OPTS = "SPARK_SUBMIT_OPTS"
QUICK_START_FLAGS = ("-XX:TieredStopAtLevel=1",)
# the class data archive of Kafka's class path (kafka_mirror_testing.kafka_class_data.prime)
KAFKA_CLASS_DATA_ENV = "KAFKA_MIRROR_TEST_KAFKA_CLASS_DATA"


def extra_jvm_flags() -> list[str]:
    """The flags the test JVMs of this process get (none unless a test suite asked for them)."""
    return os.environ.get(FLAGS_ENV, "").split()


def class_data_flags() -> list[str]:
    """The flags that map the class data archive of Kafka's class path, for a JVM on that class
    path (none when no archive is named or it is gone)."""
    archive = os.environ.get(KAFKA_CLASS_DATA_ENV, "")
    if not archive or not os.path.isfile(archive):
        return []
    return [f"-XX:SharedArchiveFile={archive}", "-Xshare:auto"]


def use_quick_start_jvms(environ: MutableMapping[str, str] = os.environ) -> None:
    """Every JVM started from now on by this process and its children gets the quick-start
    flags (a value already set in ``environ`` is kept: set it empty to run without)."""
    flags = " ".join(QUICK_START_FLAGS)
    if environ.setdefault(FLAGS_ENV, flags) != flags:
        return
    submit = environ.get(SPARK_SUBMIT_OPTS, "")
    if flags not in submit:
        environ[SPARK_SUBMIT_OPTS] = f"{submit} {flags}".strip()
