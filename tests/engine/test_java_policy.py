"""A ``replication.policy.class`` of the user's own, loaded from a jar on ``CLASSPATH``.

The classes in ``data/policy/`` are compiled here against the connect-mirror-client and
kafka-clients jars the project ships. ``UnderscorePolicy`` names ``<prefix><alias>__<topic>``, the
prefix coming from ``replication.policy.topic.prefix`` in ``configure``; its heartbeats topic is
``<prefix>heartbeats``. ``KeepNamePolicy`` is Kafka's IdentityReplicationPolicy under another name.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from mirror_process import CLI, MirrorProcess, end_offsets, first_occurrences, read_partitions

from kafka_mirror import jvm_artifacts
from kafka_mirror.config.connector import connector_config
from kafka_mirror.config.mm2 import mm2_from_text
from kafka_mirror.errors import ConfigError
from kafka_mirror_testing.localcluster import LocalKafkaCluster
from kafka_mirror_testing.records import Message, produce
from kafka_mirror_testing.waiting import wait_for

POLICY_SOURCES = Path(__file__).parent / "data" / "policy"
POLICY = "kmtest.UnderscorePolicy"
KEEP_NAME = "kmtest.KeepNamePolicy"

PAIR = """
clusters = A, B
A.bootstrap.servers = 127.0.0.1:1
B.bootstrap.servers = 127.0.0.1:2
A->B.enabled = true
B->A.enabled = true
"""


def _jdk_tool(name: str) -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / name).is_file():
        return str(Path(java_home) / "bin" / name)
    found = shutil.which(name)
    assert found, f"{name} (JDK) not found"
    return found


@pytest.fixture(scope="module")
def policy_jar(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("policy")
    classes = out / "classes"
    jars = os.pathsep.join(str(j) for j in jvm_artifacts.mirror_client_jars())
    sources = [str(p) for p in sorted(POLICY_SOURCES.glob("*.java"))]
    subprocess.run([_jdk_tool("javac"), "--release", "17", "-d", str(classes), "-cp", jars,
                    *sources], check=True, capture_output=True, timeout=120)
    jar = out / "underscore-policy.jar"
    subprocess.run([_jdk_tool("jar"), "cf", str(jar), "-C", str(classes), "."], check=True,
                   timeout=60)
    return jar


@pytest.fixture
def on_classpath(policy_jar: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """CLASSPATH holds the policy's jar (as MirrorMaker 2's users set it)."""
    monkeypatch.setenv("CLASSPATH", str(policy_jar))
    yield policy_jar


def test_custom_policy_answers_as_the_java_class(on_classpath: Path) -> None:
    config = mm2_from_text(
        PAIR + f"replication.policy.class = {POLICY}\n"
        "replication.policy.topic.prefix = p-\n", "mm2.properties")
    a_to_b, b_to_a = config.flows
    policy = a_to_b.policy
    assert policy.display_name == POLICY
    assert a_to_b.target_topic("orders") == "p-A__orders"
    assert b_to_a.target_topic("orders") == "p-B__orders"
    assert policy.topic_source("p-A__orders") == "A"
    assert policy.upstream_topic("p-B__p-A__orders") == "p-A__orders"
    assert policy.original_topic("p-B__p-A__orders") == "orders"
    assert policy.topic_source("orders") is None and policy.upstream_topic("orders") is None
    assert policy.topic_source("q-A__orders") is None  # another prefix: not this policy's name
    # ReplicationPolicy's defaults, and the policy's own heartbeats topic (used by the emitter)
    assert policy.offset_syncs_topic("B") == "mm2-offset-syncs.B.internal"
    assert policy.checkpoints_topic("A") == "A.checkpoints.internal"
    assert policy.heartbeats_topic() == "p-heartbeats"
    assert {h.topic for h in config.heartbeats} == {"p-heartbeats"}
    assert policy.is_heartbeats_topic("p-A__p-heartbeats")
    assert not policy.is_heartbeats_topic("heartbeats")
    assert policy.is_internal_topic("__consumer_offsets") and policy.is_internal_topic(".x")
    assert policy.is_mm2_internal_topic("mm2-offset-syncs.B.internal")
    # cycle detection through the Java names: A's topic comes back to A never, B's goes on
    assert b_to_a.should_mirror("orders")
    assert not b_to_a.should_mirror("p-A__orders")
    assert not b_to_a.should_mirror("p-B__p-A__orders")
    assert a_to_b.should_mirror("p-C__orders")
    # the data path's target-topic names, computed from the known topics
    assert policy.target_topic_names("A", {"b": 1, "a'x": 2}).names == {
        "a'x": "p-A__a'x", "b": "p-A__b"}
    # the policy's own keys are its, not unknown keys
    assert not [n for n in config.notices if "replication.policy.topic.prefix" in n]


def test_configure_gets_the_flow_config_over_the_top_level(on_classpath: Path) -> None:
    # (disjoint topics: with two prefixes neither direction would recognise the other's names)
    a_to_b, b_to_a = mm2_from_text(
        PAIR + f"replication.policy.class = {POLICY}\n"
        "replication.policy.topic.prefix = p-\n"
        "A->B.replication.policy.topic.prefix = q-\n"
        "A->B.topics = a.*\nB->A.topics = b.*\n").flows
    assert a_to_b.target_topic("t") == "q-A__t"
    assert b_to_a.target_topic("t") == "p-B__t"
    # only one flow names the class: the other keeps MM2's default policy
    default, custom = mm2_from_text(
        PAIR + f"B->A.replication.policy.class = {POLICY}\n"
        "A->B.topics = a.*\nB->A.topics = b.*\n").flows
    assert default.target_topic("t") == "A.t"
    assert custom.target_topic("t") == "B__t"


@pytest.mark.parametrize(
    ("extra", "key", "value", "reason"),
    [
        ("replication.policy.class = com.example.Missing\n", "replication.policy.class",
         "com.example.Missing", "java.lang.ClassNotFoundException: com.example.Missing"),
        ("A->B.replication.policy.class = java.util.ArrayList\n",
         "A->B.replication.policy.class", "java.util.ArrayList",
         "java.util.ArrayList does not implement org.apache.kafka.connect.mirror."
         "ReplicationPolicy"),
        (f"replication.policy.class = {POLICY}\nreplication.policy.topic.prefix = x__\n",
         "replication.policy.class", POLICY,
         "configure() failed: java.lang.IllegalArgumentException: "
         "replication.policy.topic.prefix must not contain __"),
    ],
    ids=["missing class", "not a ReplicationPolicy", "configure throws"],
)
def test_unusable_policy_class_is_a_config_error(
    on_classpath: Path, extra: str, key: str, value: str, reason: str
) -> None:
    with pytest.raises(ConfigError) as info:
        mm2_from_text(PAIR + extra, "mm2.properties")
    message = str(info.value)
    assert message.startswith(
        f"mm2.properties, key '{key}', value '{value}': cannot load the replication policy: "
    ), message
    assert reason in message


def test_custom_policy_names_without_source_are_refused_both_ways(on_classpath: Path) -> None:
    """A policy class whose names do not tell cycle detection the source counts as identity for
    the loop refusal (its Kafka superclass logs through slf4j: it is on the class path)."""
    config = PAIR + f"replication.policy.class = {KEEP_NAME}\n"
    with pytest.raises(ConfigError) as info:
        mm2_from_text(config + "topics = orders.*\n", "mm2.properties")
    message = str(info.value)
    assert "key 'A->B.topics'" in message
    assert f"A->B and B->A both use {KEEP_NAME} and both mirror topic 'orders" in message
    assert "back and forth forever" in message
    flows = mm2_from_text(config + "A->B.topics = a\\..*\nB->A.topics = b\\..*\n").flows
    assert [f.target_topic("a.x") for f in flows] == ["a.x", "a.x"]
    assert flows[0].target_topic("heartbeats") == "A.heartbeats"
    # names that carry the source (UnderscorePolicy): the same filters both ways are fine
    shared = PAIR + f"replication.policy.class = {POLICY}\ntopics = orders.*\n"
    assert [f.target_topic("orders") for f in mm2_from_text(shared).flows] == [
        "A__orders", "B__orders"]
    # ... unless each direction has its own prefix: neither recognises the other's names
    with pytest.raises(ConfigError, match=r"both use kmtest\.UnderscorePolicy and both mirror"):
        mm2_from_text(shared + "A->B.replication.policy.topic.prefix = q-\n")
    # ... or when the other direction keeps MM2's default policy ('A.orders' is no name of ours)
    with pytest.raises(ConfigError, match=r"use DefaultReplicationPolicy and kmtest\.Under"):
        mm2_from_text(PAIR + f"B->A.replication.policy.class = {POLICY}\ntopics = orders.*\n")


def test_cli_exit_codes_and_check_config(on_classpath: Path, tmp_path: Path) -> None:
    good = tmp_path / "good.properties"
    good.write_text(PAIR + f"replication.policy.class = {POLICY}\n")
    run = subprocess.run([*CLI, "check-config", str(good)], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    assert "flow A->B: topics .* excluding" in run.stdout
    assert f"policy {POLICY} (e.g. t -> A__t)" in run.stdout, run.stdout
    # without the jar on CLASSPATH the class is not found: exit 2, for check-config and run
    env = {k: v for k, v in os.environ.items() if k != "CLASSPATH"}
    for args in (["check-config", str(good)],
                 ["run", str(good), "--state-dir", str(tmp_path / "state")]):
        run = subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120,
                             env=env)
        assert run.returncode == 2, (args, run.stdout, run.stderr)
        assert (f"configuration error: {good}, key 'replication.policy.class', value '{POLICY}': "
                "cannot load the replication policy: class not found") in run.stderr, run.stderr
        assert f"ClassNotFoundException: {POLICY}" in run.stderr
    assert not (tmp_path / "state").exists()


def test_connector_config_is_mirror_makers(tmp_path: Path) -> None:
    """What the policy's configure() gets equals what Kafka 4.3.1's own MirrorMakerConfig
    builds for the flow's connector (run here from the Kafka distribution jars)."""
    props = {
        "clusters": "A, B",
        "A.bootstrap.servers": "a:9092",
        "B.bootstrap.servers": "b:9092",
        "A.security.protocol": "SSL",
        "A.ssl.truststore.location": "/a.jks",
        "A.consumer.max.poll.records": "7",
        "B.producer.acks": "all",
        "B.admin.retries": "3",
        "sasl.mechanism": "PLAIN",
        "security.protocol": "SASL_PLAINTEXT",
        "A->B.enabled": "true",
        "A->B.topics": "orders.*",
        "A->B.replication.policy.topic.prefix": "q-",
        "topics": "x.*",
        "replication.factor": "2",
        "sync.topic.acls.enabled": "false",
        "replication.policy.class": POLICY,
        "replication.policy.topic.prefix": "p-",
        "emit.heartbeats.interval.seconds": "5",
        "mirror.max.records.per.batch": "10",  # kafka-mirror's own: not a connector key
        "some.unknown.key": "1",
        # a worker key (not the connector's): MM2 finds its plugins without scanning every jar
        "plugin.discovery": "service_load",
    }
    ours = connector_config(props, "A", "B")
    assert ours["replication.policy.topic.prefix"] == "q-" and ours["topics"] == "orders.*"
    assert "mirror.max.records.per.batch" not in ours and "some.unknown.key" not in ours
    assert _mirror_maker_connector_config(props, "A", "B") == ours


