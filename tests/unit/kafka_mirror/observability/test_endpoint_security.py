"""Who may read the metrics endpoint, and over what (``mirror.metrics.basic.auth.*``,
``mirror.metrics.ssl.*``): basic authentication against the JMX exporter's salted hashes, HTTPS
from JKS, PKCS12 and PEM key stores, and ``kafka-mirror status`` through both."""

from __future__ import annotations

import base64
import hashlib
import socket
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from kafka_mirror.cli.status import fetch_status
from kafka_mirror.config.mm2 import mm2_from_text
from kafka_mirror.config.model import MetricsBasicAuth, MetricsSettings, MetricsTls
from kafka_mirror.errors import ConfigError, MirrorError
from kafka_mirror.observability.endpoint_security import BasicAuthCheck, password_hash
from kafka_mirror.observability.metrics import MirrorMetrics
from kafka_mirror.observability.server import MetricsServer, MirrorStatus
from kafka_mirror_testing.certs import certificate, java_key_stores, new_key, pem

BASE = "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\n" \
       "A->B.enabled = true\nmirror.metrics.port = 9405\n"
PASSWORD = "sc:rape pässword"
STORE_PASSWORD = "st0re-pass"


def _settings(text: str) -> MetricsSettings:
    settings = mm2_from_text(BASE + text, "mm2.properties").metrics
    assert settings is not None
    return settings


