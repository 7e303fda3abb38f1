"""Certificates made by the tests: RSA keys, a CA, certificates it signs (for ``localhost`` and
127.0.0.1), PEM text, and the JDK's keytool for Java stores."""

from __future__ import annotations

import datetime
import ipaddress
import subprocess
from collections.abc import Sequence
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID


def new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def certificate(subject: str, key: rsa.RSAPrivateKey, issuer: x509.Certificate | None,
                issuer_key: rsa.RSAPrivateKey, ca: bool | None = None,
                names: Sequence[str] = ()) -> x509.Certificate:
    """A certificate for ``subject``, valid from yesterday to the day after tomorrow, signed by
    ``issuer`` (itself when None). A CA (by default: a self-signed one) has no subject
    alternative names; any other is for ``localhost``, 127.0.0.1 and the DNS ``names``."""
    ca = issuer is None if ca is None else ca
    now = datetime.datetime.now(datetime.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer.subject if issuer else name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if not ca:
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
             *(x509.DNSName(n) for n in names)]),
            critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def pem(*items: x509.Certificate | rsa.RSAPrivateKey) -> bytes:
    """Certificates and (unencrypted PKCS#8) keys as PEM text, in the order given."""
    out = b""
    for item in items:
        if isinstance(item, x509.Certificate):
            out += item.public_bytes(serialization.Encoding.PEM)
        else:
            out += item.private_bytes(serialization.Encoding.PEM,
                                      serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption())
    return out


def keytool(*args: str) -> None:
    """The JDK's keytool; fails the test with its output."""
    run = subprocess.run(["keytool", *args], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr


def java_key_stores(home: Path, name: str, key: rsa.RSAPrivateKey, cert: x509.Certificate,
                    chain: list[x509.Certificate], password: str) -> None:
    """``<name>.p12`` and ``<name>.jks`` in ``home``: the key with its certificate and chain, as
    Java users have them (both stores and the key under ``password``)."""
    encryption = serialization.BestAvailableEncryption(password.encode())
    (home / f"{name}.p12").write_bytes(pkcs12.serialize_key_and_certificates(
        name.encode(), key, cert, chain, encryption))
    keytool("-importkeystore", "-noprompt", "-srckeystore", str(home / f"{name}.p12"),
            "-srcstoretype", "PKCS12", "-srcstorepass", password,
            "-destkeystore", str(home / f"{name}.jks"), "-deststoretype", "JKS",
            "-deststorepass", password)
