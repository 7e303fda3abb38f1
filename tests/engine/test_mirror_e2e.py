"""The mirror against two real Kafka clusters, run as the ``kafka-mirror`` process.

No mocks: real KRaft brokers from the Maven jars, a real Spark job, the real CLI.
"""

from __future__ import annotations

import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    ConfigResource,
    NewPartitions,
    ResourcePatternType,
    ResourceType,
)
from mirror_process import (
    CLI,
    MirrorProcess,
    alarms,
    committed_offsets,
    end_offsets,
    first_occurrences,
    mm2_properties,
    read_partitions,
)

from kafka_mirror_testing.localcluster import LOOPBACK, LocalKafkaCluster, free_port
from kafka_mirror_testing.records import Message, produce
from kafka_mirror_testing.waiting import wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

BIG = 180_000  # bytes; the topic allows 200 000, so this is near max.message.bytes


LARGE = {"message.max.bytes": "1000000"}


def _records(partitions: int, count: int, tag: str) -> Iterator[Message]:
    """Null keys, tombstones, repeated and null headers, values of several sizes, timestamps."""
    for i in range(count):
        yield Message(
            key=None if i % 7 == 3 else f"{tag}-key-{i}".encode(),
            value=None if i % 11 == 5 else f"{tag}-value-{i}".encode() * (1 + i % 5),
            partition=i % partitions,
            headers=[("trace", f"{i}".encode()), ("empty", None), ("trace", b"dup")]
            if i % 3 else None,
            timestamp=1_600_000_000_000 + i * 1000,
        )


def _same(source: LocalKafkaCluster, destination: LocalKafkaCluster, topic: str,
          target: str) -> None:
    src = read_partitions(source, topic)
    dst = read_partitions(destination, target)
    assert set(dst) >= set(src)
    for partition, records in src.items():
        assert dst[partition] == records, f"{target}[{partition}] differs from {topic}"


def _mirror_has(destination: LocalKafkaCluster, target: str, expected: dict[int, int]) -> bool:
    ends = end_offsets(destination, target)
    return all(ends.get(p, -1) >= n for p, n in expected.items())


# real-time mode (the default) holds a task slot per group of source partitions; its
# batches here outlast every step of the tests: stops and topic changes must not wait for a
# batch's end, nor write a record twice, and the lag group must move between batch ends
MODES = {
    "micro-batch": "mirror.mode = micro-batch\n",
    "realtime": "mirror.realtime.batch.duration.ms = 120000\n"
                "spark.master = local[24]\n",
}


