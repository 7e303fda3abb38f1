"""A class data archive for the test suites' JVMs on Kafka's class path: brokers, Kafka's tools and
stock MirrorMaker 2 (the Spark drivers have one of their own: kafka_mirror.engine.class_data).

A test starts Kafka JVMs by the hundred and each one loads and verifies the same classes: a
broker's start took 3.9 CPU-s, 2.0 mapping this archive, and the storage format before it 1.2,
0.7 (this 2-core machine, C1 only). :func:`prime` builds the archive once per JVM and class path
(a broker run with ``-XX:ArchiveClassesAtExit`` that serves a few clients, then stops) and names
it in :data:`ENV`; :func:`kafka_mirror_testing.quick_jvms.class_data_flags` gives the JVMs of
the processes that inherit it ``-XX:SharedArchiveFile`` with ``-Xshare:auto`` (a JVM that cannot
map it runs without). The test command primes it before the tests, and the engine tests'
conftest when it was not.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import tempfile
import time
from collections.abc import Iterator, MutableMapping
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from kafka_mirror.jvm_artifacts import java_executable, kafka_classpath
from kafka_mirror_testing.localcluster import LocalKafkaCluster
from kafka_mirror_testing.quick_jvms import KAFKA_CLASS_DATA_ENV as ENV
from kafka_mirror_testing.records import Message, produce

DIRECTORY = Path(tempfile.gettempdir()) / f"kafka-mirror-tests-kafka-class-data-{os.getuid()}"
STALE_SECONDS = 86_400.0


def archive_path(directory: Path = DIRECTORY) -> Path:
    """The archive of this machine's JVM and Kafka class path (each jar's size and time in the
    name's digest: the JVM refuses an archive whose jars changed)."""
    digest = hashlib.sha256(os.path.realpath(java_executable()).encode())
    for jar in kafka_classpath().split(os.pathsep):
        stat = os.stat(jar)
        digest.update(f"\0{jar}\0{stat.st_size}\0{stat.st_mtime_ns}".encode())
    return directory / f"{digest.hexdigest()[:20]}.jsa"


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process builds it: wait for its archive
        yield


def prime(environ: MutableMapping[str, str] = os.environ, directory: Path = DIRECTORY) -> str:
    """Make sure the archive exists and name it in ``environ``; returns "mapped" (it was there),
    "built" or "failed" (the JVMs run without one)."""
    archive = archive_path(directory)
    with _locked(directory):
        outcome = "mapped" if archive.is_file() else _build(archive)
    if outcome == "failed":
        environ.pop(ENV, None)
    else:
        environ[ENV] = str(archive)
    return outcome


def _build(archive: Path) -> str:
    partial = archive.with_name(f"{archive.name}.{os.getpid()}.partial")
    # archives of jars or JVMs that are gone; another checkout's (its own jars) stays while it
    # may still be in use
    for other in archive.parent.glob("*.jsa"):
        if time.time() - other.stat().st_mtime > STALE_SECONDS:
            other.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="kafka-class-data-") as workdir:
        cluster = LocalKafkaCluster(
            "class-data", Path(workdir), heap="256m",
            jvm_args=[f"-XX:ArchiveClassesAtExit={partial}"],
        )
        try:
            cluster.start(120.0)
            _serve_clients(cluster)
        except Exception as exc:  # no archive: the test JVMs run without one
            print(f"Kafka class data archive not built: {exc}", flush=True)
        finally:
            cluster.stop(60.0)  # the JVM writes the archive as it exits
    if partial.is_file() and partial.stat().st_size > 0:
        partial.rename(archive)
        return "built"
    partial.unlink(missing_ok=True)
    return "failed"


def _serve_clients(cluster: LocalKafkaCluster) -> None:
    """What the tests' clients ask of a broker: topics, plain and transactional writes, a
    consumer group's reads and commits."""
    cluster.create_topic("class-data", partitions=2)
    records = [Message(b"v%d" % i, key=b"k%d" % i) for i in range(100)]
    produce(cluster, "class-data", records, log_level="3")  # a coordinator still loading: quiet
    producer = Producer(cluster.client_config(**{"transactional.id": "class-data",
                                                 "log_level": "3"}))
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("class-data", b"t", b"k", partition=0)
    producer.commit_transaction(30)
    consumer = Consumer(cluster.client_config(**{
        "group.id": "class-data", "auto.offset.reset": "earliest", "enable.auto.commit": "false",
        "isolation.level": "read_committed", "log_level": "3"}))
    try:
        consumer.assign([TopicPartition("class-data", p, 0) for p in range(2)])
        consumer.consume(num_messages=101, timeout=30)
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
