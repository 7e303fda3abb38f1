"""The Spark session: local mode by default, any master and conf passed through."""

from __future__ import annotations

import logging
import os
import re
import socket
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kafka_mirror import jvm_artifacts
from kafka_mirror.config.modes import DEFAULT_MASTER, LOCAL_MASTER, REALTIME_LOCAL_SLOTS
from kafka_mirror.engine.class_data import JAVA_OPTIONS_KEY
from kafka_mirror.engine.driver_launch import DriverLaunch, submit_args
from kafka_mirror.errors import ConfigError, MirrorError

log = logging.getLogger(__name__)

DEFAULT_SPARK_CONF = {
    "spark.app.name": "kafka-mirror",
    "spark.master": DEFAULT_MASTER,
    "spark.driver.memory": "1g",
    "spark.ui.enabled": "false",
    "spark.sql.streaming.minBatchesToRetain": "20",
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.streaming.metricsEnabled": "true",
    "spark.ui.showConsoleProgress": "false",
    # The checkpoint (offset and commit logs, written by the driver on every micro-batch) is a
    # local directory: plain FileSystem renames and no .crc side files cut the two log writes
    # from about 35 ms each to about 6 on an idle 2-core machine (docs/benchmarks.md). Renames
    # stay atomic (rename(2)), and neither manager syncs to disk.
    "spark.sql.streaming.checkpointFileManagerClass":
        "org.apache.spark.sql.execution.streaming.checkpointing."
        "FileSystemBasedCheckpointFileManager",
    "spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
    # Spark turns adaptive execution off for streaming queries, with a warning at each start
    # while it is on (ResolveWriteToStream); a batch's write has no shuffle for it to adapt
    "spark.sql.adaptive.enabled": "false",
    # A session applies every SparkSessionExtensionsProvider its class path lists (ServiceLoader)
    # unless this static setting is false: PySpark's jars bring spark-mllib's, which registers
    # the ML SQL functions through Scala reflection, about 0.5 s of the driver's start on a
    # 2-core machine for functions a mirror never calls (StaticSQLConf, Spark 4.2; extensions
    # named in spark.sql.extensions still apply)
    "spark.sql.extensions.test.loadFromCp": "false",
}

# Driver loggers held above Spark's level. Hadoop's Shell sets a new checkpoint file's mode with
# a forked chmod; a query stopped while it writes a batch's offset or commit log interrupts the
# wait for that chmod, and Shell logs the interruption as a WARN with a stack trace (a stop is
# not a fault: the unwritten log entry is planned again on the next start). Its failures still
# reach Spark as exceptions.
QUIET_LOGGERS = {"org.apache.hadoop.util.Shell": "ERROR"}

# The driver's log4j configuration unless the user's driver options choose one: Spark's defaults
# without the lines it prints when it falls back on them and without the warnings every start
# gave (see the file)
LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")
_DRIVER_OPTIONS = (JAVA_OPTIONS_KEY, "spark.driver.extraJavaOptions")
# how a JVM is given a log4j configuration file: log4j 2's property (either spelling), log4j 1's
_LOG4J_FILE_OPTIONS = re.compile(r"-Dlog4j2?\.configuration(File)?=")


# The JIT of the JVMs that run the data path (the driver; executors of their own on a cluster):
# C2 compiles a method after ten times JDK 17's invocations and loop iterations (four times the
# combined threshold). At start the driver's C2 thread otherwise compiled ~2 CPU s of class
# loading, lambda spinning and Hadoop configuration parsing, code that is hot for a second (on 2
# cores: a core for most of the start), and went on compiling start-up code into the steady
# phase; the data path's loops pass these thresholds within seconds of copying. Measured on 2
# cores (docs/benchmarks.md, "The driver without spark-submit's launcher, and C2 later"): CPU
# until the first record 5.6 -> 4.0-4.1 s, the first record 0.5 s sooner, the 1M-record steady
# rate 9-12 % higher at 14-15 % less CPU per GB. Placed before the user's options, which win
# (HotSpot takes a flag's last value).
JIT_OPTIONS = ("-XX:Tier4InvocationThreshold=50000", "-XX:Tier4MinInvocationThreshold=6000",
               "-XX:Tier4CompileThreshold=60000", "-XX:Tier4BackEdgeThreshold=400000")
EXECUTOR_JAVA_OPTIONS_KEY = "spark.executor.defaultJavaOptions"