def _header(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def test_keys_read_from_mm2_properties() -> None:
    settings = _settings(
        "mirror.metrics.basic.auth.username = prometheus\n"
        "mirror.metrics.basic.auth.password.hash = 0AB12\n"
        "mirror.metrics.basic.auth.salt = s\n"
        "mirror.metrics.ssl.keystore.location = /etc/kafka-mirror/metrics.p12\n"
        "mirror.metrics.ssl.keystore.type = pkcs12\n"
        "mirror.metrics.ssl.keystore.password = secret\n")
    assert settings.basic_auth == MetricsBasicAuth("prometheus", "0ab12", "s")
    assert settings.tls == MetricsTls("/etc/kafka-mirror/metrics.p12", "PKCS12", "secret")
    assert settings.scheme == "https" and _settings("").scheme == "http"
    assert "secret" not in repr(settings)


@pytest.mark.parametrize(("text", "message"), [
    ("mirror.metrics.basic.auth.password.hash = ab\n",
     r"key 'mirror\.metrics\.basic\.auth\.password\.hash'.*needs mirror\.metrics\.basic\.auth"
     r"\.username"),
    ("mirror.metrics.basic.auth.username = p\n", r"needs mirror\.metrics\.basic\.auth\.password"
                                                 r"\.hash \(the hex hash of the password"),
    ("mirror.metrics.basic.auth.username = p\nmirror.metrics.basic.auth.password.hash = xyz\n",
     r"value 'xyz': expected hexadecimal digits"),
    ("mirror.metrics.basic.auth.username = p\nmirror.metrics.basic.auth.password.hash = ab\n"
     "mirror.metrics.basic.auth.algorithm = MD5\n", r"value 'MD5': expected one of SHA-1"),
    ("mirror.metrics.basic.auth.username = p\nmirror.metrics.basic.auth.password.hash = ab\n"
     "mirror.metrics.basic.auth.algorithm = PBKDF2WithHmacSHA256\n",
     r"PBKDF2WithHmacSHA256 needs mirror\.metrics\.basic\.auth\.iterations"),
    ("mirror.metrics.basic.auth.username = p\nmirror.metrics.basic.auth.password.hash = ab\n"
     "mirror.metrics.basic.auth.key.length = 100\n",
     r"value '100': expected a number of bits divisible by 8"),
    ("mirror.metrics.ssl.keystore.password = hidden\n",
     r"key 'mirror\.metrics\.ssl\.keystore\.password'.*needs mirror\.metrics\.ssl\.keystore"
     r"\.location"),
    ("mirror.metrics.ssl.keystore.location = /x\nmirror.metrics.ssl.keystore.type = P7\n",
     r"value 'P7': expected JKS, PKCS12 or PEM"),
])
def test_incomplete_or_wrong_settings_name_the_key(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        _settings(text)
    assert "hidden" not in str(caught.value)


def test_hashes_are_the_jmx_exporters() -> None:
    """SHA-*: the hex digest of ``<salt>:<password>`` (a number in base 16: no leading zeros);
    PBKDF2: the hex of the derived key of key.length bits."""
    digest = MetricsBasicAuth("u", "", "salt", "SHA-256")
    assert password_hash(digest, "pw") == \
        hashlib.sha256(b"salt:pw").hexdigest().lstrip("0")
    derived = MetricsBasicAuth("u", "", "salt", "PBKDF2WithHmacSHA512", 1000, 256)
    assert password_hash(derived, "pw") == \
        hashlib.pbkdf2_hmac("sha512", b"pw", b"salt", 1000, 32).hex().lstrip("0")


@pytest.mark.parametrize("algorithm", ["SHA-1", "SHA-256", "SHA-512", "PBKDF2WithHmacSHA256"])
def test_basic_auth_accepts_only_the_user_and_password(algorithm: str) -> None:
    template = MetricsBasicAuth("prometheus", "", "a salt", algorithm, 2000, 128)
    # as a hash is written into mm2.properties: upper case and leading zeros are the same number
    stored = "000" + password_hash(template, PASSWORD).upper()
    check = BasicAuthCheck(MetricsBasicAuth("prometheus", stored.lower(), "a salt", algorithm,
                                            2000, 128))
    assert check.accepts(_header("prometheus", PASSWORD))
    assert check.accepts(_header("prometheus", PASSWORD))  # the kept acceptance
    for header in (None, "", "Bearer x", _header("prometheus", "wrong"),
                   _header("other", PASSWORD), "Basic !!!", "Basic " +
                   base64.b64encode(b"no colon").decode()):
        assert not check.accepts(header), header


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The endpoint's key and certificate (signed by a CA of the test) as PEM, PKCS12 and JKS."""
    home = tmp_path_factory.mktemp("endpoint-tls")
    ca_key, key = new_key(), new_key()
    ca = certificate("kafka-mirror test CA", ca_key, None, ca_key)
    cert = certificate("localhost", key, ca, ca_key)
    (home / "ca.pem").write_bytes(pem(ca))
    (home / "endpoint.pem").write_bytes(pem(key, cert, ca))
    java_key_stores(home, "endpoint", key, cert, [ca], STORE_PASSWORD)
    return home


@contextmanager
def serving(settings: MetricsSettings, timeout: float = 10.0) -> Iterator[MetricsServer]:
    metrics = MirrorMetrics()
    server = MetricsServer(settings, metrics, MirrorStatus(metrics), timeout=timeout).start()
    try:
        yield server
    finally:
        server.stop()


def _get(url: str, cafile: Path, header: str | None = None) -> int:
    request = urllib.request.Request(url)
    if header:
        request.add_header("Authorization", header)
    context = ssl.create_default_context(cafile=str(cafile))
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return exc.code


@pytest.mark.parametrize(("store", "kind"), [("endpoint.pem", "PEM"), ("endpoint.p12", "PKCS12"),
                                             ("endpoint.jks", "JKS")])
def test_https_from_each_kind_of_key_store_with_basic_auth(stores: Path, store: str,
                                                           kind: str) -> None:
    auth = MetricsBasicAuth("prometheus", "", "salt")
    auth = MetricsBasicAuth("prometheus", password_hash(auth, PASSWORD), "salt")
    password = "" if kind == "PEM" else STORE_PASSWORD
    tls = MetricsTls(str(stores / store), kind, password)
    with serving(MetricsSettings(0, "127.0.0.1", auth, tls)) as server:
        assert server.url == f"https://127.0.0.1:{server.port}"
        ca = stores / "ca.pem"
        assert _get(f"{server.url}/metrics", ca) == 401
        assert _get(f"{server.url}/health/live", ca, _header("prometheus", "nope")) == 401
        assert _get(f"{server.url}/health/live", ca, _header("prometheus", PASSWORD)) == 200
        with pytest.raises(OSError):  # plain HTTP gets no answer (the connection is reset)
            urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=10)
        # kafka-mirror status, as an operator runs it
        document = fetch_status(f"{server.url}/status", user="prometheus", password=PASSWORD,
                                cafile=str(ca))
        assert document["live"] is True
        with pytest.raises(MirrorError, match=r"needs the user and password of "
                                              r"mirror\.metrics\.basic\.auth.*\(not accepted\)"):
            fetch_status(f"{server.url}/status", user="prometheus", password="x",
                         cafile=str(ca))
        with pytest.raises(MirrorError, match="CERTIFICATE_VERIFY_FAILED"):
            fetch_status(f"{server.url}/status", user="prometheus", password=PASSWORD)


def test_a_client_stalling_the_tls_handshake_holds_no_other_request(stores: Path) -> None:
    tls = MetricsTls(str(stores / "endpoint.pem"), "PEM")
    with serving(MetricsSettings(0, "127.0.0.1", None, tls), timeout=1.0) as server, \
            socket.create_connection(("127.0.0.1", server.port), timeout=10):
        assert _get(f"{server.url}/health/live", stores / "ca.pem") == 200


@pytest.mark.parametrize(("store", "kind", "password", "message"), [
    ("endpoint.p12", "PKCS12", "wrong", r"cannot read the PKCS12 store .*endpoint\.p12"),
    ("endpoint.jks", "JKS", "wrong", r"cannot read the JKS store .*endpoint\.jks"),
    ("ca.pem", "PEM", "", r"as the metrics endpoint's key and certificate"),
    ("missing.pem", "PEM", "", r"no such file: .*missing\.pem"),
])
def test_a_key_store_that_cannot_serve_is_named_never_its_password(
        stores: Path, store: str, kind: str, password: str, message: str) -> None:
    tls = MetricsTls(str(stores / store), kind, password)
    with pytest.raises(ConfigError, match=message) as caught:
        MetricsServer(MetricsSettings(0, "127.0.0.1", None, tls), MirrorMetrics(),
                      MirrorStatus(MirrorMetrics()), origin="mm2.properties")
    text = str(caught.value)
    assert "mirror.metrics.ssl.keystore" in text and "mm2.properties" in text
    assert "wrong" not in text.replace("wrong password", "")


def test_check_config_loads_the_key_store(stores: Path, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """What the mirror role's ``validate:`` runs: a store that serves is described, a wrong
    password exits 2 naming the file and the key, never the password."""
    from kafka_mirror.cli.main import main

    config = tmp_path / "mm2.properties"
    tls = (f"mirror.metrics.ssl.keystore.location = {stores / 'endpoint.p12'}\n"
           "mirror.metrics.ssl.keystore.type = PKCS12\n")
    auth = ("mirror.metrics.basic.auth.username = prometheus\n"
            "mirror.metrics.basic.auth.password.hash = ab12\n")
    password = f"mirror.metrics.ssl.keystore.password = {STORE_PASSWORD}\n"
    config.write_text(BASE + tls + auth + password)
    assert main(["check-config", str(config)]) == 0
    out = capsys.readouterr().out
    assert "metrics endpoint: https://0.0.0.0:9405/metrics" in out
    assert "basic authentication of user prometheus (SHA-256 hash)" in out
    config.write_text(BASE + tls + "mirror.metrics.ssl.keystore.password = not-it\n")
    assert main(["check-config", str(config)]) == 2
    err = capsys.readouterr().err
    assert f"{config}" in err and "mirror.metrics.ssl.keystore.location" in err
    assert "not-it" not in err
