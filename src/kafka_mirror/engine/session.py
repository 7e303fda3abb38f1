"""The Spark session: local mode by default, any master and conf passed through."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kafka_mirror import jvm_artifacts

DEFAULT_SPARK_CONF = {
    "spark.app.name": "kafka-mirror",
    "spark.master": "local[*]",
    "spark.driver.memory": "1g",
    "spark.ui.enabled": "false",
    "spark.sql.streaming.minBatchesToRetain": "20",
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.streaming.metricsEnabled": "true",
    "spark.ui.showConsoleProgress": "false",
}


def connector_jars(jars_dir: Path | None) -> list[Path]:
    """The Kafka connector jars (and the timestamp interceptor) Spark needs."""
    if jars_dir is None:
        return jvm_artifacts.spark_connector_jars()
    jars = sorted(jars_dir.glob("*.jar"))
    if not jars:
        raise jvm_artifacts.JvmArtifactsMissing(jars_dir, "Spark Kafka connector jars")
    return jars


# In local mode the driver stays on loopback rather than the host's outward address.
LOCAL_MODE_CONF = {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}


def spark_conf(
    file_conf: Mapping[str, str], cli_conf: Mapping[str, str], jars: list[Path]
) -> dict[str, str]:
    conf = DEFAULT_SPARK_CONF | dict(file_conf) | dict(cli_conf)
    if conf["spark.master"].startswith("local"):
        conf = LOCAL_MODE_CONF | conf
    extra = conf.get("spark.jars", "")
    conf["spark.jars"] = ",".join([str(j) for j in jars] + ([extra] if extra else []))
    return conf


def build_session(conf: Mapping[str, str]) -> Any:
    """Start (or join) the SparkSession; driver options apply because the JVM starts here."""
    from pyspark.sql import SparkSession

    if conf.get("spark.master", "").startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel(os.environ.get("KAFKA_MIRROR_SPARK_LOG_LEVEL", "WARN"))
    return session