def _mirror_maker_connector_config(props: dict[str, str], source: str,
                                   target: str) -> dict[str, str]:
    from py4j.java_gateway import GatewayParameters, JavaGateway, launch_gateway

    port, proc = launch_gateway(classpath=jvm_artifacts.kafka_classpath(),
                                java_path=jvm_artifacts.java_executable(),
                                javaopts=["-Xmx128m"], die_on_exit=True, return_proc=True)
    gateway = JavaGateway(gateway_parameters=GatewayParameters(port=port))
    try:
        jvm = gateway.jvm
        settings = jvm.java.util.HashMap()
        for key, value in props.items():
            settings.put(key, value)
        mirror = jvm.org.apache.kafka.connect.mirror
        connector = jvm.java.lang.Class.forName("org.apache.kafka.connect.mirror."
                                                "MirrorSourceConnector")
        config = mirror.MirrorMakerConfig(settings).connectorBaseConfig(
            mirror.SourceAndTarget(source, target), connector)
        return {str(k): str(config.get(k)) for k in config.keySet()}
    finally:
        gateway.close()
        proc.stdin.close()
        proc.wait(30)


# ---- end to end: an active/active pair named by the Java policy --------------------------

RECORDS = 300


def _numbered(topic: str, partitions: int) -> Iterator[Message]:
    for i in range(RECORDS):
        yield Message(key=f"k{i}".encode(), value=f"{topic}-{i}".encode(),
                      partition=i % partitions)