def _with_jit_options(conf: dict[str, str]) -> dict[str, str]:
    """``conf`` with :data:`JIT_OPTIONS` first among the default options of the driver and,
    when they run in JVMs of their own, the executors."""
    keys = [JAVA_OPTIONS_KEY]
    if not _in_driver_jvm(conf["spark.master"]):
        keys.append(EXECUTOR_JAVA_OPTIONS_KEY)
    out = dict(conf)
    for key in keys:
        given = out.get(key, "")
        out[key] = " ".join([*JIT_OPTIONS, *([given] if given else [])])
    return out


def _with_log4j_config(conf: dict[str, str]) -> dict[str, str]:
    """``conf`` with :data:`LOG4J_CONFIG` for the driver, unless its options name a log4j
    configuration file of the user's (other log4j properties, such as
    ``-Dlog4j2.formatMsgNoLookups``, do not count)."""
    if any(_LOG4J_FILE_OPTIONS.search(conf.get(key, "")) for key in _DRIVER_OPTIONS):
        return conf
    option = f"-Dlog4j2.configurationFile={LOG4J_CONFIG.as_uri()}"
    given = conf.get(JAVA_OPTIONS_KEY, "")
    return conf | {JAVA_OPTIONS_KEY: f"{given} {option}" if given else option}


def connector_jars(jars_dir: Path | None) -> list[Path]:
    """The Kafka connector jars (and the timestamp interceptor) Spark needs."""
    if jars_dir is None:
        return jvm_artifacts.spark_connector_jars()
    jars = sorted(jars_dir.glob("*.jar"))
    if not jars:
        raise jvm_artifacts.JvmArtifactsMissing(jars_dir, "Spark Kafka connector jars")
    return jars


def realtime_master(conf: Mapping[str, str]) -> dict[str, str]:
    """The conf with room for real-time flows: the default ``local[*]`` becomes
    ``local[REALTIME_LOCAL_SLOTS]``. A master the user chose is left alone."""
    out = dict(conf)
    if out.get("spark.master") == DEFAULT_SPARK_CONF["spark.master"]:
        out["spark.master"] = f"local[{REALTIME_LOCAL_SLOTS}]"
    return out


# In local mode the driver stays on loopback rather than the host's outward address.
LOCAL_MODE_CONF = {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}


DRIVER_CLASS_PATH = "spark.driver.extraClassPath"


def _in_driver_jvm(master: str) -> bool:
    """Local mode (``local``, ``local[N]``, ``local[*]``, ``local[N,F]``): tasks run in the
    driver's JVM (``local-cluster`` has executors of their own)."""
    return LOCAL_MASTER.fullmatch(master.strip()) is not None


# Brings the per-topic replication latency executors record to the driver (jvm/interceptor).
LATENCY_PLUGIN = "io.kafkamirror.LatencyPlugin"


def spark_conf(
    file_conf: Mapping[str, str], cli_conf: Mapping[str, str], jars: list[Path],
    latency_plugin: bool = False,
) -> dict[str, str]:
    """The session's conf; ``latency_plugin`` (metrics on) adds :data:`LATENCY_PLUGIN` to
    ``spark.plugins``."""
    given = dict(file_conf) | dict(cli_conf)
    conf = DEFAULT_SPARK_CONF | given
    if conf["spark.master"].startswith("local"):
        local = dict(LOCAL_MODE_CONF)
        if "spark.driver.host" in given:
            # the driver binds where it is told to be reached (Spark's own default for the bind
            # address): bound to loopback, a driver that names another address refuses its own
            # executor's download of the connector jars, and the session does not start
            del local["spark.driver.bindAddress"]
        conf = local | conf
    if _in_driver_jvm(conf["spark.master"]):
        # the tasks run in the driver's JVM: the jars go on its class path, where class data
        # sharing maps their classes too, rather than copied for an executor's class loader
        extra = conf.get(DRIVER_CLASS_PATH, "")
        conf[DRIVER_CLASS_PATH] = os.pathsep.join(
            [str(j) for j in jars] + ([extra] if extra else []))
    else:
        extra = conf.get("spark.jars", "")
        conf["spark.jars"] = ",".join([str(j) for j in jars] + ([extra] if extra else []))
    conf = _with_log4j_config(_with_jit_options(conf))
    if latency_plugin:
        plugins = [p.strip() for p in conf.get("spark.plugins", "").split(",") if p.strip()]
        if LATENCY_PLUGIN not in plugins:
            conf["spark.plugins"] = ",".join([*plugins, LATENCY_PLUGIN])
    return conf


