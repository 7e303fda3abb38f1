"""``kafka-mirror-demo``: two local clusters, sample data, a mirror, and a verify.

Everything runs on loopback and is stopped at the end; what it does is what a user does.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from kafka_mirror_testing.localcluster import LocalKafkaCluster

TOPICS = {"orders": 8, "payments": 3}


def _produce(cluster: LocalKafkaCluster, records: int) -> None:
    producer = Producer(cluster.client_config(**{"linger.ms": "20"}))
    now = int(time.time() * 1000)
    for i in range(records):
        topic = "orders" if i % 4 else "payments"
        producer.produce(
            topic,
            key=f"customer-{i % 500}".encode(),
            value=None if i % 1000 == 999 else f'{{"n": {i}, "amount": {i % 97}}}'.encode(),
            partition=i % TOPICS[topic],
            headers=[("source-app", b"demo"), ("seq", str(i).encode())],
            timestamp=now - (records - i),
        )
        if i % 10_000 == 0:
            producer.poll(0)
    producer.flush(60)


def _ends(cluster: LocalKafkaCluster, topics: dict[str, int]) -> dict[str, int]:
    consumer = Consumer(cluster.client_config(**{"group.id": "demo-probe"}))
    try:
        out = {}
        for topic, count in topics.items():
            total = 0
            for p in range(count):
                try:
                    total += consumer.get_watermark_offsets(TopicPartition(topic, p), 5)[1]
                except Exception:
                    return {}
            out[topic] = total
        return out
    finally:
        consumer.close()


def run_demo(workdir: Path, records: int) -> int:
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    print(f"demo: starting two local Kafka clusters under {workdir}")
    source = LocalKafkaCluster("source", workdir)
    destination = LocalKafkaCluster("destination", workdir)
    mirror: subprocess.Popen[bytes] | None = None
    try:
        source.start()
        destination.start()
        print(f"demo: source {source.bootstrap}, destination {destination.bootstrap}")
        for topic, partitions in TOPICS.items():
            source.create_topic(topic, partitions)
        _produce(source, records)
        expected = _ends(source, TOPICS)
        print(f"demo: produced {records} records with keys, headers and timestamps: {expected}")
        config = workdir / "mm2.properties"
        config.write_text(
            "# written by kafka-mirror-demo: MirrorMaker 2 syntax\n"
            "clusters = source, destination\n"
            f"source.bootstrap.servers = {source.bootstrap}\n"
            f"destination.bootstrap.servers = {destination.bootstrap}\n"
            "source->destination.enabled = true\n"
            "topics = orders, payments\n"
            "replication.factor = 1\n"
            "refresh.topics.interval.seconds = 10\n"
            "spark.driver.memory = 1g\n"
        )
        print(f"demo: kafka-mirror run {config}")
        mirror = subprocess.Popen(
            [sys.executable, "-m", "kafka_mirror.cli", "run", str(config),
             "--state-dir", str(workdir / "state")],
            stdin=subprocess.DEVNULL,
        )
        mirrored = {f"source.{t}": n for t, n in TOPICS.items()}
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and mirror.poll() is None:
            ends = _ends(destination, mirrored)
            if ends and all(ends[f"source.{t}"] >= n for t, n in expected.items()):
                break
            time.sleep(2)
        else:
            print("demo: the mirror did not finish in time", file=sys.stderr)
            return 1
        print(f"demo: destination holds {_ends(destination, mirrored)}; stopping the mirror")
        mirror.send_signal(signal.SIGTERM)
        mirror.wait(60)
        mirror = None
        print(f"demo: kafka-mirror verify {config}")
        return subprocess.call([sys.executable, "-m", "kafka_mirror.cli", "verify", str(config)])
    finally:
        if mirror is not None and mirror.poll() is None:
            mirror.kill()
            mirror.wait(30)
        destination.stop()
        source.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="kafka-mirror-demo",
        description="two local Kafka clusters, sample data, a kafka-mirror run, a verify")
    parser.add_argument("--workdir", type=Path, default=Path("demo-work"))
    parser.add_argument("--records", type=int, default=20_000)
    ns = parser.parse_args(argv)
    return run_demo(ns.workdir, ns.records)


if __name__ == "__main__":
    sys.exit(main())