def _topics(cluster: LocalKafkaCluster) -> set[str]:
    return set(cluster.admin().list_topics(timeout=30).topics)


def _complete(cluster: LocalKafkaCluster, topic: str, partitions: int) -> bool:
    ends = end_offsets(cluster, topic)
    return len(ends) == partitions and sum(ends.values()) >= RECORDS


def _same(source: LocalKafkaCluster, topic: str, target: LocalKafkaCluster, copy: str) -> None:
    src, dst = read_partitions(source, topic), read_partitions(target, copy)
    assert set(dst) == set(src)
    for partition, records in src.items():
        assert first_occurrences(dst[partition]) == records, f"{copy}[{partition}]"


@pytest.mark.kafka
@pytest.mark.spark
def test_active_active_with_custom_policy(
    source_cluster: LocalKafkaCluster, destination_cluster: LocalKafkaCluster,
    unique_topic: str, policy_jar: Path, tmp_path: Path,
) -> None:
    """A<->B with the Java policy: A's topic becomes ``a__t`` on B (the data path's names), B's
    ``b__u`` on A, and nothing named after A on B comes back to A (cycle detection through the
    Java ``topicSource``): neither the copy the mirror makes nor one that was there before."""
    tag = uuid.uuid4().hex[:6]
    a, b = f"a{tag}", f"b{tag}"
    t, u, old = f"{unique_topic}-t", f"{unique_topic}-u", f"{a}__{unique_topic}-old"
    source_cluster.create_topic(t, 2)
    destination_cluster.create_topic(u, 1)
    destination_cluster.create_topic(old, 1)  # as if mirrored from A before
    produce(source_cluster, t, _numbered(t, 2))
    produce(destination_cluster, u, _numbered(u, 1))
    produce(destination_cluster, old, _numbered(old, 1))
    config = tmp_path / "mm2.properties"
    config.write_text(
        f"clusters = {a}, {b}\n"
        f"{a}.bootstrap.servers = {source_cluster.bootstrap}\n"
        f"{b}.bootstrap.servers = {destination_cluster.bootstrap}\n"
        f"{a}->{b}.enabled = true\n"
        f"{b}->{a}.enabled = true\n"
        f"replication.policy.class = {POLICY}\n"
        # every name of ours passes the filters: only cycle detection keeps them home
        f"topics = .*{unique_topic}-.*\n"
        "emit.heartbeats.enabled = false\n"
        "heartbeats.replication.enabled = false\n"
        "refresh.topics.interval.seconds = 1\n"
        "replication.factor = 1\n"
        "checkpoints.topic.replication.factor = 1\n"
        "offset-syncs.topic.replication.factor = 1\n"
        "spark.driver.memory = 768m\n"
        "spark.master = local[2]\n"
    )
    began = time.monotonic()
    # DEBUG: each topic refresh is logged
    mirror = MirrorProcess(["--log-level", "DEBUG", "run", str(config), "--state-dir",
                            str(tmp_path / "state")], tmp_path / "mirror.log",
                           env={"CLASSPATH": str(policy_jar)}).start()
    refreshed = f"flow {b}->{a}: topics refreshed: "
    try:
        wait_for(lambda: _complete(destination_cluster, f"{a}__{t}", 2), 120,
                   f"{a}__{t} on {b}", mirror)
        wait_for(lambda: _complete(source_cluster, f"{b}__{u}", 1), 60,
                   f"{b}__{u} on {a}", mirror)
        mirrored = time.monotonic()
        # two more refreshes of B->A, which now list a__t too
        refreshes = mirror.output().count(refreshed)
        wait_for(lambda: mirror.output().count(refreshed) >= refreshes + 2, 60,
                 f"two more topic refreshes of {b}->{a}", mirror)
        code, _ = mirror.terminate(timeout=60)
        assert code == 0, mirror.output()[-4000:]
    finally:
        mirror.cleanup()
    _same(source_cluster, t, destination_cluster, f"{a}__{t}")
    _same(destination_cluster, u, source_cluster, f"{b}__{u}")
    on_a, on_b = _topics(source_cluster), _topics(destination_cluster)
    assert {x for x in on_a if x.startswith(f"{b}__")} == {f"{b}__{u}"}, sorted(on_a)
    assert {x for x in on_b if x.startswith(f"{a}__")} == {f"{a}__{t}", old}, sorted(on_b)
    # no default names (internal topics aside: ReplicationPolicy's defaults, a.checkpoints.internal)
    assert not {x for x in on_a | on_b
                if x.startswith((f"{a}.", f"{b}.")) and not x.endswith(".internal")}
    print(f"mirrored after {mirrored - began:.0f}s")


