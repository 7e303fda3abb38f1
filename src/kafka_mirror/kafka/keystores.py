"""Java key and trust stores (JKS, PKCS12) for the control plane, which speaks librdkafka.

Java clients (Spark's source and sink, MirrorMaker 2) read ``ssl.truststore.*`` and
``ssl.keystore.*`` as they are. librdkafka only takes PEM (or PKCS12 for its own key), so each
store is converted once per process into PEM files in a private directory (mode 0700, removed
at exit): JKS through the JDK's own ``keytool`` (to PKCS12), PKCS12 with the ``cryptography``
library. A wrong password or a missing file is an error naming the cluster and the key, never
showing a password.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from kafka_mirror.errors import ConfigError
from kafka_mirror.kafka.private_dirs import private_dir

_WORKDIR: Path | None = None


def _workdir() -> Path:
    global _WORKDIR
    if _WORKDIR is None:
        _WORKDIR = private_dir("tls")
    return _WORKDIR


@dataclass(frozen=True)
class PemFiles:
    """PEM files for librdkafka: CA certificates, or a client certificate (chain) and its key."""

    ca: Path | None = None
    certificate: Path | None = None
    key: Path | None = None


def _keytool() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "keytool").is_file():
        return str(Path(java_home) / "bin" / "keytool")
    found = shutil.which("keytool")
    if not found:
        raise ConfigError("a JKS store needs the JDK's keytool on the PATH (or JAVA_HOME)")
    return found


def _pkcs12_bytes(location: Path, store_type: str, password: str, what: str, key: str,
                  key_password: str | None) -> bytes:
    if store_type == "PKCS12":
        return location.read_bytes()
    target = _workdir() / (hashlib.sha256(str(location).encode()).hexdigest()[:16] + ".p12")
    target.unlink(missing_ok=True)
    argv = [_keytool(), "-importkeystore", "-noprompt", "-srckeystore", str(location),
            "-srcstoretype", "JKS", "-srcstorepass:env", "KM_SRC", "-destkeystore", str(target),
            "-deststoretype", "PKCS12", "-deststorepass:env", "KM_DST"]
    env = {**os.environ, "KM_SRC": password, "KM_DST": password or "changeit"}
    if key_password and key_password != password:
        argv += ["-srckeypass:env", "KM_KEY", "-destkeypass:env", "KM_DST"]
        env["KM_KEY"] = key_password
    run = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)
    if run.returncode != 0:
        reason = (run.stderr or run.stdout).strip().splitlines()
        raise ConfigError(
            f"cannot read the JKS store {location}: {reason[-1] if reason else 'keytool failed'}"
            " (wrong password or not a JKS file?)", source=what, key=key,
        )
    return target.read_bytes()


def store_to_pem(
    location: str, store_type: str, password: str, what: str, prefix: str, role: str,
    key_password: str | None = None,
) -> PemFiles:
    """Convert ``location`` (a JKS or PKCS12 store) into PEM files; ``role`` is ``trust`` (CA
    certificates) or ``key`` (the client certificate and private key)."""
    # imported here: about 65 ms that every start would spend before the Spark driver's JVM is
    # launched, for the stores only TLS with JKS or PKCS12 has
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    key = f"{prefix}.location"
    path = Path(location)
    if not path.is_file():
        raise ConfigError(f"no such file: {location}", source=what, key=key)
    kind = store_type.strip().upper() or "JKS"
    if kind not in ("JKS", "PKCS12"):
        raise ConfigError(f"store type {store_type} is not supported (JKS, PKCS12 or PEM)",
                          source=what, key=f"{prefix}.type")
    data = _pkcs12_bytes(path, kind, password, what, key, key_password)
    converted_password = password or ("changeit" if kind == "JKS" else "")
    try:
        private_key, certificate, others = pkcs12.load_key_and_certificates(
            data, converted_password.encode() if converted_password else None
        )
    except ValueError as exc:
        raise ConfigError(
            f"cannot read the {kind} store {location}: {exc} (wrong password?)",
            source=what, key=key,
        ) from None
    certificates = ([certificate] if certificate is not None else []) + list(others)
    digest = hashlib.sha256(f"{location}:{role}".encode()).hexdigest()[:16]
    out = _workdir()
    pem = serialization.Encoding.PEM
    if role == "trust":
        if not certificates:
            raise ConfigError(f"the trust store {location} holds no certificate", source=what,
                              key=key)
        ca = out / f"{digest}-ca.pem"
        ca.write_bytes(b"".join(c.public_bytes(pem) for c in certificates))
        return PemFiles(ca=ca)
    if private_key is None or certificate is None:
        raise ConfigError(f"the key store {location} holds no private key with a certificate",
                          source=what, key=key)
    cert_file = out / f"{digest}-cert.pem"
    cert_file.write_bytes(b"".join(c.public_bytes(pem) for c in certificates))
    key_file = out / f"{digest}-key.pem"
    key_file.touch(mode=0o600)
    key_file.write_bytes(private_key.private_bytes(
        pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return PemFiles(certificate=cert_file, key=key_file)
