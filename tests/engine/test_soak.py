"""A mirror's long life in short: records produced steadily to one topic while other topics are
created, mirrored and deleted one after the other. What the mirror keeps must follow the topics
it mirrors now, not every topic it ever saw: the state files name none of the deleted topics
once their retention passed, and the steady topic arrives whole, in order, without duplicates.
The figures of the start (after two topics came and went) and the end (RSS and threads of the
mirror's processes, state-file bytes, mean batch time) are printed side by side (``-s``), and
so is the series of them taken after every topic (each interval's mean batch time), with the
second half's change: whether they stay flat is a report, not an assertion, but for the threads of
the mirror's Python process (each query run once left one behind). Its log has nothing an
operator would alert on.

CI form: 60 s, a topic every few seconds, ``mirror.topic.state.retention.ms=0``. Full form
(``KAFKA_MIRROR_FULL=1``): an hour, a topic every 3 minutes, a retention of 10 minutes.
"""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import psutil
import pytest
from confluent_kafka import Producer
from mirror_process import MirrorProcess, alarms, mm2_properties, read_partitions
from prometheus_client.parser import text_string_to_metric_families

from kafka_mirror.state.files import read_json
from kafka_mirror_testing.forms import FULL
from kafka_mirror_testing.localcluster import LOOPBACK, LocalKafkaCluster, free_port
from kafka_mirror_testing.records import Message, produce
from kafka_mirror_testing.waiting import wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

# KAFKA_MIRROR_SOAK_SECONDS sets another length
SECONDS = float(os.environ.get("KAFKA_MIRROR_SOAK_SECONDS", 3600.0 if FULL else 60.0))
CHURN_SECONDS = 180.0 if FULL else 5.0
RETENTION_MS = 600_000 if FULL else 0
RATE = 50.0  # records/s to the steady topic
WARM_UP_TOPICS = 2  # the start figures are taken after this many topics came and went
# threads of the mirror's Python process that may come meanwhile (a background rebuild, a client)
PYTHON_THREADS_SLACK = 5
STATE_FILES = ("offset-ranges.json", "target-ends.json", "departed-topics.json",
               "source-epochs.json")


class SteadyProducer:
    """Records at :data:`RATE` per second, round-robin over the topic's partitions, each with a
    key of its own; every one acknowledged or the test fails."""

    def __init__(self, cluster: LocalKafkaCluster, topic: str, partitions: int) -> None:
        self.producer = Producer(cluster.client_config(**{"enable.idempotence": "true"}))
        self.topic, self.partitions = topic, partitions
        self.errors: list[str] = []
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="steady-producer", daemon=True)

    def _delivered(self, err: Any, _msg: Any) -> None:
        if err is not None:
            self.errors.append(str(err))

    def _run(self) -> None:
        began = time.monotonic()
        while not self._stop.is_set():
            due = int((time.monotonic() - began) * RATE) - self.sent
            for _ in range(due):
                self.producer.produce(self.topic, b"v", b"k%09d" % self.sent,
                                      partition=self.sent % self.partitions,
                                      on_delivery=self._delivered)
                self.sent += 1
            self.producer.poll(0.05)

    def start(self) -> SteadyProducer:
        self._thread.start()
        return self

    def halt(self) -> None:
        """Stop producing (the test's teardown: nothing checked)."""
        self._stop.set()
        self._thread.join(30)

    def stop(self) -> None:
        """Stop producing; every record sent is acknowledged."""
        self.halt()
        assert self.producer.flush(60) == 0, "records not acknowledged"
        assert not self.errors, self.errors[:3]


def _figures(mirror: MirrorProcess, flow_dir: Path, port: int) -> dict[str, float]:
    """RSS (MiB) and threads of the mirror's processes, state-file bytes, and the batches'
    count and summed seconds so far."""
    assert mirror.proc is not None
    root = psutil.Process(mirror.proc.pid)
    processes = [root, *root.children(recursive=True)]
    rss = threads = 0
    for process in processes:
        try:
            rss += process.memory_info().rss
            threads += process.num_threads()
        except psutil.NoSuchProcess:
            continue
    state = sum((flow_dir / name).stat().st_size for name in STATE_FILES
                if (flow_dir / name).is_file())
    with urllib.request.urlopen(f"http://{LOOPBACK}:{port}/metrics", timeout=10) as page:
        text = page.read().decode()
    batches = seconds = 0.0
    for family in text_string_to_metric_families(text):
        if family.name == "kafka_mirror_batch_duration_seconds":
            for sample in family.samples:
                if sample.name.endswith("_count"):
                    batches += sample.value
                elif sample.name.endswith("_sum"):
                    seconds += sample.value
    return {"rss_mib": rss / 2**20, "threads": threads, "python_threads": root.num_threads(),
            "state_bytes": state, "batches": batches, "batch_seconds": seconds}


def _named(flow_dir: Path) -> set[str]:
    """The source topics the flow's state files and newest generation name."""
    named: set[str] = set()
    for name in ("offset-ranges.json", "target-ends.json"):
        path = flow_dir / name
        if path.is_file():
            rows = read_json(path, list, "not read") or []  # rows appended after the array
            named |= {entry["topic"] for entry in rows}
    epochs = flow_dir / "source-epochs.json"
    if epochs.is_file():
        named |= set(json.loads(epochs.read_text()))
    generations = sorted(flow_dir.glob("gen-*"), key=lambda p: int(p.name[4:]))
    ids = generations[-1] / "topic-ids.json" if generations else None
    if ids is not None and ids.is_file():
        named |= set(json.loads(ids.read_text()))
    return named


