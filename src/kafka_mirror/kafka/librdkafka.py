"""Java client properties rendered for librdkafka (confluent-kafka), the control plane's client:
names librdkafka shares, SASL (JAAS parsed as Java parses it, Kerberos through kinit), and Java
key and trust stores turned into PEM files."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

from kafka_mirror.errors import ConfigError
from kafka_mirror.kafka.keystores import store_to_pem

_RDKAFKA_SAME = frozenset(
    {
        "bootstrap.servers",
        "security.protocol",
        "client.id",
        "sasl.kerberos.service.name",
        "ssl.endpoint.identification.algorithm",
        "ssl.key.password",
        "ssl.keystore.password",
        "request.timeout.ms",
        "metadata.max.age.ms",
        "reconnect.backoff.ms",
        "reconnect.backoff.max.ms",
        "retry.backoff.ms",
        "connections.max.idle.ms",
        "isolation.level",
        "client.dns.lookup",
    }
)
_JAAS_TOKEN = re.compile(
    r'\s*(?:(?P<word>[^\s=;"]+)|(?P<eq>=)|(?P<quoted>"(?:[^"\\]|\\.)*")|(?P<semi>;))'
)
_JAAS_FLAGS = frozenset({"required", "requisite", "sufficient", "optional"})


class JaasError(ValueError):
    """A ``sasl.jaas.config`` value that cannot be understood (the text never holds the value)."""


def parse_jaas(jaas: str) -> tuple[str, dict[str, str]]:
    """``(login module class, options)`` of a one-module JAAS line as Kafka's Java clients take
    it: ``<class> <flag> key=value ... ;`` with values bare or double-quoted (``\\`` escapes)."""
    pos, tokens = 0, []
    text = jaas.rstrip()
    while pos < len(text):
        match = _JAAS_TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            raise JaasError(f"unexpected character at position {pos}")
        pos = match.end()
        kind = match.lastgroup or ""
        raw = match.group(kind)
        if kind == "quoted":
            raw = re.sub(r"\\(.)", r"\1", raw[1:-1])
        tokens.append((kind, raw))
    if not tokens or tokens[0][0] != "word":
        raise JaasError("expected a login module class name first")
    if len(tokens) < 2 or tokens[1][0] != "word" or tokens[1][1].lower() not in _JAAS_FLAGS:
        raise JaasError(
            "expected the control flag (required, requisite, sufficient or optional) after "
            "the login module class"
        )
    if tokens[-1][0] != "semi":
        raise JaasError("expected ';' at the end")
    options: dict[str, str] = {}
    body = tokens[2:-1]
    index = 0
    while index < len(body):
        window = body[index : index + 3]
        if (
            len(window) < 3 or window[0][0] != "word" or window[1][0] != "eq"
            or window[2][0] not in ("word", "quoted")
        ):
            if any(kind == "semi" for kind, _ in body[index:]):
                raise JaasError("exactly one login module is supported")
            raise JaasError(f"expected key=value options (option {index // 3 + 1})")
        options[window[0][1]] = window[2][1]
        index += 3
    return tokens[0][1], options


def _true(options: Mapping[str, str], name: str) -> bool:
    return options.get(name, "false").strip().lower() == "true"


def _kerberos_config(
    module: str, options: Mapping[str, str], props: Mapping[str, str], what: str
) -> dict[str, str]:
    """librdkafka settings for a Krb5LoginModule line (keytab login, or an existing ticket
    cache); anything librdkafka cannot do the same way is an error naming the key."""

    def fail(message: str) -> ConfigError:
        return ConfigError(message, source=what, key="sasl.jaas.config")

    if module.rsplit(".", 1)[-1] != "Krb5LoginModule":
        raise fail(
            f"sasl.mechanism GSSAPI needs com.sun.security.auth.module.Krb5LoginModule, "
            f"not {module}"
        )
    conf: dict[str, str] = {}
    if "serviceName" in options and "sasl.kerberos.service.name" not in props:
        conf["sasl.kerberos.service.name"] = options["serviceName"]
    if _true(options, "useKeyTab"):
        if not options.get("keyTab"):
            raise fail(
                "useKeyTab=true needs keyTab=\"/path/to/file.keytab\" (the control plane "
                "(librdkafka) runs kinit with an explicit keytab)"
            )
        if not options.get("principal"):
            raise fail('useKeyTab=true needs principal="name@REALM"')
        conf["sasl.kerberos.keytab"] = options["keyTab"]
        conf["sasl.kerberos.principal"] = options["principal"]
    elif _true(options, "useTicketCache"):
        if options.get("ticketCache"):
            raise fail(
                "ticketCache= is not supported by the control plane (librdkafka uses the "
                "default credential cache): set KRB5CCNAME in the environment instead"
            )
        # tickets from the existing cache (kinit done outside): see librdkafka_config
        if options.get("principal"):
            conf["sasl.kerberos.principal"] = options["principal"]
    else:
        raise fail(
            "Krb5LoginModule needs useKeyTab=true with keyTab= and principal=, or "
            "useTicketCache=true (a password prompt is not possible here)"
        )
    return conf


def _oauthbearer_config(
    module: str, options: Mapping[str, str], props: Mapping[str, str], what: str
) -> dict[str, str]:
    """librdkafka settings for SASL OAUTHBEARER as the Java clients take it: with Kafka's
    ``OAuthBearerLoginCallbackHandler`` the OIDC client credentials grant (token endpoint, client
    id and secret, scope, SASL extensions; librdkafka's ``sasl.oauthbearer.method=oidc``),
    without a login callback handler Kafka's unsecured JWTs (development only)."""

    def fail(key: str, message: str) -> ConfigError:
        return ConfigError(message, source=what, key=key)

    if module.rsplit(".", 1)[-1] != "OAuthBearerLoginModule":
        raise fail("sasl.jaas.config", "sasl.mechanism OAUTHBEARER needs "
                   f"org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule, "
                   f"not {module}")
    extensions = {k.removeprefix("extension_"): v for k, v in options.items()
                  if k.startswith("extension_")}
    handler = props.get("sasl.login.callback.handler.class", "").strip()
    if not handler:
        return _unsecured_jwt_config(options, extensions, what)
    if handler.rsplit(".", 1)[-1] != "OAuthBearerLoginCallbackHandler":
        raise fail("sasl.login.callback.handler.class",
                   f"the control plane (librdkafka) cannot run the Java login callback handler "
                   f"{handler}; it supports Kafka's own OAuthBearerLoginCallbackHandler (OIDC "
                   "client credentials)")
    url = props.get("sasl.oauthbearer.token.endpoint.url", "").strip()
    if not url.lower().startswith(("http://", "https://")):
        raise fail("sasl.oauthbearer.token.endpoint.url",
                   "OAuthBearerLoginCallbackHandler needs the OIDC provider's token endpoint "
                   "(http:// or https://)" + (f", not {url!r}" if url else ""))
    client_id, secret = options.get("clientId", ""), options.get("clientSecret", "")
    if not client_id or not secret:
        raise fail("sasl.jaas.config", 'OAuthBearerLoginCallbackHandler needs clientId="..." '
                   'and clientSecret="..." in the JAAS line')
    conf = {"sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.token.endpoint.url": url,
            "sasl.oauthbearer.client.id": client_id, "sasl.oauthbearer.client.secret": secret}
    scope = options.get("scope", "")
    if scope:
        conf["sasl.oauthbearer.scope"] = scope
    if extensions:
        conf["sasl.oauthbearer.extensions"] = ",".join(f"{k}={v}" for k, v in extensions.items())
    return conf


def _unsecured_jwt_config(
    options: Mapping[str, str], extensions: Mapping[str, str], what: str
) -> dict[str, str]:
    """Kafka's unsecured JWTs (``OAuthBearerUnsecuredLoginCallbackHandler``): the subject,
    lifetime and extensions librdkafka can build the same way."""
    subject = options.get("unsecuredLoginStringClaim_sub", "")
    if not subject:
        raise ConfigError(
            "OAUTHBEARER without sasl.login.callback.handler.class means Kafka's unsecured JWTs, "
            "which need unsecuredLoginStringClaim_sub=\"...\" in the JAAS line; for an OIDC "
            "provider set sasl.login.callback.handler.class="
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
            source=what, key="sasl.jaas.config")
    parts = [f"principal={subject}"]
    if options.get("unsecuredLoginLifetimeSeconds"):
        parts.append(f"lifeSeconds={options['unsecuredLoginLifetimeSeconds']}")
    parts += [f"extension_{k}={v}" for k, v in extensions.items()]
    return {"enable.sasl.oauthbearer.unsecure.jwt": "true",
            "sasl.oauthbearer.config": " ".join(parts)}


def _sasl_config(props: Mapping[str, str], what: str) -> dict[str, str]:
    """librdkafka settings from ``sasl.jaas.config`` for the configured SASL mechanism (none
    unless the security protocol is SASL_*: the Java clients ignore the line then too)."""
    if not props.get("security.protocol", "PLAINTEXT").strip().upper().startswith("SASL_"):
        return {}
    jaas = props["sasl.jaas.config"]
    try:
        module, options = parse_jaas(jaas)
    except JaasError as err:
        raise ConfigError(
            f"cannot read the JAAS line ({err}); expected "
            "'<LoginModule class> required key=\"value\" ...;' (value not shown: it may hold "
            "a password)",
            source=what,
            key="sasl.jaas.config",
        ) from err
    mechanism = props.get("sasl.mechanism", "GSSAPI").strip().upper()
    if mechanism == "GSSAPI":
        return _kerberos_config(module, options, props, what)
    if mechanism == "OAUTHBEARER":
        return _oauthbearer_config(module, options, props, what)
    conf: dict[str, str] = {}
    if "username" in options:
        conf["sasl.username"] = options["username"]
    if "password" in options:
        conf["sasl.password"] = options["password"]
    return conf


def _truststore_config(props: Mapping[str, str], location: str, what: str) -> dict[str, str]:
    """``ssl.ca.location`` for the trust store: PEM as it is, JKS/PKCS12 converted to PEM."""
    store_type = props.get("ssl.truststore.type", "").strip().upper()
    if store_type == "PEM" or (not store_type and location.endswith((".pem", ".crt"))):
        return {"ssl.ca.location": location}
    pem = store_to_pem(location, store_type or "JKS",
                       props.get("ssl.truststore.password", ""), what, "ssl.truststore", "trust")
    return {"ssl.ca.location": str(pem.ca)}


def _keystore_config(props: Mapping[str, str], location: str, what: str) -> dict[str, str]:
    """The client certificate and key: PKCS12 as librdkafka reads it, PEM as certificate and
    key files, JKS converted to PEM."""
    store_type = props.get("ssl.keystore.type", "").strip().upper()
    if not store_type and location.endswith((".p12", ".pfx")):
        store_type = "PKCS12"
    if store_type == "PKCS12":
        return {"ssl.keystore.location": location}
    if store_type == "PEM":
        return {"ssl.certificate.location": location, "ssl.key.location": location}
    pem = store_to_pem(location, store_type or "JKS", props.get("ssl.keystore.password", ""),
                       what, "ssl.keystore", "key", props.get("ssl.key.password"))
    return {"ssl.certificate.location": str(pem.certificate), "ssl.key.location": str(pem.key)}


def librdkafka_config(props: Mapping[str, str], what: str) -> dict[str, str]:
    """Translate Java client settings to librdkafka settings for the control plane.

    ``what`` names the settings in errors (for example ``cluster 'A'``).
    """
    conf: dict[str, str] = {}
    for key, value in props.items():
        if key in _RDKAFKA_SAME:
            conf[key] = value
        elif key == "sasl.mechanism":
            conf["sasl.mechanisms"] = value
        elif key == "sasl.jaas.config":
            conf.update(_sasl_config(props, what))
        elif key == "ssl.truststore.location":
            conf.update(_truststore_config(props, value, what))
        elif key == "ssl.keystore.location":
            conf.update(_keystore_config(props, value, what))
    conf["bootstrap.servers"] = props.get("bootstrap.servers", "")
    if (
        conf.get("security.protocol", "").upper().startswith("SASL_")
        and conf.get("sasl.mechanisms", "GSSAPI").upper() == "GSSAPI"
        and "sasl.kerberos.keytab" not in conf
    ):
        # Kerberos without a keytab: tickets come from the credential cache of a kinit done
        # outside; librdkafka must not run its own (its default kinit command needs a keytab).
        conf["sasl.kerberos.min.time.before.relogin"] = "0"
    return conf


# librdkafka's facility for a broker connection that failed or was closed (level 3, LOG_ERR);
# Kafka's Java clients log the same at WARN ("Connection to node ... could not be established.
# Node may not be available."): a broker restarting is no error of the mirror's. A refused login
# or TLS handshake (same facility) stays an error.
_CONNECTION_FACILITY = "FAIL"
_LOGIN_WORDS = ("authentication", "sasl", "ssl", "certificate")


def _connection_lost(args: tuple[Any, ...]) -> bool:
    """Whether confluent-kafka's ``(facility, client, text)`` is a lost or refused connection."""
    if len(args) < 3 or args[0] != _CONNECTION_FACILITY:
        return False
    text = str(args[2]).lower()
    return not any(word in text for word in _LOGIN_WORDS)


def _fenced(args: tuple[Any, ...]) -> bool:
    """Whether confluent-kafka's ``(facility, client, text)`` tells a transactional producer was
    fenced: how a flow's lease passes on (kafka_mirror.control.lease reports it)."""
    text = str(args[2]).lower() if len(args) >= 3 else ""
    return "fenced by a newer instance" in text or "with an old epoch" in text


def _retried_while_loading(args: tuple[Any, ...]) -> bool:
    """Whether confluent-kafka's ``(facility, client, text)`` is a producer's ID request that
    a coordinator still loading its state refused and that librdkafka retries by itself
    (``GETPID ... Coordinator load in progress: retrying``): every cluster started a moment
    before, and every coordinator that just moved, answers so; Kafka's Java producer retries it
    without a word. Its level would be librdkafka's warning."""
    text = str(args[2]).lower() if len(args) >= 3 else ""
    return args[:1] == ("GETPID",) and "load in progress" in text and text.endswith("retrying")


class _ClientLog(logging.LoggerAdapter):  # type: ignore[type-arg]
    """librdkafka's messages, which confluent-kafka hands to a ``logger`` setting as
    ``log(level, "%s [%s] %s", facility, client name, text)`` at their syslog level mapped to
    Python's (lost or refused connections at WARNING, as the Java clients log them; a lease
    producer fenced by its successor, and a producer ID request retried while a coordinator
    loads, at INFO), prefixed with what the client is for."""

    def log(self, level: int, msg: Any, *args: Any, **kwargs: Any) -> None:
        if level > logging.WARNING and _connection_lost(args):
            level = logging.WARNING
        elif level > logging.INFO and (_fenced(args) or _retried_while_loading(args)):
            level = logging.INFO
        super().log(level, msg, *args, **kwargs)

    def process(self, msg: Any, kwargs: Any) -> tuple[Any, Any]:
        return f"{self.extra['client'] if self.extra else ''}: {msg}", kwargs


def with_client_log(conf: Mapping[str, Any], client: str) -> dict[str, Any]:
    """``conf`` with librdkafka's messages sent through Python logging (logger
    ``kafka_mirror.librdkafka``), named by ``client`` (e.g. ``cluster 'A' admin``), instead of
    librdkafka's own lines on stderr. They reach the logger when the client is polled."""
    return dict(conf) | {
        "logger": _ClientLog(logging.getLogger("kafka_mirror.librdkafka"), {"client": client})
    }
