"""Who may read the mirror's HTTP endpoint, and over what.

- HTTP basic authentication, checked against the salted hash of the password in the JMX
  exporter's forms (``mirror.metrics.basic.auth.*``): the configuration never holds the password.
  A PBKDF2 check costs a good part of a CPU-second, so the last accepted credentials are kept (as
  a hash) and a scrape every few seconds costs nothing.
- HTTPS with the key and certificate (chain) of a key store as Kafka's listeners take it
  (``mirror.metrics.ssl.*``): JKS or PKCS12 (converted once, into the process's private
  directory) or PEM (key and certificates in one file).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import ssl
import threading
from pathlib import Path

from kafka_mirror.config.model import MetricsBasicAuth, MetricsTls
from kafka_mirror.errors import ConfigError
from kafka_mirror.kafka.keystores import store_to_pem

REALM = "kafka-mirror"
_ACCEPTED_KEPT = 16


def password_hash(settings: MetricsBasicAuth, password: str) -> str:
    """The hex hash ``settings`` describes for ``password``, without leading zeros (the JMX
    exporter writes its hashes as numbers in base 16)."""
    algorithm = settings.algorithm
    if algorithm.startswith("PBKDF2WithHmac"):
        digest = algorithm.removeprefix("PBKDF2WithHmac").lower()
        derived = hashlib.pbkdf2_hmac(digest, password.encode(), settings.salt.encode(),
                                      settings.iterations, settings.key_length // 8)
        return derived.hex().lstrip("0")
    name = algorithm.replace("-", "").lower()
    return hashlib.new(name, f"{settings.salt}:{password}".encode()).hexdigest().lstrip("0")


class BasicAuthCheck:
    """Checks an ``Authorization`` header against :class:`MetricsBasicAuth`."""

    def __init__(self, settings: MetricsBasicAuth) -> None:
        self.settings = settings
        self._expected = settings.password_hash.lower().lstrip("0").encode()
        self._accepted: set[bytes] = set()
        self._lock = threading.Lock()

    def accepts(self, header: str | None) -> bool:
        if not header or header[:6].lower() != "basic ":
            return False
        token = hashlib.sha256(header.encode()).digest()
        with self._lock:
            if token in self._accepted:
                return True
        try:
            decoded = base64.b64decode(header[6:].strip(), validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            return False
        username, sep, password = decoded.partition(":")
        if not sep:
            return False
        user_ok = hmac.compare_digest(username.encode(), self.settings.username.encode())
        hash_ok = hmac.compare_digest(password_hash(self.settings, password).encode(),
                                      self._expected)
        if not (user_ok and hash_ok):
            return False
        with self._lock:
            if len(self._accepted) >= _ACCEPTED_KEPT:
                self._accepted.clear()
            self._accepted.add(token)
        return True


def server_context(tls: MetricsTls, origin: str) -> ssl.SSLContext:
    """A TLS server context (TLS 1.2 or later) with the key and certificate of ``tls``; a
    missing file, a wrong password or a store without a key is a :class:`ConfigError` naming
    the key (never a password)."""
    key = "mirror.metrics.ssl.keystore.location"
    if tls.keystore_type == "PEM":
        if not Path(tls.keystore_location).is_file():
            raise ConfigError(f"no such file: {tls.keystore_location}", source=origin, key=key)
        certfile, keyfile = tls.keystore_location, None
        password = tls.key_password or tls.keystore_password or None
    else:
        pem = store_to_pem(tls.keystore_location, tls.keystore_type, tls.keystore_password,
                           origin, "mirror.metrics.ssl.keystore", "key", tls.key_password)
        certfile, keyfile, password = str(pem.certificate), str(pem.key), None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(certfile, keyfile, password)
    except (ssl.SSLError, OSError) as exc:
        reason = getattr(exc, "reason", None) or exc.strerror or exc
        raise ConfigError(
            f"cannot use {tls.keystore_location} ({tls.keystore_type}) as the metrics "
            f"endpoint's key and certificate: {reason} (wrong password, or no private key?)",
            source=origin, key=key,
        ) from None
    return context
