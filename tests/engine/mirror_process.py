"""Run ``kafka-mirror`` as users do, as a process of its own, for end-to-end tests."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from kafka_mirror_testing.localcluster import LocalKafkaCluster
from kafka_mirror_testing.waiting import wait_for

CLI = [sys.executable, "-m", "kafka_mirror.cli"]
# The Spark driver's class data archive, shared by the test mirrors of this machine (each builds
# it when none matches; later starts map it: kafka_mirror.engine.class_data)
CLASS_DATA_DIR = Path(tempfile.gettempdir()) / f"kafka-mirror-tests-class-data-{os.getuid()}"


# What a test mirror does while it waits, on 2 cores shared by two test workers: Spark asks the
# source for its end offsets every 10 ms when a batch found nothing (its internal
# spark.sql.streaming.pollingDelay), and a heartbeat each second starts a Spark batch of the flow
# that mirrors it. An idle test mirror took 16 CPU-s a minute, 6 with these two (a test that
# measures heartbeats or polling sets its own).
IDLE_SETTINGS = {
    "spark.sql.streaming.pollingDelay": "100ms",
    "emit.heartbeats.interval.seconds": "5",
}


def mm2_properties(
    source: LocalKafkaCluster, destination: LocalKafkaCluster, extra: str = "",
    aliases: tuple[str, str] = ("source", "destination"),
) -> str:
    """A one-flow mm2.properties between the clusters' PLAINTEXT listeners (``extra`` may set
    other addresses and client settings per alias)."""
    given = {line.split("=", 1)[0].strip() for line in extra.splitlines() if "=" in line}
    idle = "".join(f"{k} = {v}\n" for k, v in IDLE_SETTINGS.items() if k not in given)
    src, dst = aliases
    addresses = "".join(f"{alias}.bootstrap.servers = {cluster.bootstrap}\n"
                        for alias, cluster in ((src, source), (dst, destination))
                        if f"{alias}.bootstrap.servers" not in given)
    return (
        f"clusters = {src}, {dst}\n" + addresses +
        f"{src}->{dst}.enabled = true\n"
        "replication.factor = 1\n"
        + ("" if "refresh.topics.interval.seconds" in given
           else "refresh.topics.interval.seconds = 3\n") +
        "spark.driver.memory = 768m\n"
        "spark.master = local[2]\n"
        f"mirror.class.data.dir = {CLASS_DATA_DIR}\n" + idle + extra
    )


# What an operator's log alerting catches: an ERROR line from any logger (the mirror's, Spark's
# log4j, py4j), a stack trace (Python's; Java's, also a thread's uncaught error), and librdkafka's
# own lines written past the logging set-up (``%4|1700000000.123|GETPID|rdkafka#producer-1| ...``)
_ALARMS = re.compile(r"\bERROR\b|^Traceback \(most recent call last\)|^Exception in thread |"
                     r"^\s+at [\w$./<>-]+\(|^%\d\|\d+\.\d+\|")


def alarms(log: str) -> list[str]:
    """The lines of a mirror's log an operator would alert on (see _ALARMS)."""
    return [line for line in log.splitlines() if _ALARMS.search(line)]


