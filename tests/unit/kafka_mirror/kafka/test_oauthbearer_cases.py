"""OAUTHBEARER settings without an OIDC provider (``librdkafka_config``,
``check_data_path_keys``): the Java clients' OIDC client credentials and unsecured-JWT settings
become librdkafka's, unusable ones are errors naming cluster and key. (Against a real OIDC
provider and JWT-validating broker: tests/engine/test_oauthbearer.py.)"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from kafka_mirror.config.mm2 import mm2_from_text
from kafka_mirror.errors import ConfigError
from kafka_mirror.kafka.clients import check_data_path_keys, spark_source_options
from kafka_mirror.kafka.librdkafka import librdkafka_config

MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
TOKEN_URL = "https://idp.example.com/realms/kafka/protocol/openid-connect/token"


def _props(jaas: str, **extra: str) -> dict[str, str]:
    return {"bootstrap.servers": "localhost:1", "security.protocol": "SASL_SSL",
            "sasl.mechanism": "OAUTHBEARER", "sasl.jaas.config": jaas, **extra}


def _oidc(jaas_options: str = 'clientId="mirror" clientSecret="s3cret"', **extra: str
          ) -> dict[str, str]:
    return _props(f"{MODULE} required {jaas_options};",
                  **{"sasl.login.callback.handler.class": HANDLER,
                     "sasl.oauthbearer.token.endpoint.url": TOKEN_URL, **extra})


def test_client_credentials_become_librdkafka_oidc() -> None:
    conf = librdkafka_config(
        _oidc('clientId="mirror" clientSecret="s3cret" scope="kafka profile" '
              'extension_logicalCluster="lkc-1" extension_identityPoolId="pool-2"'),
        "cluster 'A'")
    assert {k: v for k, v in conf.items() if k.startswith("sasl.")} == {
        "sasl.mechanisms": "OAUTHBEARER",
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.token.endpoint.url": TOKEN_URL,
        "sasl.oauthbearer.client.id": "mirror",
        "sasl.oauthbearer.client.secret": "s3cret",
        "sasl.oauthbearer.scope": "kafka profile",
        "sasl.oauthbearer.extensions": "logicalCluster=lkc-1,identityPoolId=pool-2",
    }
    # and librdkafka (the installed confluent-kafka) takes them
    AdminClient(_quiet(conf))


def test_handler_of_the_older_package_is_kafkas_too() -> None:
    older = "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler"
    conf = librdkafka_config(_oidc(**{"sasl.login.callback.handler.class": older}), "cluster 'A'")
    assert conf["sasl.oauthbearer.method"] == "oidc"


def test_unsecured_jwt_for_development() -> None:
    conf = librdkafka_config(
        _props(f'{MODULE} required unsecuredLoginStringClaim_sub="mirror" '
               'unsecuredLoginLifetimeSeconds="600" extension_traceId="abc";'),
        "cluster 'A'")
    assert conf["enable.sasl.oauthbearer.unsecure.jwt"] == "true"
    assert conf["sasl.oauthbearer.config"] == (
        "principal=mirror lifeSeconds=600 extension_traceId=abc")
    assert "sasl.oauthbearer.method" not in conf
    AdminClient(_quiet(conf))


@pytest.mark.parametrize(("props", "key", "words"), [
    (_oidc(**{"sasl.oauthbearer.token.endpoint.url": ""}),
     "sasl.oauthbearer.token.endpoint.url", "token endpoint"),
    (_oidc(**{"sasl.oauthbearer.token.endpoint.url": "file:/var/tokens/jwt"}),
     "sasl.oauthbearer.token.endpoint.url", "'file:/var/tokens/jwt'"),
    (_oidc('clientId="mirror"'), "sasl.jaas.config", 'clientSecret="..."'),
    (_oidc(**{"sasl.login.callback.handler.class": "com.example.AwsMskIamHandler"}),
     "sasl.login.callback.handler.class", "com.example.AwsMskIamHandler"),
    (_props("org.apache.kafka.common.security.plain.PlainLoginModule required username=u "
            "password=p;"), "sasl.jaas.config", "PlainLoginModule"),
    (_props(f"{MODULE} required;"), "sasl.jaas.config", "unsecuredLoginStringClaim_sub"),
])
def test_unusable_settings_name_the_cluster_and_key(
    props: dict[str, str], key: str, words: str
) -> None:
    with pytest.raises(ConfigError) as err:
        librdkafka_config(props, "cluster 'A'")
    text = str(err.value)
    assert "cluster 'A'" in text and key in text and words in text
    assert "s3cret" not in text


def _config(cluster_keys: str) -> str:
    return ("clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\n"
            "A->B.enabled = true\n" + cluster_keys)


def test_per_cluster_oauth_reaches_the_data_path_as_java_takes_it() -> None:
    text = _config(
        "A.security.protocol = SASL_SSL\nA.sasl.mechanism = OAUTHBEARER\n"
        f"A.sasl.login.callback.handler.class = {HANDLER}\n"
        f"A.sasl.oauthbearer.token.endpoint.url = {TOKEN_URL}\n"
        f'A.sasl.jaas.config = {MODULE} required clientId="src" clientSecret="x";\n')
    (flow,) = mm2_from_text(text).flows
    check_data_path_keys(flow)
    options = spark_source_options(flow)
    assert options["kafka.sasl.login.callback.handler.class"] == HANDLER
    assert options["kafka.sasl.oauthbearer.token.endpoint.url"] == TOKEN_URL
    assert options["kafka.sasl.mechanism"] == "OAUTHBEARER"


@pytest.mark.parametrize("key", ["sasl.oauthbearer.client.credentials.client.id",
                                 "sasl.oauthbearer.scope",
                                 "sasl.oauthbearer.assertion.file"])
def test_keys_newer_than_the_data_paths_clients_are_refused(key: str) -> None:
    (flow,) = mm2_from_text(_config(f"B.{key} = value\n")).flows
    with pytest.raises(ConfigError) as err:
        check_data_path_keys(flow)
    assert "cluster 'B'" in str(err.value) and key in str(err.value)
    assert "Kafka clients 3.9" in str(err.value)


def _quiet(conf: dict[str, str]) -> dict[str, Any]:
    log = logging.getLogger("test.oauth.librdkafka")
    log.addHandler(logging.NullHandler())
    log.propagate = False
    return dict(conf) | {"logger": log}
