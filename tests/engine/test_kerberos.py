"""Kerberos (SASL GSSAPI) against a real MIT KDC and a real Kerberized broker.

The KDC (``krb5kdc``, a throw-away realm on 127.0.0.1) and the broker are started here, once per
module. The control plane needs a confluent-kafka whose librdkafka has Cyrus SASL (PyPI's wheels
do not: ``scripts/build-gssapi-client.sh --install .venv``); with PyPI's wheel those tests skip,
saying so (``KAFKA_MIRROR_REQUIRE_GSSAPI=1`` makes that a failure). The JAAS translation tests,
which need neither, are in tests/unit/kafka_mirror/kafka/test_kerberos_cases.py.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from mirror_process import MirrorProcess, read_partitions

from kafka_mirror.config.mm2 import mm2_from_text
from kafka_mirror.errors import ClusterUnreachable
from kafka_mirror.kafka import kerberos
from kafka_mirror.kafka.admin import ClusterAdmin
from kafka_mirror.kafka.kerberos import keytab_login
from kafka_mirror_testing.localcluster import LocalKafkaCluster
from kafka_mirror_testing.localkdc import (
    GSSAPI_LISTENER,
    LocalKdc,
    combined_krb5_conf,
    kerberized_cluster,
)
from kafka_mirror_testing.records import Message, produce
from kafka_mirror_testing.waiting import wait_for

KRB5 = "com.sun.security.auth.module.Krb5LoginModule"
# one worker runs the module: its KDC and Kerberized cluster start once
pytestmark = [pytest.mark.xdist_group("kerberos")]


def _jaas(keytab: Path | str, principal: str) -> str:
    return (f'{KRB5} required useKeyTab=true storeKey=true keyTab="{keytab}" '
            f'principal="{principal}";')


# ------------------------------------------------------------------ a real KDC and broker
def _gssapi_missing() -> str | None:
    """librdkafka's own words when this confluent-kafka cannot do GSSAPI, else None."""
    try:
        AdminClient({"bootstrap.servers": "127.0.0.1:9", "security.protocol": "SASL_PLAINTEXT",
                     "sasl.mechanisms": "GSSAPI",
                     "sasl.kerberos.min.time.before.relogin": 0})  # no kinit
    except KafkaException as exc:
        if "No provider for SASL mechanism GSSAPI" in str(exc):
            return str(exc)
        raise
    return None


@pytest.fixture(scope="module")
def gssapi_client() -> None:
    missing = _gssapi_missing()
    if missing and os.environ.get("KAFKA_MIRROR_REQUIRE_GSSAPI") == "1":
        pytest.fail(f"KAFKA_MIRROR_REQUIRE_GSSAPI=1 but confluent-kafka has no GSSAPI: {missing}")
    if missing:
        pytest.skip("the installed confluent-kafka has no GSSAPI (PyPI's wheel; run "
                    f"scripts/build-gssapi-client.sh --install .venv): {missing}")


@pytest.fixture(scope="module")
def kdc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKdc]:
    began = time.monotonic()
    with LocalKdc(tmp_path_factory.mktemp("kerberos")) as kdc:
        assert time.monotonic() - began < 5, "the KDC should start in about a second"
        # This process (librdkafka, kinit) uses the test realm and a cache of its own.
        saved = {k: os.environ.get(k) for k in (*kdc.env(), "KRB5CCNAME")}
        os.environ.update(kdc.env())
        os.environ["KRB5CCNAME"] = f"FILE:{kdc.dir}/ccache-tests"
        try:
            yield kdc
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


@pytest.fixture(scope="module")
def mirror_keytab(kdc: LocalKdc) -> tuple[str, Path]:
    return kdc.principal("mirror"), kdc.add_principal("mirror")


@pytest.fixture(scope="module")
def kerberized(kdc: LocalKdc, tmp_path_factory: pytest.TempPathFactory
               ) -> Iterator[LocalKafkaCluster]:
    cluster = kerberized_cluster("kerberized", tmp_path_factory.mktemp("krb-kafka"), kdc)
    with cluster.start(timeout=90):
        yield cluster