@pytest.mark.timeout(SECONDS + 900)
def test_a_long_life_with_topics_coming_and_going_keeps_bounded_state(
    source_cluster: LocalKafkaCluster, destination_cluster: LocalKafkaCluster,
    unique_topic: str, tmp_path: Path,
) -> None:
    steady = f"{unique_topic}-steady"
    source_cluster.create_topic(steady, 2)
    port = free_port()
    config = tmp_path / "mm2.properties"
    config.write_text(mm2_properties(
        source_cluster, destination_cluster,
        f"topics = {unique_topic}-.*\nmirror.topic.state.retention.ms = {RETENTION_MS}\n"
        f"mirror.metrics.port = {port}\nmirror.metrics.bind.address = {LOOPBACK}\n"))
    state = tmp_path / "state"
    producer = SteadyProducer(source_cluster, steady, 2).start()
    mirror = MirrorProcess(["run", str(config), "--state-dir", str(state)],
                           tmp_path / "mirror.log").start()
    deleted: list[tuple[str, float]] = []  # and when
    try:
        wait_for(lambda: all(read_partitions(destination_cluster, f"source.{steady}").get(p)
                             for p in (0, 1)), 240, "the steady topic mirrored", mirror)
        (flow_dir,) = {p.parent for p in state.glob("*/gen-*")}
        start: dict[str, float] = {}
        series: list[tuple[float, dict[str, float]]] = []  # (seconds since began, figures)
        began = time.monotonic()
        number = 0
        while time.monotonic() - began < SECONDS or not start:
            if number == WARM_UP_TOPICS:  # the JVM warmed up, every kind of restart seen
                start = _figures(mirror, flow_dir, port)
                series.append((time.monotonic() - began, start))
            elif start:
                series.append((time.monotonic() - began, _figures(mirror, flow_dir, port)))
            topic = f"{unique_topic}-n{number:04d}"
            source_cluster.create_topic(topic, 1)
            produce(source_cluster, topic, [Message(b"x", key=b"%d" % i) for i in range(10)])
            wait_for(lambda t=topic: len(read_partitions(destination_cluster, f"source.{t}")
                                         .get(0, [])) >= 10,
                     120, f"{topic} mirrored", mirror)
            admin: Any = source_cluster.admin()
            for future in admin.delete_topics([topic], operation_timeout=30).values():
                future.result(timeout=60)
            deleted.append((topic, time.monotonic()))
            number += 1
            time.sleep(CHURN_SECONDS)  # a topic's life in the flow
        producer.stop()
        expected = read_partitions(source_cluster, steady)
        wait_for(lambda: read_partitions(destination_cluster, f"source.{steady}") == expected,
                 240, "every steady record mirrored once, in order", mirror)
        end = _figures(mirror, flow_dir, port)
        series.append((time.monotonic() - began, end))
        # the deleted topics whose retention passed are named by no state file; the last one
        # may still be on its way out (its query start without it can be under way), and those
        # deleted within the retention (and a topic's life after it: the next query start) stay
        now = time.monotonic()
        keep = RETENTION_MS / 1000 + CHURN_SECONDS + 120 if RETENTION_MS else 0.0
        waiting = {t for t, at in deleted[:-1] if now - at < keep} | {t for t, _ in deleted[-1:]}
        named = _named(flow_dir) & {t for t, _ in deleted}
        assert named <= waiting, (sorted(named), sorted(waiting))
        # every query run (two per topic) once left a py4j connection and a Python thread
        # behind (kafka_mirror.engine.py4j_connections): the Python process's threads stay put
        assert end["python_threads"] <= start["python_threads"] + PYTHON_THREADS_SLACK, \
            (start["python_threads"], end["python_threads"], len(deleted))
        code, _ = mirror.terminate()
        assert code == 0, mirror.output()[-3000:]
        # topics deleted while mirrored, queries restarted every few seconds: nothing to alert on
        assert not alarms(mirror.output()), alarms(mirror.output())[:10]
    finally:
        producer.halt()
        mirror.cleanup()
    half = {k: (v, end[k]) for k, v in start.items() if k not in ("batches", "batch_seconds")}
    mean = [f"{s / b:.3f}" if b else "-" for s, b in
            ((start["batch_seconds"], start["batches"]),
             (end["batch_seconds"] - start["batch_seconds"], end["batches"] - start["batches"]))]
    print(f"soak {SECONDS:.0f} s, {len(deleted)} topics created and deleted: "
          + ", ".join(f"{k} {a:.0f} -> {b:.0f}" for k, (a, b) in half.items())
          + f", mean batch seconds {mean[0]} -> {mean[1]}")
    print(_series_report(series))


def _series_report(series: list[tuple[float, dict[str, float]]]) -> str:
    """The figures taken along the way, a line each (the mean batch time of the interval since
    the previous line), then the second half's change of RSS, threads and state bytes."""
    lines = ["   s  rss MiB  threads  (Python)  state bytes  mean batch s"]
    previous: dict[str, float] | None = None
    for at, figures in series:
        mean = "-"
        if previous is not None and figures["batches"] > previous["batches"]:
            took = figures["batch_seconds"] - previous["batch_seconds"]
            mean = f"{took / (figures['batches'] - previous['batches']):.3f}"
        lines.append(f"{at:5.0f} {figures['rss_mib']:8.0f} {figures['threads']:8.0f} "
                     f"{figures['python_threads']:9.0f} {figures['state_bytes']:12.0f}  {mean}")
        previous = figures
    middle, last = series[len(series) // 2][1], series[-1][1]
    lines.append("second half: " + ", ".join(f"{key} {middle[key]:.0f} -> {last[key]:.0f}"
                                             for key in ("rss_mib", "threads", "python_threads",
                                                         "state_bytes")))
    return "\n".join(lines)
