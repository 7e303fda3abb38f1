"""A real, throw-away MIT Kerberos KDC and a Kerberized Kafka broker, for tests.

:class:`LocalKdc` creates a realm (``KAFKA-MIRROR.TEST`` by default) in a directory of its own:
``kdc.conf`` and ``krb5.conf`` written there, the database made with ``kdb5_util create -s``,
principals added and keytabs exported with ``kadmin.local``, and ``krb5kdc -n`` (foreground)
listening on free ports of 127.0.0.1 only (TCP; UDP too, but clients are told to use TCP). It is
stopped by its PID. Nothing outside that directory is read or written: every tool gets
``KRB5_CONFIG`` / ``KRB5_KDC_PROFILE`` pointing at the files there, JVMs get
``-Djava.security.krb5.conf`` (:meth:`LocalKdc.jvm_args`), and ``/etc/krb5.conf`` is never used.
It needs the Debian packages krb5-kdc, krb5-admin-server (kadmin.local) and krb5-user (kinit,
which librdkafka runs), installed by ``scripts/setup.sh --test``; no root at run time.

:func:`kerberized_cluster` builds a
:class:`~kafka_mirror_testing.localcluster.LocalKafkaCluster` with a ``SASL_PLAINTEXT`` listener
(name ``GSSAPI``) that authenticates with Kerberos: service principal ``kafka/localhost@REALM``,
advertised as ``localhost`` (Kerberos clients derive the service principal from the broker's
host name).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Self

from kafka_mirror_testing.localcluster import (
    LOOPBACK,
    LocalKafkaCluster,
    free_port,
    stop_process,
    tail,
)
from kafka_mirror_testing.service import Service
from kafka_mirror_testing.waiting import PATIENCE

__all__ = [
    "DEFAULT_REALM",
    "GSSAPI_LISTENER",
    "KDC_PACKAGES",
    "LocalKdc",
    "LocalKdcError",
    "combined_krb5_conf",
    "kerberized_cluster",
]

DEFAULT_REALM = "KAFKA-MIRROR.TEST"
# The Debian packages that provide the tools used here (see scripts/setup.sh --test).
KDC_PACKAGES = ("krb5-kdc", "krb5-admin-server", "krb5-user", "libsasl2-modules-gssapi-mit")
_SBIN = ("/usr/sbin", "/usr/local/sbin", "/sbin")

KDC_CONF = """\
[kdcdefaults]
    kdc_listen = {host}:{udp_port}
    kdc_tcp_listen = {host}:{tcp_port}

[realms]
    {realm} = {{
        database_name = {dir}/principal
        key_stash_file = {dir}/stash
        acl_file = {dir}/kadm5.acl
        admin_keytab = FILE:{dir}/kadm5.keytab
        max_life = 1d
        max_renewable_life = 2d
        supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal
    }}

[logging]
    kdc = FILE:{dir}/krb5kdc.log
    admin_server = FILE:{dir}/kadmin.log
    default = FILE:{dir}/krb5lib.log
"""

KRB5_CONF = """\
[libdefaults]
    default_realm = {realm}
    dns_lookup_kdc = false
    dns_lookup_realm = false
    dns_canonicalize_hostname = false
    rdns = false
    udp_preference_limit = 1
    ticket_lifetime = 1d
    forwardable = true
    default_ccache_name = FILE:{dir}/krb5cc_default

[realms]
    {realm} = {{
        kdc = {host}:{tcp_port}
        admin_server = {host}:{tcp_port}
    }}

[domain_realm]
    localhost = {realm}
    .localhost = {realm}
