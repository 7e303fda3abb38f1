"""The one place where each cluster's client settings are assembled.

Settings are assembled as Java client properties (the names users write in mm2.properties and
MM1 configs) and then rendered for the two client stacks: the Java clients inside Spark's Kafka
source and sink (``kafka.``-prefixed options) and librdkafka (confluent-kafka) in the control
plane.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from kafka_mirror.config.model import ClusterSpec, FlowSpec
from kafka_mirror.errors import ConfigError
from kafka_mirror.kafka.keystores import store_to_pem

TIMESTAMP_HEADER = "kafka-mirror.timestamp"
INTERCEPTOR_CLASS = "io.kafkamirror.TimestampRestoringInterceptor"
# producer config the interceptor reads: record replication latency under this flow name
LATENCY_FLOW_CONFIG = "kafka-mirror.latency.flow"
# real-time mode: the source offset travels as a header after the timestamp's, and the
# interceptor records where each record landed under this producer config's value
OFFSET_HEADER = "kafka-mirror.offset"
COPIES_RUN_CONFIG = "kafka-mirror.copies.run"

# Producer settings that cannot lose data; applied unless the user set the key.
SAFE_PRODUCER_DEFAULTS = {
    "acks": "all",
    "enable.idempotence": "true",
    "retries": "2147483647",
    "max.in.flight.requests.per.connection": "5",
    "delivery.timeout.ms": "2147483647",
    "linger.ms": "20",
    "batch.size": "262144",
    "compression.type": "lz4",
}
# Real-time mode sends each record as it is read: a batch waits at most Kafka's own default
# linger (what MirrorMaker 2's producer uses), not the 20 ms that fill batches under a backlog.
REALTIME_PRODUCER_DEFAULTS = {"linger.ms": "5"}
SAFE_CONSUMER_DEFAULTS = {"isolation.level": "read_committed"}
# The Java producer's default max.request.size, and what is added to the largest source batch
# size (the mirror adds a header to every record).
PRODUCER_MAX_REQUEST_SIZE = 1_048_576
REQUEST_SIZE_ALLOWANCE = 1_024

# Keys Spark's Kafka source or sink manages itself and refuses or ignores.
_SPARK_SOURCE_MANAGED = frozenset(
    {
        "group.id",
        "auto.offset.reset",
        "enable.auto.commit",
        "key.deserializer",
        "value.deserializer",
        "interceptor.classes",
    }
)
_SPARK_SINK_MANAGED = frozenset({"key.serializer", "value.serializer"})


def consumer_properties(flow: FlowSpec) -> dict[str, str]:
    """Java consumer settings for reading the flow's source cluster."""
    source = flow.source
    return (
        SAFE_CONSUMER_DEFAULTS
        | dict(source.client)
        | dict(source.consumer)
        | dict(flow.consumer_overrides)
    )


def producer_properties(flow: FlowSpec) -> dict[str, str]:
    """Java producer settings for writing to the flow's target cluster."""
    target = flow.target
    props = (
        SAFE_PRODUCER_DEFAULTS
        | (REALTIME_PRODUCER_DEFAULTS if flow.realtime else {})
        | dict(target.client)
        | dict(target.producer)
        | dict(flow.producer_overrides)
    )
    return _batch_fits_buffer(flow, props)


