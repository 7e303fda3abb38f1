"""Kerberos settings without a KDC (:mod:`kafka_mirror.kafka.clients`, ``parse_jaas`` and
``librdkafka_config``): Java's JAAS line becomes librdkafka's keytab login, unusable ones are
errors naming cluster and key. (Against a real KDC and broker: tests/engine/test_kerberos.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from kafka_mirror.cli import main as cli
from kafka_mirror.errors import ConfigError
from kafka_mirror.kafka.librdkafka import librdkafka_config, parse_jaas

KRB5 = "com.sun.security.auth.module.Krb5LoginModule"


def _jaas(keytab: Path | str, principal: str) -> str:
    return (f'{KRB5} required useKeyTab=true storeKey=true keyTab="{keytab}" '
            f'principal="{principal}";')


def _gssapi_props(jaas: str, **extra: str) -> dict[str, str]:
    return {"bootstrap.servers": "localhost:1", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "GSSAPI", "sasl.kerberos.service.name": "kafka",
            "sasl.jaas.config": jaas, **extra}


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