class MirrorProcess:
    """``kafka-mirror ARGS`` in its own session, logging to a file; ``prefix`` runs it through a
    wrapper (e.g. ``ip netns exec NAME``, which execs it: the PID stays the mirror's)."""

    def __init__(self, args: list[str], log: Path, *, prefix: Sequence[str] = (),
                 env: dict[str, str] | None = None) -> None:
        self.args = args
        self.log = log
        self.prefix = list(prefix)
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> MirrorProcess:
        env = {**os.environ, **self.env} if self.env else None
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [*self.prefix, *CLI, *self.args], stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True, env=env,
            )
        return self

    def terminate(self, timeout: float = 30.0) -> tuple[int, float]:
        """SIGTERM; returns (exit code, seconds it took)."""
        assert self.proc is not None
        began = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout)
        return code, time.monotonic() - began

    def wait_exit(self, timeout: float) -> int:
        """The exit code of a mirror expected to end on its own; when it does not within
        ``timeout``, the test fails with the end of its log, after every thread's stack of the
        mirror (SIGUSR1) and of its Spark JVM (SIGQUIT) was written there."""
        assert self.proc is not None
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.dump_stacks()
            raise AssertionError(
                f"the mirror did not exit within {timeout:.0f} s:\n{self.output()[-12000:]}"
            ) from None

    def dump_stacks(self) -> None:
        """Every thread's stack of the running mirror and its JVMs, written to its log."""
        assert self.proc is not None
        offset = self.log.stat().st_size
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGUSR1)
        jvms = _session_jvms(self.proc.pid)
        for pid in jvms:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGQUIT)

        def dumped() -> bool:
            with self.log.open("rb") as log:
                log.seek(offset)
                text = log.read()
            return b"most recent call first" in text and \
                text.count(b"Full thread dump") >= len(jvms)

        deadline = time.monotonic() + 20  # a JVM under load reaches its safepoint late
        while time.monotonic() < deadline and not dumped():
            time.sleep(0.2)
        size = -1
        while time.monotonic() < deadline and self.log.stat().st_size != size:
            size = self.log.stat().st_size
            time.sleep(0.5)  # the dumps' last lines

    def pause(self, timeout: float = 30.0) -> None:
        """SIGSTOP of the mirror's whole session (its Spark JVM included), returned once every
        thread of it has stopped. ``kill()`` returns before they have: a process stops when a
        thread of its own next runs and takes the signal, then its other threads as each next
        runs; on a loaded machine a JVM's threads went on for tens of milliseconds after it (a
        source reader fetched records produced after the call and handed them to Spark)."""
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGSTOP)
        deadline = time.monotonic() + timeout
        while not _all_stopped(_session_processes(self.proc.pid, group=True)):
            assert time.monotonic() < deadline, "the mirror's threads did not all stop"
            time.sleep(0.005)

    def resume(self) -> None:
        """SIGCONT of the mirror's whole session (after :meth:`pause`)."""
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGCONT)

    def kill_hard(self) -> None:
        """kill -9 of the mirror and its Spark JVM (the whole session it started)."""
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)

    def cleanup(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def failure(self) -> str | None:
        """For :func:`wait_for`: the mirror exited (nothing it was awaited for will come)."""
        if self.proc is not None and self.proc.poll() is not None:
            return f"mirror exited ({self.proc.returncode})"
        return None

    def tail(self) -> str:
        """For :func:`wait_for`: the end of the mirror's log."""
        return self.output()[-4000:]


def _session_processes(session: int, command: str | None = None, *, group: bool = False
                       ) -> list[int]:
    """The processes of a session (named ``command``, when given); ``group``: of the process
    group ``session`` instead (what :func:`os.killpg` signals)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            fields = stat.read_text().rsplit(")", 1)
            if (command is None or fields[0].endswith(f"({command}")) and \
                    int(fields[1].split()[2 if group else 3]) == session:
                found.append(int(stat.parent.name))
    return found


def _session_jvms(session: int) -> list[int]:
    """The java processes of a session (the mirror's Spark driver, a class data dump)."""
    return _session_processes(session, "java")


def _all_stopped(pids: Iterable[int]) -> bool:
    """Whether every thread of ``pids`` is stopped (or gone)."""
    for pid in pids:
        for stat in Path(f"/proc/{pid}/task").glob("[0-9]*/stat"):
            with contextlib.suppress(OSError):
                if stat.read_text().rsplit(")", 1)[1].split()[0] not in "TtZX":
                    return False
    return True


def end_offsets(cluster: LocalKafkaCluster, topic: str) -> dict[int, int]:
    """End offsets per partition; empty while the topic or a leader is not there yet."""
    consumer = Consumer(cluster.client_config(**{"group.id": "probe"}))
    try:
        meta = consumer.list_topics(topic, timeout=10)
        parts = meta.topics[topic].partitions if topic in meta.topics else {}
        if meta.topics.get(topic) is None or meta.topics[topic].error is not None:
            return {}
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in parts
        }
    except KafkaException:
        return {}
    finally:
        consumer.close()


# a group coordinator changing hands or loading (asked again)
COORDINATOR_MOVING = frozenset({KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                                KafkaError.COORDINATOR_NOT_AVAILABLE})


def committed_offsets(cluster: LocalKafkaCluster, group: str,
                      partitions: Iterable[tuple[str, int]], timeout: float = 15) -> dict[
                          tuple[str, int], int]:
    """The group's committed offsets (-1 where none), read by a client in the group that never
    joins it (librdkafka's admin call for this crashes the process when the coordinator is
    still loading: librdkafka issue 5040). A coordinator that moves or loads meanwhile
    (NOT_COORDINATOR and the like, which the broker answers while the group's partition changes
    hands) is asked again, within ``timeout``."""
    wanted = [TopicPartition(t, p) for t, p in partitions]
    deadline = time.monotonic() + timeout
    consumer = Consumer(cluster.client_config(**{"group.id": group,
                                                 "enable.auto.commit": "false"}))
    try:
        while True:
            try:
                result = consumer.committed(wanted, timeout=max(1.0, deadline - time.monotonic()))
                break
            except KafkaException as exc:
                error = exc.args[0]
                if time.monotonic() >= deadline or not (
                        error.retriable() or error.code() in COORDINATOR_MOVING):
                    raise
                time.sleep(0.5)
    finally:
        consumer.close()
    return {(tp.topic, tp.partition): tp.offset if tp.offset >= 0 else -1 for tp in result}


Record = tuple[bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...], int]


