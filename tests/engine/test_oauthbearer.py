"""SASL OAUTHBEARER with OIDC client credentials against a real OIDC provider (Keycloak, started
here) and a broker that validates its JWTs (signature from the realm's JWKS, issuer, audience).

Both sides of the mirror log in with clients of their own (per-cluster settings, as MM2 takes
them): Spark's Java consumer and producer through Kafka's ``OAuthBearerLoginCallbackHandler``,
the control plane (librdkafka) through its translation (``sasl.oauthbearer.method=oidc``). Tokens
live 60 s and the broker makes every connection re-authenticate every 20 s, so a mirror that
runs past the first token's expiry proves that both client stacks fetch new tokens. (The
translation without a provider: tests/unit/kafka_mirror/kafka/test_oauthbearer_cases.py.)
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from mirror_process import MirrorProcess, alarms, mm2_properties, read_partitions

from kafka_mirror.config.mm2 import mm2_from_text
from kafka_mirror.errors import ClusterUnreachable
from kafka_mirror.kafka.admin import ClusterAdmin
from kafka_mirror_testing.localcluster import LocalKafkaCluster
from kafka_mirror_testing.oidc import (
    LOGIN_HANDLER,
    LOGIN_MODULE,
    OAUTH_LISTENER,
    LocalOidcProvider,
    oauth_cluster,
)
from kafka_mirror_testing.waiting import wait_for

CLIENTS = {"mirror-source": "source-secret", "mirror-target": "target-secret"}
TOKEN_SECONDS = 60

# one worker runs the module: the provider and both clusters start once (Keycloak alone took 74 s
# to start on the busy CI machine, once on each worker that ran one of these tests)
pytestmark = [pytest.mark.kafka, pytest.mark.xdist_group("oauthbearer")]


@pytest.fixture(scope="module")
def idp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalOidcProvider]:
    with LocalOidcProvider(tmp_path_factory.mktemp("oidc"), CLIENTS,
                           token_seconds=TOKEN_SECONDS) as provider:
        yield provider


def _cluster(name: str, idp: LocalOidcProvider, tmp_path_factory: pytest.TempPathFactory
             ) -> LocalKafkaCluster:
    return oauth_cluster(name, tmp_path_factory.mktemp(name), idp,
                         server_overrides={"connections.max.reauth.ms": "20000"})


@pytest.fixture(scope="module")
def oauth(idp: LocalOidcProvider, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[LocalKafkaCluster]:
    """The source cluster."""
    with _cluster("oauth-source", idp, tmp_path_factory).start(timeout=90) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def oauth_target(idp: LocalOidcProvider, tmp_path_factory: pytest.TempPathFactory
                 ) -> Iterator[LocalKafkaCluster]:
    with _cluster("oauth-target", idp, tmp_path_factory).start(timeout=90) as cluster:
        yield cluster


def _side(alias: str, cluster: LocalKafkaCluster, idp: LocalOidcProvider, client: str,
          secret: str) -> str:
    return (
        f"{alias}.bootstrap.servers = {cluster.bootstrap_for(OAUTH_LISTENER)}\n"
        f"{alias}.security.protocol = SASL_PLAINTEXT\n"
        f"{alias}.sasl.mechanism = OAUTHBEARER\n"
        f"{alias}.sasl.login.callback.handler.class = {LOGIN_HANDLER}\n"
        f"{alias}.sasl.oauthbearer.token.endpoint.url = {idp.token_endpoint}\n"
        f'{alias}.sasl.jaas.config = {LOGIN_MODULE} required clientId="{client}" '
        f'clientSecret="{secret}" scope="profile";\n'
    )


def _subject(token: str) -> str:
    payload = token.split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    return str(claims["azp"])


def test_provider_issues_tokens_the_broker_audience_needs(idp: LocalOidcProvider) -> None:
    answer = idp.token("mirror-source", CLIENTS["mirror-source"])
    assert TOKEN_SECONDS - 5 <= answer["expires_in"] <= TOKEN_SECONDS  # whole seconds left
    assert _subject(answer["access_token"]) == "mirror-source"


@pytest.mark.parametrize(("case", "answer"), [
    ("wrong secret", '"error":"unauthorized_client"'),
    # libcurl's wording: "Couldn't connect" (Debian's, the GSSAPI build's) or "Could not
    # connect" (newer, PyPI's wheel)
    ("unreachable token endpoint", "connect to server"),
])
def test_bad_oauth_login_fails_fast_naming_the_cluster(
    case: str, answer: str, idp: LocalOidcProvider, oauth: LocalKafkaCluster
) -> None:
    side = _side("idp", oauth, idp, "mirror-source", "not-the-secret")
    if case == "unreachable token endpoint":
        side = _side("idp", oauth, idp, "mirror-source", CLIENTS["mirror-source"]).replace(
            idp.token_endpoint, "http://127.0.0.1:9/realms/kafka/protocol/openid-connect/token")
    text = "clusters = idp, dr\ndr.bootstrap.servers = 127.0.0.1:9\nidp->dr.enabled = true\n"
    spec = mm2_from_text(text + side).clusters["idp"]
    began = time.monotonic()
    with pytest.raises(ClusterUnreachable) as err:
        ClusterAdmin(spec).wait_ready(60)
    message = str(err.value)
    assert "cluster 'idp'" in message and "secret" not in message, message
    assert "Failed to acquire SASL OAUTHBEARER token" in message and answer in message, message
    assert time.monotonic() - began < 30, f"took {time.monotonic() - began:.0f} s: {message}"


@pytest.mark.spark
def test_mirror_between_oauthbearer_clusters_past_token_expiry(
    idp: LocalOidcProvider, oauth: LocalKafkaCluster, oauth_target: LocalKafkaCluster,
    tmp_path: Path,
) -> None:
    topic = "oauth-orders"
    oauth.create_topic(topic, 2)
    producer = Producer(oauth.client_config())

    def produce(first: int, count: int) -> None:
        for i in range(first, first + count):
            producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(),
                             partition=i % 2, headers=[("h", str(i).encode())],
                             timestamp=1_700_000_000_000 + i)
        assert producer.flush(60) == 0

    produce(0, 300)
    sides = (_side("src", oauth, idp, "mirror-source", CLIENTS["mirror-source"])
             + _side("dst", oauth_target, idp, "mirror-target", CLIENTS["mirror-target"]))
    config = tmp_path / "mm2.properties"
    config.write_text(mm2_properties(
        oauth, oauth_target, sides + f"topics = {topic}\nemit.heartbeats.interval.seconds = 2\n",
        aliases=("src", "dst")))
    mirror = MirrorProcess(["run", str(config), "--state-dir", str(tmp_path / "state")],
                           tmp_path / "mirror.log").start()
    target = f"src.{topic}"
    try:
        def mirrored(count: int) -> bool:
            return sum(len(r) for r in read_partitions(oauth_target, target).values()) >= count

        wait_for(lambda: mirrored(300), 180, f"300 records in {target}", mirror)
        # every client of the mirror (Java and librdkafka, on both sides) logs in anew before
        # its token expires: a login after the first tokens' lifetime, by both client ids
        first = {client: idp.logins(client)[0] for client in CLIENTS}

        def renewed() -> bool:
            return all(logins[-1] > first[client] + TOKEN_SECONDS * 1000
                       for client in CLIENTS for logins in [idp.logins(client)])

        wait_for(renewed, TOKEN_SECONDS * 3, "logins after the first tokens expired", mirror)
        # every connection re-authenticates every 20 s: new records still arrive, heartbeats
        # (the control plane) still come
        beats = sum(len(r) for r in read_partitions(oauth_target, "heartbeats").values())
        produce(300, 200)
        wait_for(lambda: mirrored(500), 120, f"500 records in {target}", mirror)
        wait_for(lambda: sum(len(r) for r in read_partitions(oauth_target, "heartbeats").values())
                 > beats, 60, "heartbeats after the first tokens expired", mirror)
        code, _ = mirror.terminate()
        assert code == 0, mirror.output()[-3000:]
    finally:
        mirror.cleanup()
    assert read_partitions(oauth_target, target) == read_partitions(oauth, topic)
    output = mirror.output()
    assert not alarms(output), "\n".join(alarms(output)[:20])
    # every login and re-authentication (each connection's, every 20 s) was accepted
    for cluster in (oauth, oauth_target):
        log = (cluster.workdir / f"{cluster.name}.log").read_text(errors="replace")
        assert "Failed authentication" not in log, cluster.name
        assert "Could not validate the access token" not in log, cluster.name
