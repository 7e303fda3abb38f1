"""Kerberos (SASL GSSAPI) against a real MIT KDC and a real Kerberized broker.

The KDC (``krb5kdc``, a throw-away realm on 127.0.0.1) and the broker are started here, once per
module. The control plane needs a confluent-kafka whose librdkafka has Cyrus SASL (PyPI's wheels
do not: ``scripts/build-gssapi-client.sh --install .venv``); with PyPI's wheel those tests skip,
saying so (``KAFKA_MIRROR_REQUIRE_GSSAPI=1`` makes that a failure). The JAAS translation tests
need neither.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from mirror_process import MirrorProcess, read_partitions, wait_for

from kafka_mirror.cli import main as cli
from kafka_mirror.config.mm2 import mm2_from_text
from kafka_mirror.errors import ClusterUnreachable, ConfigError
from kafka_mirror.kafka import kerberos
from kafka_mirror.kafka.admin import ClusterAdmin
from kafka_mirror.kafka.clients import librdkafka_config, parse_jaas
from kafka_mirror.kafka.kerberos import keytab_login
from kafka_mirror_testing.localcluster import LocalKafkaCluster
from kafka_mirror_testing.localkdc import (
    GSSAPI_LISTENER,
    LocalKdc,
    combined_krb5_conf,
    kerberized_cluster,
)

KRB5 = "com.sun.security.auth.module.Krb5LoginModule"


def _jaas(keytab: Path | str, principal: str) -> str:
    return (f'{KRB5} required useKeyTab=true storeKey=true keyTab="{keytab}" '
            f'principal="{principal}";')


def _gssapi_props(jaas: str, **extra: str) -> dict[str, str]:
    return {"bootstrap.servers": "localhost:1", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "GSSAPI", "sasl.kerberos.service.name": "kafka",
            "sasl.jaas.config": jaas, **extra}


# ------------------------------------------------------------------ JAAS -> librdkafka (no KDC)
def test_keytab_jaas_becomes_librdkafka_keytab_login() -> None:
    conf = librdkafka_config(
        _gssapi_props(_jaas("/etc/security/keytabs/mirror.keytab", "mirror@EXAMPLE.COM")),
        "cluster 'A'",
    )
    assert conf["sasl.mechanisms"] == "GSSAPI"
    assert conf["sasl.kerberos.keytab"] == "/etc/security/keytabs/mirror.keytab"
    assert conf["sasl.kerberos.principal"] == "mirror@EXAMPLE.COM"
    assert conf["sasl.kerberos.service.name"] == "kafka"
    assert "sasl.username" not in conf and "sasl.password" not in conf


def test_jaas_service_name_ticket_cache_and_default_mechanism() -> None:
    props = _gssapi_props(f'{KRB5} required useTicketCache=true serviceName="kafka-dr";')
    del props["sasl.kerberos.service.name"], props["sasl.mechanism"]  # GSSAPI is the default
    conf = librdkafka_config(props, "cluster 'A'")
    assert conf["sasl.kerberos.service.name"] == "kafka-dr"
    # tickets from the existing cache: librdkafka must not run kinit itself
    assert conf["sasl.kerberos.min.time.before.relogin"] == "0"
    assert "sasl.kerberos.keytab" not in conf


def test_jaas_parser_reads_java_syntax() -> None:
    module, options = parse_jaas(
        f'  {KRB5}  required\n useKeyTab=true keyTab="/k t/x.keytab" '
        'principal="a\\"b@R" debug=false ; '
    )
    assert module == KRB5
    assert options == {"useKeyTab": "true", "keyTab": "/k t/x.keytab", "principal": 'a"b@R',
                       "debug": "false"}


@pytest.mark.parametrize(
    ("jaas", "reason"),
    [
        (f'{KRB5} required useKeyTab=true principal="m@R";', "needs keyTab="),
        (f'{KRB5} required useKeyTab=true keyTab="/k";', "needs principal="),
        (f"{KRB5} required storeKey=true;", "useKeyTab=true"),
        (f'{KRB5} required useTicketCache=true ticketCache="/tmp/cc";', "KRB5CCNAME"),
        ('org.apache.kafka.common.security.plain.PlainLoginModule required username="u" '
         'password="SECRET-pw";', "needs com.sun.security.auth.module.Krb5LoginModule"),
        (f'{KRB5} useKeyTab=true keyTab="/k" principal="m@R";', "control flag"),
        (f'{KRB5} required useKeyTab=true keyTab="/k" principal="m@R"', "expected ';'"),
        (f'{KRB5} required useKeyTab=true keyTab="/k SECRET-pw principal=m;', "unexpected"),
        (f'{KRB5} required useKeyTab=true; {KRB5} required password=SECRET-pw;',
         "one login module"),
    ],
)
def test_unusable_jaas_is_an_error_naming_cluster_and_key(jaas: str, reason: str) -> None:
    with pytest.raises(ConfigError) as info:
        librdkafka_config(_gssapi_props(jaas), "cluster 'dr'")
    message = str(info.value)
    assert "cluster 'dr'" in message and "key 'sasl.jaas.config'" in message
    assert reason in message
    assert "SECRET" not in message


def test_jaas_of_a_non_sasl_cluster_is_ignored_like_java_does() -> None:
    props = _gssapi_props("not a JAAS line", **{"security.protocol": "SSL"})
    assert "sasl.kerberos.keytab" not in librdkafka_config(props, "cluster 'A'")


def test_check_config_reports_an_unusable_kerberos_jaas(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "mm2.properties"
    config.write_text(
        "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\n"
        "A->B.enabled = true\nA.security.protocol = SASL_PLAINTEXT\n"
        f'A.sasl.jaas.config = {KRB5} required useKeyTab=true principal="m@R";\n'
    )
    assert cli.main(["check-config", str(config)]) == 2
    err = capsys.readouterr().err
    assert str(config) in err and "cluster 'A'" in err and "'sasl.jaas.config'" in err


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
    producer = Producer(kerberized.client_config())
    for i in range(300):
        producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % 2,
                         headers=[("h", str(i).encode())], timestamp=1_700_000_000_000 + i)
    assert producer.flush(60) == 0
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