@pytest.mark.parametrize("mode", sorted(MODES))
def test_fidelity_new_topics_partitions_verify_and_sigterm(
    source_cluster: LocalKafkaCluster, destination_cluster: LocalKafkaCluster,
    unique_topic: str, tmp_path: Path, mode: str,
) -> None:
    prefix = unique_topic
    admin = source_cluster.admin()
    source_cluster.create_topic(f"{prefix}-a", 4)
    source_cluster.create_topic(f"{prefix}-b", 2, config={"max.message.bytes": "200000"})
    source_cluster.create_topic(f"{prefix}-internal", 1)
    produce(source_cluster, f"{prefix}-a", _records(4, 2000, "a"), **LARGE)
    produce(source_cluster, f"{prefix}-b", _records(2, 300, "b"), **LARGE)
    produce(source_cluster, f"{prefix}-b", [
        Message(key=b"big", value=b"x" * BIG, partition=1, timestamp=1_700_000_000_000)])

    config = tmp_path / "mm2.properties"
    config.write_text(mm2_properties(source_cluster, destination_cluster,
                                     f"topics = {prefix}-.*\n" + MODES[mode]))
    mirror = MirrorProcess(["run", str(config), "--state-dir", str(tmp_path / "state")],
                           tmp_path / "mirror.log").start()
    try:
        wait_for(lambda: _mirror_has(destination_cluster, f"source.{prefix}-a",
                                     {0: 500, 1: 500, 2: 500, 3: 500}), 180,
                 "topic a mirrored", mirror)
        wait_for(lambda: _mirror_has(destination_cluster, f"source.{prefix}-b",
                                     {0: 150, 1: 151}), 60, "topic b mirrored", mirror)
        if mode == "realtime":
            wait_for(lambda: committed_offsets(
                source_cluster, "kafka-mirror.source_to_destination",
                [(f"{prefix}-a", p) for p in range(4)]) == {(f"{prefix}-a", p): 500
                                                            for p in range(4)},
                     60, "the lag group at the source's end", mirror)
        _same(source_cluster, destination_cluster, f"{prefix}-a", f"source.{prefix}-a")
        _same(source_cluster, destination_cluster, f"{prefix}-b", f"source.{prefix}-b")
        # same partition count and the synced config; as in MirrorMaker 2 4.x, a user topic
        # named *-internal is mirrored (only MM2's own mm2*.internal topics are excluded)
        dest_topics = destination_cluster.admin().list_topics(timeout=10).topics
        assert len(dest_topics[f"source.{prefix}-a"].partitions) == 4
        assert f"source.{prefix}-internal" in dest_topics
        resource = ConfigResource(ConfigResource.Type.TOPIC, f"source.{prefix}-b")
        dest_admin = destination_cluster.admin()  # must outlive its futures
        (described,) = dest_admin.describe_configs([resource]).values()
        configs = described.result()
        assert configs["max.message.bytes"].value == "200000"  # synced from the source
        assert configs["message.timestamp.type"].value == "CreateTime"

        # a new matching topic and new partitions are picked up without a restart
        source_cluster.create_topic(f"{prefix}-c", 3)
        produce(source_cluster, f"{prefix}-c", _records(3, 90, "c"), **LARGE)
        for future in admin.create_partitions([NewPartitions(f"{prefix}-a", 6)]).values():
            future.result()
        wait_for(lambda: len(end_offsets(source_cluster, f"{prefix}-a")) == 6, 30,
                 "the new partitions' leaders", mirror)
        produce(source_cluster, f"{prefix}-a", _records(6, 600, "a2"), **LARGE)
        wait_for(lambda: _mirror_has(destination_cluster, f"source.{prefix}-c",
                                     {0: 30, 1: 30, 2: 30}), 90, "new topic mirrored", mirror)
        wait_for(lambda: _mirror_has(destination_cluster, f"source.{prefix}-a",
                                     {4: 100, 5: 100, 0: 600}), 90, "new partitions", mirror)
        _same(source_cluster, destination_cluster, f"{prefix}-a", f"source.{prefix}-a")
        _same(source_cluster, destination_cluster, f"{prefix}-c", f"source.{prefix}-c")

        code, seconds = mirror.terminate()
        assert code == 0, mirror.output()[-3000:]
        assert seconds < 30
        # a clean stop after a run of a minute or more: nothing an operator alerts on, and not
        # Spark's WARN that the stopped query's job group had no job to cancel
        assert not alarms(mirror.output()), "\n".join(alarms(mirror.output())[:40])
        stopping = mirror.output().split("kafka_mirror.runtime.mirror: stopping\n", 1)[-1]
        assert "WARN DAGScheduler" not in stopping, stopping[-3000:]
        # nor what every start printed: Spark's fallback on its log4j defaults, Hadoop's missing
        # native library, Spark turning adaptive execution off for the streaming query (in
        # real-time mode whatever the setting)
        for noise in ("Using Spark's default log4j profile", "Setting default log level",
                      "WARN NativeCodeLoader", "adaptive.enabled is not supported",
                      "Disabling AQE"):
            assert noise not in mirror.output(), noise
    finally:
        mirror.cleanup()

    # verify: all equal, then one record differs and verify names the partition
    run = subprocess.run([*CLI, "verify", str(config)], capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "all partitions match" in run.stdout
    produce(destination_cluster, f"source.{prefix}-c",
            [Message(key=b"intruder", value=b"!", partition=2)])
    run = subprocess.run([*CLI, "verify", str(config)], capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 1, run.stdout + run.stderr
    assert f"DIFF  {prefix}-c[2] -> source.{prefix}-c[2]" in run.stdout
    assert "1 partitions differ" in run.stdout


@pytest.mark.parametrize("mode", sorted(MODES))
def test_kill_9_mid_stream_loses_nothing_and_keeps_order(
    source_cluster: LocalKafkaCluster, destination_cluster: LocalKafkaCluster,
    unique_topic: str, tmp_path: Path, mode: str,
) -> None:
    topic = unique_topic
    source_cluster.create_topic(topic, 3)
    total = 30_000
    done = threading.Event()

    def produce_slowly() -> None:
        for start in range(0, total, 1000):
            produce(source_cluster, topic, (
                Message(key=f"k{i % 97}".encode(), value=f"v{i}".encode(), partition=i % 3,
                        headers=[("n", str(i).encode())])
                for i in range(start, min(start + 1000, total))), timeout=30)
            time.sleep(0.25)  # a stream over several seconds, not a burst: paces the writer
        done.set()

    config = tmp_path / "mm2.properties"
    config.write_text(mm2_properties(
        source_cluster, destination_cluster,
        f"topics = {topic}\n"
        + (MODES[mode] if mode == "realtime" else "mirror.max.records.per.batch = 2000\n"),
    ))
    args = ["run", str(config), "--state-dir", str(tmp_path / "state")]
    writer = threading.Thread(target=produce_slowly)
    writer.start()
    first = MirrorProcess(args, tmp_path / "mirror-1.log").start()
    try:
        wait_for(lambda: sum(end_offsets(destination_cluster, f"source.{topic}").values())
                 > 3000, 180, "mirroring under way", first)
        first.kill_hard()
    finally:
        first.cleanup()
    killed_at = sum(end_offsets(destination_cluster, f"source.{topic}").values())
    second = MirrorProcess(args, tmp_path / "mirror-2.log").start()
    try:
        writer.join(300)
        assert done.is_set()
        # the mirror's own positions (its lag group), not the target's end offsets: with
        # replayed duplicates those reach the source's count before the last records arrive
        def caught_up() -> bool:
            positions = committed_offsets(source_cluster, "kafka-mirror.source_to_destination",
                                          [(topic, p) for p in range(3)])
            return all(offset >= total // 3 for offset in positions.values())

        wait_for(caught_up, 240, "everything mirrored after the restart", second)
        code, _ = second.terminate()
        assert code == 0
    finally:
        second.cleanup()
    src = read_partitions(source_cluster, topic)
    dst = read_partitions(destination_cluster, f"source.{topic}")
    duplicates = 0
    for partition, records in src.items():
        # nothing lost, and in source order once replayed duplicates are set aside
        assert first_occurrences(dst[partition]) == records
        duplicates += len(dst[partition]) - len(records)
    # exactly once on the target (mirror.exactly.once.target, the default): the restart skipped
    # what the cut batch (real-time mode: the run since its last drain) had written
    assert duplicates == 0, second.output()[-3000:]
    print(f"killed with {killed_at} records mirrored; {duplicates} re-delivered after restart")


def test_unreachable_cluster_fails_fast_naming_it(
    source_cluster: LocalKafkaCluster, tmp_path: Path
) -> None:
    config = tmp_path / "mm2.properties"
    config.write_text(
        "clusters = source, dr\n"
        f"source.bootstrap.servers = {source_cluster.bootstrap}\n"
        "dr.bootstrap.servers = 127.0.0.1:1\n"
        "source->dr.enabled = true\n"
    )
    began = time.monotonic()
    run = subprocess.run([*CLI, "run", str(config), "--connect-timeout", "5",
                          "--state-dir", str(tmp_path / "s")],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 1
    assert "cluster 'dr' (127.0.0.1:1)" in run.stderr
    assert time.monotonic() - began < 30


def test_bad_config_is_a_clear_error(tmp_path: Path) -> None:
    config = tmp_path / "mm2.properties"
    config.write_text("clusters=A,B\nA.bootstrap.servers=x:1\nB.bootstrap.servers=y:1\n"
                      "A->B.enabled=true\nreplication.factor=lots\n")
    run = subprocess.run([*CLI, "run", str(config)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert "key 'replication.factor'" in run.stderr and "value 'lots'" in run.stderr
    assert str(config) in run.stderr


def test_refused_authentication_fails_fast_naming_the_cluster(
    source_cluster: LocalKafkaCluster, tmp_path: Path
) -> None:
    users = 'user_admin="admin-secret" user_mirror="mirror-secret"'
    secured = LocalKafkaCluster(
        "secured", tmp_path, heap="384m",
        extra_listeners={"SASL_PLAINTEXT": "SASL_PLAINTEXT"},
        server_overrides={
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config":
                "org.apache.kafka.common.security.plain.PlainLoginModule required "
                f'username="admin" password="admin-secret" {users};',
        },
    )
    with secured.start():
        config = tmp_path / "mm2.properties"
        config.write_text(
            "clusters = source, dr\n"
            f"source.bootstrap.servers = {source_cluster.bootstrap}\n"
            f"dr.bootstrap.servers = {secured.bootstrap_for('SASL_PLAINTEXT')}\n"
            "dr.security.protocol = SASL_PLAINTEXT\n"
            "dr.sasl.mechanism = PLAIN\n"
            "dr.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule "
            'required username="mirror" password="wrong";\n'
            "source->dr.enabled = true\n"
        )
        began = time.monotonic()
        run = subprocess.run([*CLI, "run", str(config), "--connect-timeout", "20",
                              "--state-dir", str(tmp_path / "s")],
                             capture_output=True, text=True, timeout=120)
        assert run.returncode == 1, run.stderr[-2000:]
        assert "cluster 'dr'" in run.stderr
        assert "uthentication" in run.stderr
        assert time.monotonic() - began < 60


def test_destination_that_cannot_grow_is_a_clear_error(
    source_cluster: LocalKafkaCluster, unique_topic: str, tmp_path: Path
) -> None:
    guarded = LocalKafkaCluster(
        "guarded", tmp_path, heap="384m",
        server_overrides={
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "allow.everyone.if.no.acl.found": "true",
        },
    )
    topic = unique_topic
    source_cluster.create_topic(topic, 3)
    with guarded.start():
        guarded.create_topic(topic, 1)
        admin = guarded.admin()
        # everything allowed on the topic except ALTER, which adding partitions needs
        acls = [
            AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL,
                       "User:ANONYMOUS", "*", operation, permission)
            for operation, permission in ((AclOperation.ALL, AclPermissionType.ALLOW),
                                          (AclOperation.ALTER, AclPermissionType.DENY))
        ]
        for future in admin.create_acls(acls).values():
            future.result()
        config = tmp_path / "mm2.properties"
        config.write_text(
            "clusters = source, guarded\n"
            f"source.bootstrap.servers = {source_cluster.bootstrap}\n"
            f"guarded.bootstrap.servers = {guarded.bootstrap}\n"
            "source->guarded.enabled = true\n"
            f"topics = {topic}\n"
            "replication.policy.class = "
            "org.apache.kafka.connect.mirror.IdentityReplicationPolicy\n"
        )
        run = subprocess.run([*CLI, "run", str(config), "--state-dir", str(tmp_path / "s")],
                             capture_output=True, text=True, timeout=120)
    assert run.returncode == 1, run.stderr[-2000:]
    assert (f"target topic '{topic}' on cluster 'guarded' has 1 partitions, source topic "
            f"'{topic}' has 3, and it cannot be grown") in run.stderr


def test_legacy_mm1_flags_mirror_with_partitions_and_names_kept(
    source_cluster: LocalKafkaCluster, destination_cluster: LocalKafkaCluster,
    unique_topic: str, tmp_path: Path,
) -> None:
    topic = f"mm1-{unique_topic}"
    source_cluster.create_topic(topic, 3)
    produce(source_cluster, topic, _records(3, 300, "mm1"), **LARGE)
    consumer = tmp_path / "consumer.properties"
    consumer.write_text(f"bootstrap.servers={source_cluster.bootstrap}\n"
                        f"group.id=mm1-{unique_topic}\nauto.offset.reset=earliest\n")
    producer = tmp_path / "producer.properties"
    producer.write_text(f"bootstrap.servers={destination_cluster.bootstrap}\nacks=all\n")
    port = free_port()
    mirror = MirrorProcess(
        ["legacy", "--consumer.config", str(consumer), "--producer.config", str(producer),
         "--whitelist", f"{topic},nothing-else", "--num.streams", "2",
         "--offset.commit.interval.ms", "1000", "--state-dir", str(tmp_path / "state"),
         "--spark-conf", "spark.driver.memory=768m",
         "--metrics.port", str(port), "--metrics.bind.address", LOOPBACK],
        tmp_path / "legacy.log",
    ).start()
    try:
        wait_for(lambda: _mirror_has(destination_cluster, topic, {0: 100, 1: 100, 2: 100}),
                 180, "MM1-style mirror", mirror)
        _same(source_cluster, destination_cluster, topic, topic)
        # --metrics.port serves the metrics endpoint as mirror.metrics.port does
        counted = 'kafka_mirror_records_total{flow="source->target",source="source",' \
            'target="target"} 300.0'

        def metrics_served() -> bool:
            try:
                with urllib.request.urlopen(f"http://{LOOPBACK}:{port}/metrics",
                                            timeout=5) as page:
                    return counted in page.read().decode()
            except OSError:
                return False

        wait_for(metrics_served, 60, "the legacy mirror's /metrics to count 300 records",
                 mirror)
        # the consumer config's group shows the mirror's position to standard lag tools
        def committed() -> bool:
            positions = committed_offsets(source_cluster, f"mm1-{unique_topic}",
                                          [(topic, p) for p in range(3)])
            return all(offset == 100 for offset in positions.values())

        wait_for(committed, 60, "positions committed to the MM1 group", mirror)
        code, _ = mirror.terminate()
        assert code == 0
    finally:
        mirror.cleanup()