def topic_latency_text(spark: Any) -> str:
    """The replication latency the interceptor recorded per flow and target topic, summed over
    the driver's JVM and the executors' (``LatencyRegistry.render()``, one py4j call)."""
    return str(spark._jvm.io.kafkamirror.LatencyRegistry.render())


class SparkUnavailable(MirrorError):
    """The Spark master does not answer, or the session could not start."""


def _master_addresses(master: str) -> list[tuple[str, int]]:
    """``spark://h1:p1,h2:p2`` (standalone, with standby masters) as (host, port) pairs."""
    out = []
    for part in master[len("spark://"):].split(","):
        host, _, port = part.strip().rpartition(":")
        if not host or not port.isdigit():
            raise ConfigError("expected spark://HOST:PORT[,HOST:PORT...]",
                              key="spark.master", value=master)
        out.append((host.strip("[]"), int(port)))
    return out


def wait_for_master(conf: Mapping[str, str], timeout: float) -> None:
    """A standalone master (``spark://``) must accept connections within ``timeout`` seconds;
    otherwise Spark itself retries for a minute, then fails deep inside the session. Other
    masters (local, yarn, k8s) are left to Spark."""
    master = conf.get("spark.master", "")
    if not master.startswith("spark://"):
        return
    addresses = _master_addresses(master)
    deadline = time.monotonic() + timeout
    reasons: dict[str, str] = {}
    while True:
        for host, port in addresses:
            try:
                with socket.create_connection((host, port), timeout=max(1.0, min(5.0, timeout))):
                    return
            except OSError as exc:
                reasons[f"{host}:{port}"] = exc.strerror or str(exc) or type(exc).__name__
        if time.monotonic() >= deadline:
            break
        time.sleep(1.0)
    raise SparkUnavailable(
        f"Spark master {master} (spark.master) not reachable after {timeout:.0f}s: "
        + "; ".join(f"{address}: {reason}" for address, reason in reasons.items())
    )


def build_session(conf: Mapping[str, str], launch: DriverLaunch | None = None) -> Any:
    """Start (or join) the SparkSession; driver options apply because the JVM starts here
    (from the command ``launch`` kept for the same settings, when it has one; see
    :mod:`kafka_mirror.engine.driver_launch`). A session that cannot start is a
    :class:`SparkUnavailable` naming the master."""
    if conf.get("spark.master", "").startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # no driver JVM in this process yet: this start launches one, from the command kept for
    # these settings before PySpark is imported (its import then runs while the JVM starts)
    launching = launch if launch is not None and not _driver_running() else None
    args = submit_args(conf)
    try:
        started = launching.begin(args) if launching is not None else None
        try:
            from pyspark import SparkConf, SparkContext
            from pyspark.sql import SparkSession
        finally:  # joined (or stopped) whatever the import did
            gateway = started.join() if started is not None else None
        builder = SparkSession.builder
        for key, value in conf.items():
            builder = builder.config(key, value)
        if gateway is not None:
            # the context the builder would make, on the gateway of the JVM started here
            SparkContext(conf=SparkConf().setAll(list(conf.items())), gateway=gateway)
        session = builder.getOrCreate()
    except Exception as exc:
        lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
        reason = " ".join(lines[:2])[:400] if lines else type(exc).__name__
        raise SparkUnavailable(
            f"Spark session with master {conf.get('spark.master')} did not start: {reason}"
        ) from None
    if launching is not None and gateway is None:
        _record_launch(launching, session)
    session.sparkContext.setLogLevel(os.environ.get("KAFKA_MIRROR_SPARK_LOG_LEVEL", "WARN"))
    jvm: Any = session.sparkContext._jvm
    log4j = jvm.org.apache.logging.log4j
    for name, level in QUIET_LOGGERS.items():
        log4j.core.config.Configurator.setLevel(name, log4j.Level.toLevel(level))
    return session


def _driver_running() -> bool:
    """Whether this process runs a Spark driver's JVM already (PySpark imported, and a context
    started)."""
    if "pyspark" not in sys.modules:
        return False
    from pyspark import SparkContext

    return SparkContext._jvm is not None


def _record_launch(launch: DriverLaunch, session: Any) -> None:
    """The command ``spark-submit`` started the driver with, kept for the next start (a
    failure to keep it only costs that start the scripts again)."""
    proc = getattr(session.sparkContext._gateway, "proc", None)
    if proc is None:
        return
    try:
        launch.record(proc.pid)
    except OSError as exc:
        log.debug("Spark driver JVM: launch command not kept in %s (%s)", launch.directory, exc)
