"""Java key and trust stores (JKS, PKCS12: what MirrorMaker 2 users have) work for every client of
the mirror, the control plane (librdkafka) included, against a broker that requires TLS client
certificates. Certificates are made by the test (a CA, the broker's, the client's)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from mirror_process import MirrorProcess, end_offsets

from kafka_mirror.config.model import ClusterSpec
from kafka_mirror.errors import ConfigError
from kafka_mirror.kafka.admin import ClusterAdmin
from kafka_mirror_testing.certs import certificate, java_key_stores, keytool, new_key, pem
from kafka_mirror_testing.localcluster import LocalKafkaCluster
from kafka_mirror_testing.records import Message, produce
from kafka_mirror_testing.waiting import wait_for

PASSWORD = "st0re-pass"
# one worker runs the module: its TLS cluster starts once
pytestmark = [pytest.mark.xdist_group("tls-stores")]


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalKafkaCluster, Path]]:
    """A broker whose SSL listener requires client certificates, and the client's stores."""
    home = tmp_path_factory.mktemp("tls")
    ca_key = new_key()
    ca = certificate("kafka-mirror test CA", ca_key, None, ca_key)
    broker_key, client_key = new_key(), new_key()
    broker = certificate("localhost", broker_key, ca, ca_key)
    client = certificate("mirror-client", client_key, ca, ca_key)
    (home / "ca.pem").write_bytes(pem(ca))
    (home / "broker.pem").write_bytes(pem(broker_key, broker, ca))
    # the client's stores as Java users have them
    java_key_stores(home, "client", client_key, client, [ca], PASSWORD)
    for kind, name in (("JKS", "truststore.jks"), ("PKCS12", "truststore.p12")):
        keytool("-importcert", "-noprompt", "-alias", "ca", "-file", str(home / "ca.pem"),
                "-keystore", str(home / name), "-storetype", kind, "-storepass", PASSWORD)
    cluster = LocalKafkaCluster(
        "tls", home, heap="384m", extra_listeners={"SSL": "SSL"},
        server_overrides={
            "listener.name.ssl.ssl.keystore.type": "PEM",
            "listener.name.ssl.ssl.keystore.location": str(home / "broker.pem"),
            "listener.name.ssl.ssl.truststore.type": "PEM",
            "listener.name.ssl.ssl.truststore.location": str(home / "ca.pem"),
            "listener.name.ssl.ssl.client.auth": "required",
        },
    )
    with cluster.start(90.0):
        yield cluster, home


def _client(cluster: LocalKafkaCluster, home: Path, trust: str, key: str) -> dict[str, str]:
    return {
        "bootstrap.servers": cluster.bootstrap_for("SSL"),
        "security.protocol": "SSL",
        "ssl.truststore.location": str(home / trust),
        "ssl.truststore.password": PASSWORD,
        "ssl.keystore.location": str(home / key),
        "ssl.keystore.password": PASSWORD,
        "ssl.key.password": PASSWORD,
    }


@pytest.mark.kafka
@pytest.mark.parametrize(
    ("trust", "key", "types"),
    [
        ("truststore.jks", "client.jks", {}),  # Java's default type: JKS
        ("truststore.p12", "client.p12",
         {"ssl.truststore.type": "PKCS12", "ssl.keystore.type": "PKCS12"}),
        ("truststore.jks", "client.p12", {"ssl.keystore.type": "PKCS12"}),
    ],
)
def test_control_plane_reads_java_stores(
    tls: tuple[LocalKafkaCluster, Path], trust: str, key: str, types: dict[str, str]
) -> None:
    cluster, home = tls
    admin = ClusterAdmin(ClusterSpec("tls", _client(cluster, home, trust, key) | types))
    admin.wait_ready(30)
    assert isinstance(admin.topic_partitions(), dict)


@pytest.mark.kafka
def test_wrong_store_password_names_the_key_not_the_password(
    tls: tuple[LocalKafkaCluster, Path]
) -> None:
    cluster, home = tls
    client = _client(cluster, home, "truststore.jks", "client.jks")
    client["ssl.truststore.password"] = "wrong-SECRET"
    with pytest.raises(ConfigError) as err:
        ClusterAdmin(ClusterSpec("tls", client))
    message = str(err.value)
    assert "ssl.truststore.location" in message and "cluster 'tls'" in message
    assert "wrong-SECRET" not in message and PASSWORD not in message


@pytest.mark.kafka
@pytest.mark.spark
def test_mirror_from_a_tls_cluster_with_jks_stores(
    tls: tuple[LocalKafkaCluster, Path], destination_cluster: LocalKafkaCluster,
    unique_topic: str, tmp_path: Path,
) -> None:
    """Spark's Java clients, the control plane and the offset syncs on the source all use the
    same JKS settings."""
    cluster, home = tls
    cluster.create_topic(unique_topic, 2)
    produce(cluster, unique_topic,
            (Message(key=b"k%d" % i, value=b"v", partition=i % 2) for i in range(40)), timeout=30)
    client = _client(cluster, home, "truststore.jks", "client.jks")
    config = tmp_path / "mm2.properties"
    config.write_text(
        "clusters = tls, dst\n"
        + "".join(f"tls.{k} = {v}\n" for k, v in client.items())
        + f"dst.bootstrap.servers = {destination_cluster.bootstrap}\n"
        "tls->dst.enabled = true\n"
        f"topics = {unique_topic}\n"
        "replication.factor = 1\n"
        "sync.topic.acls.enabled = false\n"
        "emit.heartbeats.enabled = false\n"
        "spark.driver.memory = 768m\nspark.master = local[2]\n",
        encoding="utf-8",
    )
    mirror = MirrorProcess(["run", str(config), "--state-dir", str(tmp_path / "state")],
                           tmp_path / "mirror.log").start()
    try:
        wait_for(lambda: sum(end_offsets(destination_cluster, f"tls.{unique_topic}").values())
                 >= 40, 180, "records mirrored over TLS", mirror)
        code, _ = mirror.terminate()
        assert code == 0, mirror.output()[-3000:]
    finally:
        mirror.cleanup()
    assert PASSWORD not in mirror.output()