@pytest.mark.spark
def test_a_spark_session_in_the_process_hides_no_policy_error(on_classpath: Path) -> None:
    """A Spark session hooks PySpark's exception conversion into py4j for every gateway of the
    process, the policy JVM's too: a policy's Java exception still reads as one, while the
    session runs (the mirror's case: a policy asked about a new topic) and after it stopped."""
    import py4j.java_gateway

    from kafka_mirror.engine.session import build_session, connector_jars, spark_conf
    from kafka_mirror.mm2.java_policy import PolicyCallError

    policy = mm2_from_text(PAIR + f"replication.policy.class = {POLICY}\n").flows[0].policy
    unhooked = py4j.java_gateway.get_return_value
    spark = build_session(spark_conf({"spark.master": "local[1]"}, {}, connector_jars(None)))
    try:
        for stopped in (False, True):
            if stopped:
                spark.stop()
            with pytest.raises(ConfigError) as info:
                mm2_from_text(PAIR + "replication.policy.class = kmtest.Missing\n",
                              "mm2.properties")
            assert "class not found or not loadable: java.lang.ClassNotFoundException: " \
                "kmtest.Missing" in str(info.value)
            with pytest.raises(PolicyCallError) as called:
                policy.upstream_topic(None)  # type: ignore[arg-type]
            assert f"replication policy {POLICY}: upstreamTopic(None) threw " \
                "java.lang.NullPointerException" in str(called.value)
    finally:
        spark.stop()
        py4j.java_gateway.get_return_value = unhooked