def _batch_fits_buffer(flow: FlowSpec, props: dict[str, str]) -> dict[str, str]:
    """A ``buffer.memory`` below the mirror's default ``batch.size`` keeps its meaning (the
    Java producer refuses every record larger than the buffer's batches): the default batch
    shrinks to a quarter of the buffer (at least 16 KiB, Kafka's own default). Both set, the
    batch larger than the buffer, is an error naming them."""
    try:
        buffer = int(props.get("buffer.memory", "0"))
        batch = int(props["batch.size"])
    except ValueError:
        return props  # not numbers: the Java producer names the key
    if buffer <= 0 or batch <= buffer:
        return props
    if user_set_producer_key(flow, "batch.size"):
        raise ConfigError(
            f"the producer's batch.size {batch} is larger than its buffer.memory {buffer}: "
            "no batch could be allocated",
            source=f"flow {flow.name}",
            key="buffer.memory",
            value=str(buffer),
        )
    return props | {"batch.size": str(min(buffer, max(16_384, buffer // 4)))}


def source_reader_properties(flow: FlowSpec) -> dict[str, str]:
    """Java consumer settings for counting the flow's source records at a restart: those Spark's
    source reads with (the same isolation level, so the same records)."""
    return consumer_properties(flow)


def target_reader_properties(flow: FlowSpec) -> dict[str, str]:
    """Java consumer settings for reading back a few of the flow's target records (every
    record up to the high watermark, as the end offsets the mirror measures)."""
    target = flow.target
    return dict(target.client) | dict(target.consumer) | {"isolation.level": "read_uncommitted"}


def admin_properties(cluster: ClusterSpec) -> dict[str, str]:
    """Java admin settings for the control plane's work on ``cluster``."""
    return dict(cluster.client) | dict(cluster.admin)


def control_producer_config(cluster: ClusterSpec) -> dict[str, str]:
    """librdkafka settings of a control-plane producer (syncs, checkpoints, heartbeats)."""
    props = dict(cluster.client) | dict(cluster.producer)
    conf = librdkafka_config(props, f"cluster '{cluster.alias}'")
    conf.update({"acks": "all", "enable.idempotence": "true", "linger.ms": "5"})
    return conf


def control_consumer_config(cluster: ClusterSpec) -> dict[str, str]:
    """librdkafka settings of a control-plane reader that never commits."""
    props = dict(cluster.client) | dict(cluster.consumer)
    conf = librdkafka_config(props, f"cluster '{cluster.alias}'")
    conf.pop("isolation.level", None)
    conf.update({"group.id": "kafka-mirror.reader", "enable.auto.commit": "false",
                 "enable.partition.eof": "true"})
    return conf


def durability_warnings(flow: FlowSpec) -> list[str]:
    """Notices for producer overrides that weaken the no-loss guarantees."""
    props = producer_properties(flow)
    notes = []
    if props.get("acks") not in ("all", "-1"):
        notes.append(f"flow {flow.name}: producer acks={props.get('acks')} can lose records")
    if props.get("enable.idempotence", "true").lower() != "true":
        notes.append(f"flow {flow.name}: producer idempotence is off; retries may reorder")
    return notes


def spark_source_options(flow: FlowSpec) -> dict[str, str]:
    """Options for ``spark.readStream.format("kafka")`` (without the topic assignment)."""
    props = consumer_properties(flow)
    options = {f"kafka.{k}": v for k, v in props.items() if k not in _SPARK_SOURCE_MANAGED}
    options["includeHeaders"] = "true"
    options["failOnDataLoss"] = str(flow.fail_on_data_loss).lower()
    if not flow.realtime:  # real-time mode reads without a per-batch limit
        options["maxOffsetsPerTrigger"] = str(flow.max_records_per_batch)
    return options


def user_set_producer_key(flow: FlowSpec, key: str) -> bool:
    """Whether the user set ``key`` for the flow's producer (any level)."""
    return any(key in level for level in (flow.target.client, flow.target.producer,
                                           flow.producer_overrides))


def request_size(flow: FlowSpec, largest_source_batch: int) -> int | None:
    """The producer's ``max.request.size`` that lets through every record the source topics
    accept (their largest ``max.message.bytes``, plus room for the timestamp header), or None
    when the producer's default already does or the user set it."""
    if user_set_producer_key(flow, "max.request.size"):
        return None
    wanted = largest_source_batch + REQUEST_SIZE_ALLOWANCE
    return wanted if largest_source_batch > 0 and wanted > PRODUCER_MAX_REQUEST_SIZE else None


def spark_sink_options(flow: FlowSpec, largest_source_batch: int = 0,
                       latency: bool = False, copies_run: str = "") -> dict[str, str]:
    """Options for ``writeStream.format("kafka")``; the interceptor restores timestamps.
    ``largest_source_batch``: the largest ``max.message.bytes`` among the mirrored source
    topics (see :func:`request_size`). ``latency``: the interceptor also records each
    acknowledged record's replication latency under the flow's name (metrics on).
    ``copies_run`` (real-time mode): the interceptor records where each record landed under
    this key (:mod:`kafka_mirror.engine.realtime`); a key per query run also gives each run a
    producer of its own (Spark shares producers of equal settings)."""
    props = producer_properties(flow)
    size = request_size(flow, largest_source_batch)
    if size is not None:
        props["max.request.size"] = str(size)
    options = {f"kafka.{k}": v for k, v in props.items() if k not in _SPARK_SINK_MANAGED}
    existing = props.get("interceptor.classes", "").strip()
    interceptors = [INTERCEPTOR_CLASS] + ([existing] if existing else [])
    options["kafka.interceptor.classes"] = ",".join(interceptors)
    if latency:
        options[f"kafka.{LATENCY_FLOW_CONFIG}"] = flow.name
    if copies_run:
        options[f"kafka.{COPIES_RUN_CONFIG}"] = copies_run
    if not user_set_producer_key(flow, "client.id"):
        # the flow's own producer, found by this id when a restart waits for it to be idle
        options["kafka.client.id"] = sink_client_id(flow)
    return options


def sink_client_id(flow: FlowSpec) -> str:
    """The ``client.id`` of the flow's Spark sink producer, unless the user set one."""
    return f"kafka-mirror-{flow.path_name}"


# --- librdkafka (confluent-kafka) rendering -------------------------------------------------

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