"""


class LocalKdcError(RuntimeError):
    """The local KDC or one of the Kerberos admin tools failed."""


def _tool(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for directory in _SBIN:
        candidate = Path(directory) / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def _free_udp_port(host: str = LOOPBACK) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


class LocalKdc(Service):
    """An MIT Kerberos KDC for one throw-away realm, on 127.0.0.1, as a context manager.

    ``with LocalKdc(workdir) as kdc: keytab = kdc.add_principal("mirror")``. Clients in this
    process or its children use it through :meth:`env` (``KRB5_CONFIG``), JVMs through
    :meth:`jvm_args`.
    """

    def __init__(
        self, workdir: Path | None = None, realm: str = DEFAULT_REALM, host: str = LOOPBACK
    ) -> None:
        self.realm = realm
        self.host = host
        self._own_dir = workdir is None
        base = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix="kdc-"))
        self.dir = (base / "kdc").resolve() if workdir is not None else base.resolve()
        self.kdc_conf = self.dir / "kdc.conf"
        self.krb5_conf = self.dir / "krb5.conf"
        self.log_path = self.dir / "krb5kdc.out"
        self.keytab_dir = self.dir / "keytabs"
        self.tcp_port = 0
        self.udp_port = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    # ------------------------------------------------------------------ environment
    def env(self) -> dict[str, str]:
        """Environment for MIT Kerberos tools and clients (librdkafka, python-gssapi)."""
        return {
            "KRB5_CONFIG": str(self.krb5_conf),
            "KRB5_KDC_PROFILE": str(self.kdc_conf),
            # replay caches of acceptors, if any, stay in the realm's directory
            "KRB5RCACHEDIR": str(self.dir),
        }

    def jvm_args(self) -> list[str]:
        """JVM flags for Java Kerberos clients and servers using this realm (Java's replay
        cache is in memory unless ``sun.security.krb5.rcache`` says otherwise)."""
        return [f"-Djava.security.krb5.conf={self.krb5_conf}"]

    def principal(self, name: str) -> str:
        """``name@REALM`` (``name`` may already carry the realm)."""
        return name if "@" in name else f"{name}@{self.realm}"

    @property
    def address(self) -> str:
        return f"{self.host}:{self.tcp_port}"

    # ------------------------------------------------------------------ tools
    def _run(self, argv: list[str], what: str, timeout: float = 30.0) -> str:
        env = {**os.environ, **self.env()}
        try:
            result = subprocess.run(
                argv, env=env, cwd=self.dir, stdin=subprocess.DEVNULL, capture_output=True,
                text=True, timeout=timeout, check=False,
            )
        except FileNotFoundError as err:
            raise LocalKdcError(f"{what}: {argv[0]} not found ({err})") from err
        # kadmin.local reports some errors on stderr but exits 0
        if result.returncode != 0 or "error" in result.stderr.lower():
            raise LocalKdcError(
                f"{what} failed (exit {result.returncode}): {result.stderr.strip()}"
                f"{result.stdout.strip()}"
            )
        return result.stdout

    def _required_tool(self, name: str) -> str:
        path = _tool(name)
        if path is None:
            raise LocalKdcError(
                f"{name} is not installed (Debian packages: {' '.join(KDC_PACKAGES)}; "
                "scripts/setup.sh --test installs them)"
            )
        return path

    def kadmin(self, query: str) -> str:
        """Run one ``kadmin.local`` query against the realm's database."""
        return self._run(
            [self._required_tool("kadmin.local"), "-r", self.realm, "-q", query],
            f"kadmin.local {query.split()[0]}",
        )

    def add_principal(self, name: str, keytab: Path | None = None) -> Path:
        """Create ``name@REALM`` with a random key and export it to a keytab; returns its path."""
        principal = self.principal(name)
        if keytab is None:
            safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in principal)
            keytab = self.keytab_dir / f"{safe}.keytab"
        keytab.parent.mkdir(parents=True, exist_ok=True)
        self.kadmin(f"addprinc -randkey {principal}")
        self.kadmin(f"ktadd -k {keytab} -norandkey {principal}")
        return keytab

    # ------------------------------------------------------------------ lifecycle
    def start(self, timeout: float = 20.0) -> Self:
        if self.alive():
            return self
        krb5kdc = self._required_tool("krb5kdc")
        kdb5_util = self._required_tool("kdb5_util")
        self.dir.mkdir(parents=True, exist_ok=True)
        self.keytab_dir.mkdir(exist_ok=True)
        for stale in self.dir.glob("principal*"):
            stale.unlink()
        self.tcp_port = free_port(self.host)
        self.udp_port = _free_udp_port(self.host)
        fmt = {
            "realm": self.realm, "dir": self.dir, "host": self.host,
            "tcp_port": self.tcp_port, "udp_port": self.udp_port,
        }
        self.kdc_conf.write_text(KDC_CONF.format(**fmt), encoding="utf-8")
        self.krb5_conf.write_text(KRB5_CONF.format(**fmt), encoding="utf-8")
        (self.dir / "kadm5.acl").write_text("", encoding="utf-8")
        self._run(
            [kdb5_util, "-r", self.realm, "create", "-s", "-P", secrets.token_hex(16)],
            "kdb5_util create",
        )
        self._log = self.log_path.open("ab")
        self._proc = subprocess.Popen(
            [krb5kdc, "-n", "-r", self.realm],
            env={**os.environ, **self.env()},
            cwd=self.dir,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout * PATIENCE
        while not _tcp_open(self.host, self.tcp_port):
            if self._proc.poll() is not None or time.monotonic() >= deadline:
                state = (
                    f"exited ({self._proc.returncode})" if self._proc.poll() is not None
                    else "not listening in time"
                )
                self.stop()
                raise LocalKdcError(
                    f"krb5kdc {state}; {self.log_path}:\n{tail(self.log_path)}"
                    f"{self.dir / 'krb5kdc.log'}:\n{tail(self.dir / 'krb5kdc.log')}"
                )
            time.sleep(0.05)
        return self

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM the KDC's PID, wait up to ``timeout`` s, then SIGKILL that PID."""
        if self._proc is not None:
            stop_process(self._proc, timeout)
        if self._log is not None:
            self._log.close()
            self._log = None

    def __exit__(self, *exc_info: Any) -> None:
        super().__exit__(*exc_info)
        if self._own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __repr__(self) -> str:
        state = f"pid={self.pid}, kdc={self.address}" if self.alive() else "stopped"
        return f"LocalKdc({self.realm!r}, {state})"


def combined_krb5_conf(
    path: Path, kdcs: Sequence[LocalKdc], default_realm: str, domain_realm: Mapping[str, str]
) -> Path:
    """A krb5.conf for a client of several realms (no cross-realm trust): every KDC's realm,
    ``default_realm``, and ``domain_realm`` (host -> realm; numeric hosts are not looked up
    there by MIT Kerberos: they belong to the default realm)."""
    realms = "".join(
        f"    {kdc.realm} = {{\n        kdc = {kdc.address}\n    }}\n" for kdc in kdcs
    )
    mapping = "".join(f"    {host} = {realm}\n" for host, realm in domain_realm.items())
    path.write_text(
        "[libdefaults]\n"
        f"    default_realm = {default_realm}\n"
        "    dns_lookup_kdc = false\n    dns_lookup_realm = false\n"
        "    dns_canonicalize_hostname = false\n    rdns = false\n"
        "    udp_preference_limit = 1\n    ticket_lifetime = 1d\n"
        f"[realms]\n{realms}[domain_realm]\n{mapping}",
        encoding="utf-8",
    )
    return path


def _tcp_open(host: str, port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
        return True
    return False


GSSAPI_LISTENER = "GSSAPI"
BROKER_HOST = "localhost"


def kerberized_cluster(
    name: str,
    workdir: Path,
    kdc: LocalKdc,
    *,
    heap: str = "384m",
    service: str = "kafka",
    server_overrides: Mapping[str, str] | None = None,
    log_level: str = "WARN",
    host: str = BROKER_HOST,
    bind: str = LOOPBACK,
    port: int = 0,
) -> LocalKafkaCluster:
    """A (not yet started) single-node cluster with a Kerberos (SASL GSSAPI) listener.

    The listener is named ``GSSAPI`` (``cluster.bootstrap_for("GSSAPI")`` gives
    ``<host>:<port>``); it binds ``bind`` (127.0.0.1 by default) on ``port`` (a free one by
    default) and is advertised as ``host`` (``localhost`` by default) because the service
    principal is ``<service>/<host>@REALM``: clients ask the KDC for a ticket for the host name
    they connect to. ``host`` may be an IP address (e.g. the bridge address test hosts reach)
    when the clients do not canonicalize it (krb5.conf ``rdns = false``, no reverse DNS name for
    Java). The PLAINTEXT listener stays on 127.0.0.1 for the harness's own readiness checks and
    inter-broker traffic.
    """
    principal = kdc.principal(f"{service}/{host}")
    keytab = kdc.add_principal(principal)
    prefix = f"listener.name.{GSSAPI_LISTENER.lower()}"
    overrides = {
        f"{prefix}.sasl.enabled.mechanisms": "GSSAPI",
        f"{prefix}.gssapi.sasl.kerberos.service.name": service,
        f"{prefix}.gssapi.sasl.jaas.config": (
            "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true "
            f'storeKey=true keyTab="{keytab}" principal="{principal}";'
        ),
        "sasl.kerberos.service.name": service,
        **(server_overrides or {}),
    }
    return LocalKafkaCluster(
        name,
        workdir,
        heap=heap,
        server_overrides=overrides,
        extra_listeners={GSSAPI_LISTENER: "SASL_PLAINTEXT"},
        advertised_hosts={GSSAPI_LISTENER: host},
        listener_binds={GSSAPI_LISTENER: (bind, port)},
        jvm_args=kdc.jvm_args(),
        env=kdc.env(),
        log_level=log_level,
    )
