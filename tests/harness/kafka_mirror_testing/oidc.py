"""A real OIDC provider for OAUTHBEARER tests: Keycloak, from its distribution on Maven Central
(``org.keycloak:keycloak-quarkus-dist``), in development mode (its own H2 database) on 127.0.0.1.

``with LocalOidcProvider(workdir, clients={"mirror": "secret"}) as idp:`` starts a realm whose
confidential clients get tokens by the client credentials grant (``idp.token_endpoint``); brokers
validate them with the realm's keys (``idp.jwks_endpoint``, :func:`oauth_cluster`).

The distribution is fetched once with Maven into ``${KAFKA_MIRROR_CACHE:-~/.cache/kafka-mirror}``
and started there once, so that Keycloak's build step (about 40 s on 2 cores) is done then, and the
database that first start made (its schema and master realm, about 20 s of every start on 2 cores)
is kept beside it with its admin's password; each provider runs from a copy of that home and of
that database (its database and logs are its own) and imports its realm at start.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Self

from kafka_mirror.jvm_artifacts import java_executable
from kafka_mirror_testing.localcluster import (
    LOOPBACK,
    JvmProcess,
    LocalClusterError,
    LocalKafkaCluster,
    free_port,
    tail,
)
from kafka_mirror_testing.quick_jvms import extra_jvm_flags
from kafka_mirror_testing.service import Service
from kafka_mirror_testing.waiting import PATIENCE

__all__ = ["KEYCLOAK_VERSION", "OAUTH_LISTENER", "LocalOidcProvider", "keycloak_home",
           "oauth_cluster", "oauth_listener"]

KEYCLOAK_VERSION = "26.7.3"
_ARTIFACT = f"org.keycloak:keycloak-quarkus-dist:{KEYCLOAK_VERSION}:zip"
REALM = "kafka"
AUDIENCE = "kafka-brokers"
OAUTH_LISTENER = "OAUTH"
LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
LOGIN_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
# in the cached home: the first start's database (data/h2) and its admin's password
_DATABASE = ".database"
# the admin API calls of :meth:`LocalOidcProvider.logins` (a bound, not a wait)
ADMIN_TIMEOUT = 60


def _cache_dir() -> Path:
    return Path(os.environ.get("KAFKA_MIRROR_CACHE") or "~/.cache/kafka-mirror").expanduser()


def keycloak_home(timeout: float = 600.0) -> Path:
    """The cached, already built Keycloak home (fetched, unpacked and started once)."""
    cache = _cache_dir()
    home = cache / f"keycloak-{KEYCLOAK_VERSION}"
    if (home / ".built").exists() and (home / _DATABASE).is_dir():
        return home
    cache.mkdir(parents=True, exist_ok=True)
    with (cache / f"keycloak-{KEYCLOAK_VERSION}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (home / ".built").exists() and (home / _DATABASE).is_dir():
            return home
        with tempfile.TemporaryDirectory(dir=cache, prefix="keycloak-") as scratch:
            work = Path(scratch)
            subprocess.run(
                ["mvn", "-q", "-B", "dependency:copy", f"-Dartifact={_ARTIFACT}",
                 f"-DoutputDirectory={work}", "-Dtransitive=false"],
                check=True, timeout=timeout, stdout=subprocess.DEVNULL)
            (archive,) = work.glob("keycloak-quarkus-dist-*.zip")
            subprocess.run(["unzip", "-q", str(archive), "-d", str(work)], check=True,
                           timeout=timeout)
            built = work / f"keycloak-{KEYCLOAK_VERSION}"
            # the first start builds the server (lib/quarkus) and the database every provider
            # starts from (schema, master realm, its admin), kept with the admin's password
            first = LocalOidcProvider(work / "first-start", clients={}, home=built,
                                      start_timeout=timeout, realm=False)
            with first:
                pass
            (built / _DATABASE).mkdir()
            (built / "data" / "h2").rename(built / _DATABASE / "h2")
            password = built / _DATABASE / "admin-password"
            password.write_text(first._admin_password, encoding="utf-8")
            password.chmod(0o600)
            shutil.rmtree(built / "data", ignore_errors=True)
            (built / ".built").touch()
            shutil.rmtree(home, ignore_errors=True)
            built.rename(home)
    return home


class LocalOidcProvider(Service):
    """Keycloak with one realm (``kafka``) whose ``clients`` (id -> secret) are confidential
    clients allowed the client credentials grant; access tokens live ``token_seconds``."""

    def __init__(
        self,
        workdir: Path,
        clients: Mapping[str, str],
        *,
        token_seconds: int = 300,
        heap: str = "512m",
        home: Path | None = None,
        start_timeout: float = 180.0,
        realm: bool = True,
    ) -> None:
        self.workdir = Path(workdir)
        self.clients = dict(clients)
        self.token_seconds = token_seconds
        self.heap = heap
        self._home = home
        self.start_timeout = start_timeout
        self._import_realm = realm   # False: the master realm only (the cached database)
        self.port = 0
        self._admin_password = secrets.token_urlsafe(12)
        self._proc: JvmProcess | None = None

    # ------------------------------------------------------------------ addresses
    @property
    def issuer(self) -> str:
        return f"http://{LOOPBACK}:{self.port}/realms/{REALM}"

    @property
    def token_endpoint(self) -> str:
        return f"{self.issuer}/protocol/openid-connect/token"

    @property
    def jwks_endpoint(self) -> str:
        return f"{self.issuer}/protocol/openid-connect/certs"

    def token(self, client_id: str, secret: str) -> dict[str, Any]:
        """A client credentials grant, as the Kafka clients make it (the JSON answer)."""
        body = urllib.parse.urlencode({"grant_type": "client_credentials",
                                       "client_id": client_id, "client_secret": secret})
        with urllib.request.urlopen(self.token_endpoint, body.encode(), timeout=10) as answer:
            return dict(json.load(answer))

    def logins(self, client_id: str) -> list[int]:
        """When (epoch ms) ``client_id`` got each of its tokens, oldest first (the realm's
        CLIENT_LOGIN events, read with the admin API). The admin's password grant hashes the
        password (PBKDF2, on purpose slow): on a loaded 2-core box it took over 10 s, hence the
        long timeouts."""
        body = urllib.parse.urlencode({"grant_type": "password", "client_id": "admin-cli",
                                       "username": "admin", "password": self._admin_password})
        admin_token = f"http://{LOOPBACK}:{self.port}/realms/master/protocol/openid-connect/token"
        with urllib.request.urlopen(admin_token, body.encode(), timeout=ADMIN_TIMEOUT) as answer:
            admin = json.load(answer)["access_token"]
        query = urllib.parse.urlencode({"client": client_id, "type": "CLIENT_LOGIN",
                                        "max": 10_000})
        request = urllib.request.Request(
            f"http://{LOOPBACK}:{self.port}/admin/realms/{REALM}/events?{query}",
            headers={"Authorization": f"Bearer {admin}"})
        with urllib.request.urlopen(request, timeout=ADMIN_TIMEOUT) as answer:
            return sorted(int(event["time"]) for event in json.load(answer))

    # ------------------------------------------------------------------ lifecycle
    def _realm(self) -> dict[str, Any]:
        return {
            "realm": REALM, "enabled": True, "accessTokenLifespan": self.token_seconds,
            # every token a client gets is an event (:meth:`logins`)
            "eventsEnabled": True, "enabledEventTypes": ["CLIENT_LOGIN"],
            "clients": [
                {"clientId": client, "secret": secret, "enabled": True, "publicClient": False,
                 "serviceAccountsEnabled": True, "standardFlowEnabled": False,
                 "directAccessGrantsEnabled": False, "protocol": "openid-connect",
                 # tokens name the brokers as their audience, which the brokers check
                 "protocolMappers": [{
                     "name": "kafka-audience", "protocol": "openid-connect",
                     "protocolMapper": "oidc-audience-mapper",
                     "config": {"included.custom.audience": AUDIENCE,
                                "access.token.claim": "true", "id.token.claim": "false"}}]}
                for client, secret in self.clients.items()
            ],
        }

    def start(self) -> Self:
        if self._home is None:
            source = keycloak_home()
            self._home = self.workdir / "keycloak"
            if not self._home.exists():
                # the server, then the cached database as this provider's own
                shutil.copytree(source, self._home, symlinks=True,
                                ignore=shutil.ignore_patterns(_DATABASE))
                shutil.copytree(source / _DATABASE / "h2", self._home / "data" / "h2")
                self._admin_password = (source / _DATABASE / "admin-password").read_text(
                    encoding="utf-8")
        home = self._home
        if self._import_realm:
            (home / "data" / "import").mkdir(parents=True, exist_ok=True)
            (home / "data" / "import" / f"{REALM}-realm.json").write_text(json.dumps(self._realm()))
        self.port = free_port()
        java = Path(java_executable()).resolve()
        env = {"JAVA_HOME": str(java.parents[1]), "JAVA": str(java),
               "JAVA_OPTS_KC_HEAP": f"-Xms64m -Xmx{self.heap}",
               # kc.sh adds it to its own options: the test JVMs' flags (C1 only: a start
               # took 18.5 CPU-seconds instead of 29 on this 2-core machine)
               "JAVA_OPTS_APPEND": " ".join(extra_jvm_flags()),
               "KC_BOOTSTRAP_ADMIN_USERNAME": "admin",
               "KC_BOOTSTRAP_ADMIN_PASSWORD": self._admin_password}
        self._proc = JvmProcess(
            "keycloak",
            [str(home / "bin" / "kc.sh"), "start-dev", "--import-realm",
             f"--http-host={LOOPBACK}", f"--http-port={self.port}",
             f"--http-management-port={free_port()}", "--log-level=WARN"],
            self.workdir / "keycloak.log", cwd=self.workdir, env=env)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._proc.start()
        try:
            # as every start of a test server, it may take PATIENCE times its timeout (CI at
            # stop 59: not ready in 180 s at 3 busy test workers; 15 s on an idle machine)
            self._wait_ready(time.monotonic() + self.start_timeout * PATIENCE)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self, deadline: float) -> None:
        realm = REALM if self._import_realm else "master"
        url = f"http://{LOOPBACK}:{self.port}/realms/{realm}/.well-known/openid-configuration"
        while True:
            with (contextlib.suppress(urllib.error.URLError, OSError),
                  urllib.request.urlopen(url, timeout=5) as answer):
                if answer.status == 200:
                    return
            assert self._proc is not None
            if not self._proc.alive():
                raise LocalClusterError(f"Keycloak exited:\n{tail(self._proc.log_path)}")
            if time.monotonic() > deadline:
                raise LocalClusterError(f"Keycloak not ready:\n{tail(self._proc.log_path)}")
            time.sleep(0.5)

    def stop(self) -> None:
        if self._proc is not None:
            self._proc.stop(timeout=30)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def __repr__(self) -> str:
        return f"LocalOidcProvider(pid={self.pid}, issuer={self.issuer})"


def oauth_listener(idp: LocalOidcProvider, listener: str = OAUTH_LISTENER
                   ) -> tuple[dict[str, str], list[str]]:
    """``(server properties, JVM flags)`` of a broker whose SASL listener ``listener`` takes
    OAUTHBEARER and accepts only JWTs signed by ``idp``'s realm keys, issued by it for the
    audience ``kafka-brokers``. The broker (Kafka 4) reads the keys only from URLs its
    ``org.apache.kafka.sasl.oauthbearer.allowed.urls`` system property allows."""
    prefix = f"listener.name.{listener.lower()}"
    return ({
        f"{prefix}.sasl.enabled.mechanisms": "OAUTHBEARER",
        f"{prefix}.oauthbearer.sasl.jaas.config": f"{LOGIN_MODULE} required ;",
        f"{prefix}.oauthbearer.sasl.server.callback.handler.class": VALIDATOR,
        "sasl.oauthbearer.jwks.endpoint.url": idp.jwks_endpoint,
        "sasl.oauthbearer.expected.issuer": idp.issuer,
        "sasl.oauthbearer.expected.audience": AUDIENCE,
    }, [f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={idp.jwks_endpoint}"])


def oauth_cluster(
    name: str, workdir: Path, idp: LocalOidcProvider, *, heap: str = "384m",
    server_overrides: Mapping[str, str] | None = None,
) -> LocalKafkaCluster:
    """A (not yet started) single-node cluster with a listener ``OAUTH`` (SASL_PLAINTEXT) of
    :func:`oauth_listener`; the PLAINTEXT listener stays for the harness."""
    settings, jvm_args = oauth_listener(idp)
    return LocalKafkaCluster(
        name, workdir, heap=heap, extra_listeners={OAUTH_LISTENER: "SASL_PLAINTEXT"},
        server_overrides={**settings, **(server_overrides or {})}, jvm_args=jvm_args,
    )