def read_with_offsets(cluster: LocalKafkaCluster,
                      topic: str) -> dict[int, list[tuple[int, Record]]]:
    """Every committed record of ``topic`` with its offset, per partition, in offset order
    (transaction markers and aborted records are not records); fails when a partition is not
    read to its end offset within 120 s. A topic listed whose end offsets cannot be read yet (a
    leader moving after a node restarted) is asked again, not read as a topic of no partitions."""
    ends: dict[int, int] = {}

    def answered() -> bool:
        nonlocal ends
        ends = end_offsets(cluster, topic)
        return bool(ends) or not _listed(cluster, topic)

    wait_for(answered, 120, f"the end offsets of {topic}", interval=0.5)
    consumer = Consumer(cluster.client_config(**{
        "group.id": "reader", "enable.auto.commit": "false",
        "isolation.level": "read_committed", "enable.partition.eof": "true"}))
    out: dict[int, list[tuple[int, Record]]] = {p: [] for p in ends}
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in ends])
        remaining = {p for p, end in ends.items() if end > 0}
        deadline = time.monotonic() + 120
        while remaining and time.monotonic() < deadline:
            for msg in consumer.consume(1000, timeout=1.0):
                if msg.error():
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        position = consumer.position([TopicPartition(topic, msg.partition())])
                        if position[0].offset >= ends[msg.partition()]:
                            remaining.discard(msg.partition())
                    continue
                out[msg.partition()].append((msg.offset(), (
                    msg.key(), msg.value(), tuple(msg.headers() or ()), msg.timestamp()[1])))
        assert not remaining, f"partitions {remaining} of {topic} not read to their end"
    finally:
        consumer.close()
    return out


def _listed(cluster: LocalKafkaCluster, topic: str) -> bool:
    """Whether the cluster's metadata lists ``topic`` (with or without a leader for each
    partition)."""
    consumer = Consumer(cluster.client_config(**{"group.id": "probe"}))
    try:
        meta = consumer.list_topics(topic, timeout=10).topics.get(topic)
        return meta is not None and (meta.error is None or
                                     meta.error.code() != KafkaError.UNKNOWN_TOPIC_OR_PART)
    except KafkaException:
        return True  # not answered: it may well be there
    finally:
        consumer.close()


def read_partitions(cluster: LocalKafkaCluster, topic: str) -> dict[int, list[Record]]:
    """Every committed record of ``topic``, per partition, in offset order."""
    return {p: [record for _, record in records]
            for p, records in read_with_offsets(cluster, topic).items()}


def first_occurrences(records: Iterable[Record]) -> list[Record]:
    seen: set[Record] = set()
    out = []
    for record in records:
        if record not in seen:
            seen.add(record)
            out.append(record)
    return out


@contextmanager
def running(clusters: Sequence[LocalKafkaCluster], timeout: float = 90.0
            ) -> Iterator[Sequence[LocalKafkaCluster]]:
    """Start the clusters in parallel (each start is mostly JVM warm-up); stop them all after."""
    try:
        with ThreadPoolExecutor(max_workers=len(clusters)) as pool:
            for future in [pool.submit(c.start, timeout) for c in clusters]:
                future.result()
        yield clusters
    finally:
        for cluster in clusters:
            cluster.stop()


def stop_compaction(cluster: LocalKafkaCluster, topic: str) -> None:
    """cleanup.policy=delete (the test brokers never delete by time): the holes stay, no more
    records vanish while the test compares."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    admin = cluster.admin()
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("cleanup.policy", "delete",
                    incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result()
    time.sleep(1)  # a cleaning pass under way finishes