def _cluster_spec(cluster: LocalKafkaCluster, jaas: str, extra: str = "") -> str:
    return (
        "clusters = krb, dr\n"
        f"krb.bootstrap.servers = {cluster.bootstrap_for(GSSAPI_LISTENER)}\n"
        f"dr.bootstrap.servers = {cluster.bootstrap_for(GSSAPI_LISTENER)}\n"
        "security.protocol = SASL_PLAINTEXT\n"
        "sasl.mechanism = GSSAPI\n"
        "sasl.kerberos.service.name = kafka\n"
        f"sasl.jaas.config = {jaas}\n"
        "krb->dr.enabled = true\n" + extra
    )


@pytest.mark.kafka
@pytest.mark.usefixtures("gssapi_client")
def test_control_plane_lists_topics_with_a_keytab(
    kerberized: LocalKafkaCluster, mirror_keytab: tuple[str, Path]
) -> None:
    principal, keytab = mirror_keytab
    kerberized.create_topic("kerberos-visible", 3)
    spec = mm2_from_text(_cluster_spec(kerberized, _jaas(keytab, principal))).clusters["krb"]
    admin = ClusterAdmin(spec)
    admin.wait_ready(30)
    assert admin.topic_partitions()["kerberos-visible"] == 3
    assert admin.conf["sasl.kerberos.principal"] == principal


@pytest.mark.kafka
@pytest.mark.usefixtures("gssapi_client")
@pytest.mark.parametrize("case", ["unknown principal", "keytab of another principal",
                                  "missing keytab", "stale keytab"])
def test_bad_kerberos_login_fails_fast_naming_the_cluster(
    case: str, kdc: LocalKdc, kerberized: LocalKafkaCluster, mirror_keytab: tuple[str, Path],
    tmp_path: Path,
) -> None:
    # A valid ticket of 'mirror' stays in the process's cache: it must not hide the bad login.
    principal, keytab = mirror_keytab
    keytab_login({"sasl.kerberos.keytab": str(keytab), "sasl.kerberos.principal": principal},
                 "setup")
    if case == "unknown principal":
        principal = kdc.principal("gone")
        keytab = kdc.add_principal(principal)
        kdc.kadmin(f"delprinc -force {principal}")  # the KDC no longer knows it
        expected = "not found in Kerberos database"
    elif case == "keytab of another principal":
        keytab = kdc.add_principal("other")
        expected = "no suitable keys"
    elif case == "missing keytab":
        keytab = tmp_path / "missing.keytab"
        expected = "not found"
    else:
        principal = kdc.principal("rotated")
        keytab = kdc.add_principal("rotated")
        kdc.kadmin(f"cpw -randkey {principal}")  # the keytab's key is now outdated
        expected = "ncorrect"
    spec = mm2_from_text(_cluster_spec(kerberized, _jaas(keytab, principal))).clusters["krb"]
    began = time.monotonic()
    with pytest.raises(ClusterUnreachable) as info:
        ClusterAdmin(spec).wait_ready(30)
    message = str(info.value)
    assert time.monotonic() - began < 10
    assert "cluster 'krb'" in message and kerberized.bootstrap_for(GSSAPI_LISTENER) in message
    assert principal in message and expected in message, message


def test_a_second_principal_in_one_process_is_warned_about(kdc: LocalKdc) -> None:
    """The fixture's KRB5CCNAME is a single FILE cache: any second principal shares it."""
    first = kdc.principal("first")
    second = kdc.principal("second")
    keytab_login({"sasl.kerberos.keytab": str(kdc.add_principal(first)),
                  "sasl.kerberos.principal": first}, "cluster 'a'")
    warning = keytab_login({"sasl.kerberos.keytab": str(kdc.add_principal(second)),
                            "sasl.kerberos.principal": second}, "cluster 'b'")
    assert warning is not None
    assert "cluster 'b'" in warning and second in warning and first in warning
    assert "single credential cache" in warning


