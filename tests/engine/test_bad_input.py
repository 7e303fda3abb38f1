"""Bad input, as users meet it: the real ``kafka-mirror`` process against real clusters (or none,
where the error comes first). Each case exits non-zero where the mirror cannot run, names the
file, key, value, cluster or directory at fault, and loses nothing. The README's "Bad input"
table lists these with the other cases (tested in test_mirror_e2e, test_properties_java,
test_tls_stores, test_kerberos, test_destination_checks, and without clusters in
tests/unit/kafka_mirror/config/test_mm2_properties).
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)
from mirror_process import CLI, MirrorProcess, end_offsets, mm2_properties

from kafka_mirror_testing.certs import certificate, new_key, pem
from kafka_mirror_testing.localcluster import LocalKafkaCluster, free_port
from kafka_mirror_testing.records import Message, produce
from kafka_mirror_testing.waiting import wait_for

NOWHERE = "127.0.0.1:1"  # nothing listens: cases that fail before any cluster is asked
BASE = (
    "clusters = A, B\n"
    f"A.bootstrap.servers = {NOWHERE}\n"
    f"B.bootstrap.servers = {NOWHERE}\n"
)


def _run(config: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, "run", str(config), *args], capture_output=True, text=True,
                          timeout=timeout)


# ----------------------------------------------------------------- errors before any cluster
@pytest.mark.parametrize(
    ("case", "text", "expected"),
    [
        ("unknown alias", "A->C.enabled = true\n",
         ["no replication flow is enabled", "'A->C.enabled' names cluster 'C'",
          "not in clusters=A,B"]),
        ("invalid regex", "A->B.enabled = true\ntopics = orders, ([a\n",
         ["key 'topics'", "invalid regular expression '([a'"]),
        ("no enabled flow", "A->B.enabled = false\n",
         ["no replication flow is enabled; add e.g. A->B.enabled=true"]),
        ("config provider file missing",
         "A->B.enabled = true\nconfig.providers = file\n"
         "config.providers.file.class = "
         "org.apache.kafka.common.config.provider.FileConfigProvider\n"
         "A.sasl.jaas.config = ${file:/nonexistent/secrets.properties:jaas}\n",
         ["key 'A.sasl.jaas.config'", "config provider 'file'",
          "cannot read /nonexistent/secrets.properties"]),
        ("missing truststore file",
         "A->B.enabled = true\nA.security.protocol = SSL\n"
         "A.ssl.truststore.location = /nonexistent/truststore.jks\n"
         "A.ssl.truststore.password = changeit\n",
         ["cluster 'A'", "key 'ssl.truststore.location'",
          "no such file: /nonexistent/truststore.jks"]),
        ("exactly-once switch not a boolean",
         "A->B.enabled = true\nA->B.mirror.exactly.once.target = yes\n",
         ["key 'A->B.mirror.exactly.once.target', value 'yes'", "expected true or false"]),
        ("malformed Spark master", "A->B.enabled = true\nspark.master = spark://nowhere\n",
         ["key 'spark.master', value 'spark://nowhere'",
          "expected spark://HOST:PORT[,HOST:PORT...]"]),
    ],
)
def test_config_errors_exit_2_naming_file_and_key(
    case: str, text: str, expected: list[str], tmp_path: Path
) -> None:
    config = tmp_path / "mm2.properties"
    config.write_text(BASE + text, encoding="utf-8")
    state = tmp_path / "state"
    run = _run(config, "--state-dir", str(state), "--connect-timeout", "5")
    assert run.returncode == 2, run.stderr[-3000:]
    assert run.stderr.startswith("kafka-mirror: configuration error: "), run.stderr[-3000:]
    # the cluster, or the key, names the culprit there
    if case not in ("missing truststore file", "malformed Spark master"):
        assert str(config) in run.stderr
    for part in expected:
        assert part in run.stderr, run.stderr[-3000:]
    assert "Traceback" not in run.stderr
    assert not any(state.glob("*/gen-*"))  # no flow state written


def test_state_dir_that_cannot_be_created_names_it(tmp_path: Path) -> None:
    """A state directory under a regular file: fails even for root (unlike a chmod)."""
    config = tmp_path / "mm2.properties"
    config.write_text(BASE + "A->B.enabled = true\n", encoding="utf-8")
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("", encoding="utf-8")
    began = time.monotonic()
    run = _run(config, "--state-dir", str(blocker / "state"))
    assert run.returncode == 1, run.stderr[-3000:]
    assert (f"kafka-mirror: state directory {blocker / 'state'} cannot be used: "
            "Not a directory") in run.stderr
    assert "Traceback" not in run.stderr
    assert time.monotonic() - began < 30  # before any cluster is asked


def test_spark_master_unreachable_names_the_url(tmp_path: Path) -> None:
    master = f"spark://127.0.0.1:{free_port()}"
    config = tmp_path / "mm2.properties"
    config.write_text(BASE + f"A->B.enabled = true\nspark.master = {master}\n",
                      encoding="utf-8")
    state = tmp_path / "state"
    began = time.monotonic()
    run = _run(config, "--state-dir", str(state), "--connect-timeout", "5")
    assert run.returncode == 1, run.stderr[-3000:]
    assert (f"kafka-mirror: Spark master {master} (spark.master) not reachable after 5s: "
            f"{master.removeprefix('spark://')}: Connection refused") in run.stderr
    assert "Traceback" not in run.stderr
    # before any cluster is asked (both are unreachable here) and without Spark's minute of
    # registration retries
    assert time.monotonic() - began < 30
    assert not any(state.glob("*/gen-*"))


# ------------------------------------------------------------------ with running clusters


def _numbered(first: int, count: int) -> Iterator[Message]:
    return (Message(key=b"k%d" % i, value=b"v%d" % i, partition=i % 2)
            for i in range(first, first + count))


@pytest.mark.kafka
@pytest.mark.spark
def test_two_instances_on_one_state_dir(
    source_cluster: LocalKafkaCluster, destination_cluster: LocalKafkaCluster,
    unique_topic: str, tmp_path: Path,
) -> None:
    topic = unique_topic
    source_cluster.create_topic(topic, 2)

    def write(first: int, count: int) -> None:
        produce(source_cluster, topic, _numbered(first, count), timeout=30)

    write(0, 100)
    config = tmp_path / "mm2.properties"
    config.write_text(mm2_properties(source_cluster, destination_cluster, f"topics = {topic}\n"))
    state = tmp_path / "state"
    args = ["run", str(config), "--state-dir", str(state)]
    first = MirrorProcess(args, tmp_path / "first.log").start()
    try:
        def mirrored(count: int) -> bool:
            return sum(end_offsets(destination_cluster, f"source.{topic}").values()) >= count

        wait_for(lambda: mirrored(100), 180, "first instance mirroring", first)
        assert first.proc is not None
        began = time.monotonic()
        second = subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120)
        assert second.returncode == 1, second.stderr[-3000:]
        assert (f"kafka-mirror: state directory {state} is in use by process {first.proc.pid} "
                f"(lock {state / '.lock'})") in second.stderr
        assert time.monotonic() - began < 30  # at once: no cluster asked, no Spark started
        assert "created topic" not in second.stderr and "mirroring" not in second.stderr
        # the first one goes on as if nothing happened
        write(100, 100)
        wait_for(lambda: mirrored(200), 120, "first instance still mirroring", first)
        code, _ = first.terminate()
        assert code == 0, first.output()[-3000:]
    finally:
        first.cleanup()
    # the lock goes with its holder: the next start on that state directory is fine
    assert (state / ".lock").read_text() == ""


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.parametrize("mode", ["realtime", "micro-batch"])
def test_record_too_large_for_the_destination_stops_the_flow_naming_it(
    source_cluster: LocalKafkaCluster, destination_cluster: LocalKafkaCluster,
    unique_topic: str, tmp_path: Path, mode: str,
) -> None:
    """In real-time mode, as soon as the producer reports the refusal: Spark's sink would only
    with the task's next record, or at the batch's end (5 minutes)."""
    topic = unique_topic
    source_cluster.create_topic(topic, 2)
    # configs not synced: the destination topic keeps its small limit
    destination_cluster.create_topic(f"source.{topic}", 2, config={"max.message.bytes": "1024"})
    # random bytes: compression (lz4 by default) must not shrink it under the limit
    produce(source_cluster, topic, [Message(key=b"big", value=os.urandom(5000), partition=1)],
            timeout=30)
    config = tmp_path / "mm2.properties"
    config.write_text(mm2_properties(
        source_cluster, destination_cluster,
        f"topics = {topic}\nsync.topic.configs.enabled = false\nemit.heartbeats.enabled = false\n"
        f"heartbeats.replication.enabled = false\nmirror.mode = {mode}\n"))
    mirror = MirrorProcess(["run", str(config), "--state-dir", str(tmp_path / "state")],
                           tmp_path / "mirror.log").start()
    try:
        code = mirror.wait_exit(120)  # on its own: every flow stopped
    finally:
        mirror.cleanup()
    output = mirror.output()
    assert code == 1, output[-4000:]
    final = [ln for ln in output.splitlines() if ln.startswith("kafka-mirror: ")]
    assert len(final) == 1, output[-4000:]
    refused = (f"{topic}[1] offset 0 -> source.{topic}[1]" if mode == "realtime"
               else f"batch 0 ({topic}[1] offsets 0..0 -> source.{topic}[1])")
    assert final[0].startswith(
        "kafka-mirror: every flow stopped for good: source->destination: cluster 'destination' "
        f"refused {refused}: RecordTooLargeException: "), final[0]
    assert output.count("stopped for good (RecordTooLargeException)") == 1  # no retry loop
    # nothing skipped: the refused record is still to be mirrored (the flow's positions did
    # not move past it), and none was written
    assert end_offsets(destination_cluster, f"source.{topic}").get(1) == 0


# ------------------------------------------- a destination with an authorizer and TLS listener
@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalKafkaCluster, Path]]:
    """A cluster with ACLs (everything allowed unless an ACL says otherwise) and a TLS listener
    whose certificate comes from the broker's CA; ``other-ca.pem`` is a CA the broker's
    certificate does not come from."""
    home = tmp_path_factory.mktemp("guarded")
    ca_key, other_key, broker_key = new_key(), new_key(), new_key()
    ca = certificate("kafka-mirror broker CA", ca_key, None, ca_key)
    broker = certificate("localhost", broker_key, ca, ca_key)
    (home / "broker.pem").write_bytes(pem(broker_key, broker, ca))
    other_ca = certificate("some other CA", other_key, None, other_key)
    (home / "other-ca.pem").write_bytes(pem(other_ca))
    cluster = LocalKafkaCluster(
        "guarded", home, heap="384m", extra_listeners={"SSL": "SSL"},
        server_overrides={
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "allow.everyone.if.no.acl.found": "true",
            "listener.name.ssl.ssl.keystore.type": "PEM",
            "listener.name.ssl.ssl.keystore.location": str(home / "broker.pem"),
        },
    )
    with cluster.start(120.0):
        yield cluster, home


@pytest.mark.kafka
def test_untrusted_certificate_fails_fast_naming_the_cluster(
    guarded: tuple[LocalKafkaCluster, Path], source_cluster: LocalKafkaCluster, tmp_path: Path,
) -> None:
    cluster, home = guarded
    config = tmp_path / "mm2.properties"
    config.write_text(
        "clusters = source, dr\n"
        f"source.bootstrap.servers = {source_cluster.bootstrap}\n"
        f"dr.bootstrap.servers = {cluster.bootstrap_for('SSL')}\n"
        "dr.security.protocol = SSL\n"
        "dr.ssl.truststore.type = PEM\n"
        f"dr.ssl.truststore.location = {home / 'other-ca.pem'}\n"
        "source->dr.enabled = true\n", encoding="utf-8")
    began = time.monotonic()
    run = _run(config, "--state-dir", str(tmp_path / "state"), "--connect-timeout", "10")
    assert run.returncode == 1, run.stderr[-3000:]
    (final,) = [ln for ln in run.stderr.splitlines() if ln.startswith("kafka-mirror: ")]
    assert final.startswith(
        f"kafka-mirror: cluster 'dr' ({cluster.bootstrap_for('SSL')}) not usable"), final
    assert "SSL handshake failed" in final and "certificate verify failed" in final, final
    assert time.monotonic() - began < 60


@pytest.mark.kafka
@pytest.mark.spark
def test_destination_topic_config_that_cannot_be_set_is_reported_and_mirroring_goes_on(
    guarded: tuple[LocalKafkaCluster, Path], source_cluster: LocalKafkaCluster,
    unique_topic: str, tmp_path: Path,
) -> None:
    cluster, _ = guarded
    topic = unique_topic
    target = f"source.{topic}"
    source_cluster.create_topic(topic, 2, config={"retention.ms": "86400000"})
    cluster.create_topic(target, 2)
    admin = cluster.admin()
    # everything allowed on the destination topic but ALTER_CONFIGS, which syncing configs needs
    acls = [
        AclBinding(ResourceType.TOPIC, target, ResourcePatternType.LITERAL, "User:ANONYMOUS",
                   "*", operation, permission)
        for operation, permission in ((AclOperation.ALL, AclPermissionType.ALLOW),
                                      (AclOperation.ALTER_CONFIGS, AclPermissionType.DENY))
    ]
    for future in admin.create_acls(acls).values():
        future.result()
    produce(source_cluster, topic, _numbered(0, 50), timeout=30)
    config = tmp_path / "mm2.properties"
    config.write_text(
        "clusters = source, guarded\n"
        f"source.bootstrap.servers = {source_cluster.bootstrap}\n"
        f"guarded.bootstrap.servers = {cluster.bootstrap}\n"
        "source->guarded.enabled = true\n"
        f"topics = {topic}\n"
        "replication.factor = 1\n"
        "sync.topic.acls.enabled = false\n"
        "emit.heartbeats.enabled = false\n"
        "refresh.topics.interval.seconds = 3\n"
        "spark.driver.memory = 768m\nspark.master = local[2]\n", encoding="utf-8")
    # DEBUG: the retries at each topic refresh are logged (at DEBUG, once warned about)
    mirror = MirrorProcess(["--log-level", "DEBUG", "run", str(config), "--state-dir",
                            str(tmp_path / "state")], tmp_path / "mirror.log").start()
    failed_sync = f"source->guarded: could not sync configs of {target}: "
    try:
        wait_for(lambda: sum(end_offsets(cluster, target).values()) >= 50, 180,
                 "records mirrored although the configs could not be synced", mirror)
        # a few more topic refreshes: each retries, none warns again
        wait_for(lambda: mirror.output().count(failed_sync) >= 3, 60,
                 "two more topic refreshes retrying the config sync", mirror)
        output = mirror.output()
        warned = [line for line in output.splitlines()
                  if failed_sync in line and " WARNING " in line]
        assert len(warned) == 1, output[-3000:]
        assert "TOPIC_AUTHORIZATION_FAILED" in output or "uthorization" in output
        code, _ = mirror.terminate()
        assert code == 0, mirror.output()[-3000:]
    finally:
        mirror.cleanup()
