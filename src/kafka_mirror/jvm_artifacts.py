"""Locate the JVM artifacts built by ``mvn -q -f jvm/pom.xml package -DskipTests``.

Two directories of jars are produced by the Maven build under ``jvm/``:

* ``kafka-dist/target/lib`` -- Apache Kafka (broker, tools, MirrorMaker 2) and its logging
  binding; it is the class path of the local test clusters and of stock MirrorMaker 2.
* ``spark-connector/target/lib`` -- Spark's Kafka connector with the dependencies pyspark does
  not already ship, plus the kafka.mirror producer interceptor jar and Kafka's
  ``connect-mirror-client`` (the ``ReplicationPolicy`` interface a custom policy implements).

The ``jvm/`` directory is found through the ``KAFKA_MIRROR_JVM_HOME`` environment variable, or
else next to the package sources (``<repo>/jvm``).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

__all__ = [
    "BUILD_COMMAND",
    "JVM_HOME_ENV",
    "JvmArtifactsMissing",
    "interceptor_jar",
    "java_executable",
    "jvm_home",
    "kafka_classpath",
    "kafka_dist_lib",
    "mirror_client_jars",
    "spark_connector_jars",
    "spark_connector_lib",
]

JVM_HOME_ENV = "KAFKA_MIRROR_JVM_HOME"
BUILD_COMMAND = "mvn -q -f jvm/pom.xml package -DskipTests"

KAFKA_DIST_LIB = Path("kafka-dist") / "target" / "lib"
SPARK_CONNECTOR_LIB = Path("spark-connector") / "target" / "lib"
INTERCEPTOR_JAR_PREFIX = "kafka-mirror-interceptor-"
MIRROR_CLIENT_JAR_PREFIXES = ("connect-mirror-client-", "kafka-clients-")


class JvmArtifactsMissing(RuntimeError):
    """A directory of jars that the Maven build produces is missing or empty."""

    def __init__(self, path: Path, what: str) -> None:
        self.path = path
        self.what = what
        super().__init__(
            f"{what} not found: {path} is missing or holds no jars. "
            f"Build it from the repository root with: {BUILD_COMMAND} "
            f"(or point {JVM_HOME_ENV} at a jvm/ directory that has been built)."
        )


def jvm_home() -> Path:
    """The ``jvm/`` directory: ``$KAFKA_MIRROR_JVM_HOME`` or ``<repo>/jvm``."""
    env = os.environ.get(JVM_HOME_ENV)
    if env:
        return Path(env).expanduser().resolve()
    # src/kafka_mirror/jvm_artifacts.py -> <repo>/jvm
    return Path(__file__).resolve().parents[2] / "jvm"


def _jars(lib: Path, what: str) -> list[Path]:
    if not lib.is_dir():
        raise JvmArtifactsMissing(lib, what)
    jars = sorted(p for p in lib.iterdir() if p.suffix == ".jar" and p.is_file())
    if not jars:
        raise JvmArtifactsMissing(lib, what)
    return jars


def kafka_dist_lib() -> Path:
    """Directory holding the Kafka broker / tools / MirrorMaker 2 jars."""
    return jvm_home() / KAFKA_DIST_LIB


def spark_connector_lib() -> Path:
    """Directory holding the Spark Kafka connector jars and the interceptor jar."""
    return jvm_home() / SPARK_CONNECTOR_LIB


def kafka_classpath() -> str:
    """Java class path (``os.pathsep``-joined, sorted) for running Kafka and MirrorMaker 2."""
    jars = _jars(kafka_dist_lib(), "Kafka distribution jars")
    return os.pathsep.join(str(j) for j in jars)


def spark_connector_jars() -> list[Path]:
    """The jars Spark needs for the Kafka source/sink and the interceptor (``spark.jars``, or the
    driver's class path in local mode: :func:`kafka_mirror.engine.session.spark_conf`)."""
    return _jars(spark_connector_lib(), "Spark Kafka connector jars")


def interceptor_jar() -> Path:
    """The kafka.mirror producer interceptor jar (inside the spark-connector lib directory)."""
    lib = spark_connector_lib()
    for jar in spark_connector_jars():
        if jar.name.startswith(INTERCEPTOR_JAR_PREFIX):
            return jar
    raise JvmArtifactsMissing(lib / f"{INTERCEPTOR_JAR_PREFIX}*.jar", "Interceptor jar")


def mirror_client_jars() -> list[Path]:
    """Kafka's ``connect-mirror-client`` and the ``kafka-clients`` it needs (both in the
    spark-connector lib directory): the class path of a custom replication policy."""
    lib = spark_connector_lib()
    jars = spark_connector_jars()
    found = []
    for prefix in MIRROR_CLIENT_JAR_PREFIXES:
        match = [j for j in jars if j.name.startswith(prefix)]
        if not match:
            raise JvmArtifactsMissing(lib / f"{prefix}*.jar", "Kafka connect-mirror-client jars")
        found.append(match[0])
    return found


def java_executable() -> str:
    """``$JAVA_HOME/bin/java`` when set, else ``java`` from ``PATH``."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        candidate = Path(java_home) / "bin" / "java"
        if candidate.is_file():
            return str(candidate)
    found = shutil.which("java")
    if found is None:
        raise FileNotFoundError("no java executable: install a JDK 17+ or set JAVA_HOME")
    return found