def test_in_a_cache_collection_only_a_second_principal_of_one_realm_is_warned_about(
    kdc: LocalKdc, realm_b: LocalKdc, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    collection = tmp_path / "collection"
    collection.mkdir(mode=0o700)
    monkeypatch.setenv("KRB5CCNAME", f"DIR:{collection}")
    monkeypatch.setenv("KRB5_CONFIG", str(realm_b.dir.parent / "both.conf"))
    monkeypatch.setattr(kerberos, "_principals", {})  # logins of earlier tests left out
    one = kdc.principal("coll-one")
    other_realm = realm_b.principal("coll-two")
    same_realm = kdc.principal("coll-three")
    assert keytab_login({"sasl.kerberos.keytab": str(kdc.add_principal(one)),
                         "sasl.kerberos.principal": one}, "cluster 'a'") is None
    assert keytab_login({"sasl.kerberos.keytab": str(realm_b.add_principal(other_realm)),
                         "sasl.kerberos.principal": other_realm}, "cluster 'b'") is None
    warning = keytab_login({"sasl.kerberos.keytab": str(kdc.add_principal(same_realm)),
                            "sasl.kerberos.principal": same_realm}, "cluster 'c'")
    assert warning is not None and "of the same realm" in warning
    assert same_realm in warning and one in warning and other_realm not in warning


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.usefixtures("gssapi_client")
def test_mirror_between_kerberized_clusters(
    kdc: LocalKdc, kerberized: LocalKafkaCluster, mirror_keytab: tuple[str, Path],
    tmp_path: Path,
) -> None:
    """Both sides over GSSAPI (one broker, two aliases): Spark's Java consumer and producer log
    in from the JAAS line, the control plane (librdkafka) from its translation."""
    principal, keytab = mirror_keytab
    topic = "kerberos-orders"
    kerberized.create_topic(topic, 2)
    producer = Producer({
        "bootstrap.servers": kerberized.bootstrap_for(GSSAPI_LISTENER),
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "GSSAPI",
        "sasl.kerberos.keytab": str(keytab), "sasl.kerberos.principal": principal,
    })
    for i in range(300):
        producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % 2,
                         headers=[("h", str(i).encode())], timestamp=1_700_000_000_000 + i)
    assert producer.flush(60) == 0
    config = tmp_path / "mm2.properties"
    config.write_text(_cluster_spec(kerberized, _jaas(keytab, principal), (
        f"topics = {topic}\n"
        "replication.factor = 1\n"
        "refresh.topics.interval.seconds = 3\n"
        "spark.master = local[2]\n"
        "spark.driver.memory = 768m\n"
        f"spark.driver.extraJavaOptions = -Djava.security.krb5.conf={kdc.krb5_conf}\n"
    )))
    mirror = MirrorProcess(["run", str(config), "--state-dir", str(tmp_path / "state")],
                           tmp_path / "mirror.log").start()
    target = f"krb.{topic}"
    try:
        def mirrored() -> bool:
            parts = read_partitions(kerberized, target)
            return sum(len(r) for r in parts.values()) >= 300

        wait_for(mirrored, 180, f"300 records in {target}", mirror)
        code, _ = mirror.terminate()
        assert code == 0, mirror.output()[-3000:]
    finally:
        mirror.cleanup()
    assert read_partitions(kerberized, target) == read_partitions(kerberized, topic)
    output = mirror.output()
    assert "not usable" not in output and "uthentication failed" not in output


# ------------------------------------------------------------------ two realms, one process
REALM_B = "REALM-B.TEST"
REALM_B_HOST = "127.0.0.2"  # a numeric host: MIT Kerberos gives it the default realm


@pytest.fixture(scope="module")
def realm_b(kdc: LocalKdc, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKdc]:
    """A second realm, with no trust to the first, and a krb5.conf (``both.conf``) naming both:
    ``localhost`` (the first cluster's host) is the first realm's, anything else the second's."""
    base = tmp_path_factory.mktemp("realm-b")
    with LocalKdc(base, realm=REALM_B) as other:
        combined_krb5_conf(base / "both.conf", [kdc, other], REALM_B, {"localhost": kdc.realm})
        yield other


@pytest.fixture(scope="module")
def kerberized_b(realm_b: LocalKdc, tmp_path_factory: pytest.TempPathFactory
                 ) -> Iterator[LocalKafkaCluster]:
    cluster = kerberized_cluster("kerberized-b", tmp_path_factory.mktemp("krb-kafka-b"), realm_b,
                                 host=REALM_B_HOST, bind=REALM_B_HOST)
    with cluster.start(timeout=90):
        yield cluster


def _committed(cluster: LocalKafkaCluster, group: str, topic: str, partitions: int) -> int:
    consumer = Consumer(cluster.client_config(**{"group.id": group}))
    try:
        offsets = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], 30)
        return sum(max(tp.offset, 0) for tp in offsets)
    finally:
        consumer.close()


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.usefixtures("gssapi_client")
def test_one_principal_per_realm_in_one_process(
    kdc: LocalKdc, realm_b: LocalKdc, kerberized: LocalKafkaCluster,
    kerberized_b: LocalKafkaCluster, mirror_keytab: tuple[str, Path], tmp_path: Path,
) -> None:
    """Source in one realm, target in another, a principal of each realm (no trust between the
    realms, so each cluster accepts only its own): the Spark side logs in per JAAS line, the
    control plane (librdkafka: topics, heartbeats and checkpoints on the target, the lag group
    on the source) takes the principal of the broker's realm from the process's cache
    collection."""
    principal_a, keytab_a = mirror_keytab
    principal_b = realm_b.principal("mirror-b")
    keytab_b = realm_b.add_principal(principal_b)
    topic = "two-realms"
    kerberized.create_topic(topic, 2)
    produce(kerberized, topic, (
        Message(key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % 2,
                headers=[("h", str(i).encode())], timestamp=1_700_000_000_000 + i)
        for i in range(300)))
    both = realm_b.dir.parent / "both.conf"
    config = tmp_path / "mm2.properties"
    config.write_text(
        "clusters = a, b\n"
        f"a.bootstrap.servers = {kerberized.bootstrap_for(GSSAPI_LISTENER)}\n"
        f"b.bootstrap.servers = {kerberized_b.bootstrap_for(GSSAPI_LISTENER)}\n"
        "security.protocol = SASL_PLAINTEXT\n"
        "sasl.mechanism = GSSAPI\n"
        "sasl.kerberos.service.name = kafka\n"
        f"a.sasl.jaas.config = {_jaas(keytab_a, principal_a)}\n"
        f"b.sasl.jaas.config = {_jaas(keytab_b, principal_b)}\n"
        "a->b.enabled = true\n"
        f"topics = {topic}\n"
        "replication.factor = 1\n"
        "emit.checkpoints.interval.seconds = 2\n"
        "spark.master = local[2]\n"
        "spark.driver.memory = 768m\n"
        f"spark.driver.extraJavaOptions = -Djava.security.krb5.conf={both}\n"
    )
    # the process's own cache (a private collection), not the test's FILE cache
    mirror = MirrorProcess(["run", str(config), "--state-dir", str(tmp_path / "state")],
                           tmp_path / "mirror.log",
                           env={"KRB5_CONFIG": str(both), "KRB5CCNAME": ""}).start()
    target = f"a.{topic}"
    try:
        def mirrored() -> bool:
            parts = read_partitions(kerberized_b, target)
            return sum(len(r) for r in parts.values()) >= 300

        wait_for(mirrored, 180, f"300 records in {target} on the other realm's cluster", mirror)
        wait_for(lambda: _committed(kerberized, "kafka-mirror.a_to_b", topic, 2) == 300, 60,
                 "the lag group's positions on the source", mirror)
        code, _ = mirror.terminate()
        assert code == 0, mirror.output()[-3000:]
    finally:
        mirror.cleanup()
    assert read_partitions(kerberized_b, target) == read_partitions(kerberized, topic)
    names = set(AdminClient(kerberized_b.client_config()).list_topics(timeout=30).topics)
    assert {"heartbeats", "a.checkpoints.internal"} <= names, names
    output = mirror.output()
    assert "not usable" not in output and "uthentication failed" not in output
    assert "another principal" not in output, output[-3000:]
    # each KDC issued tickets only for its own brokers, to its own principal
    log_a = (kdc.dir / "krb5kdc.log").read_text()
    log_b = (realm_b.dir / "krb5kdc.log").read_text()
    assert f"{principal_b} for kafka/{REALM_B_HOST}@{REALM_B}" in log_b
    assert f"kafka/{REALM_B_HOST}" not in log_a and "mirror-b" not in log_a
