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

TIMESTAMP_HEADER = "kafka-mirror.timestamp"
INTERCEPTOR_CLASS = "io.kafkamirror.TimestampRestoringInterceptor"

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
SAFE_CONSUMER_DEFAULTS = {"isolation.level": "read_committed"}

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
    return (
        SAFE_PRODUCER_DEFAULTS
        | dict(target.client)
        | dict(target.producer)
        | dict(flow.producer_overrides)
    )


def admin_properties(cluster: ClusterSpec) -> dict[str, str]:
    """Java admin settings for the control plane's work on ``cluster``."""
    return dict(cluster.client) | dict(cluster.admin)


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
    options["maxOffsetsPerTrigger"] = str(flow.max_records_per_batch)
    return options


def spark_sink_options(flow: FlowSpec) -> dict[str, str]:
    """Options for ``writeStream.format("kafka")``; the interceptor restores timestamps."""
    props = producer_properties(flow)
    options = {f"kafka.{k}": v for k, v in props.items() if k not in _SPARK_SINK_MANAGED}
    existing = props.get("interceptor.classes", "").strip()
    interceptors = [INTERCEPTOR_CLASS] + ([existing] if existing else [])
    options["kafka.interceptor.classes"] = ",".join(interceptors)
    return options


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
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|(\S+?))(?=\s|;|$)')


def _jaas_options(jaas: str) -> dict[str, str]:
    return {m[1]: (m[2] if m[2] is not None else m[3]) for m in _JAAS_OPTION.finditer(jaas)}


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
            options = _jaas_options(value)
            if "username" in options:
                conf["sasl.username"] = options["username"]
            if "password" in options:
                conf["sasl.password"] = options["password"]
            if "keyTab" in options:
                conf["sasl.kerberos.keytab"] = options["keyTab"]
            if "principal" in options:
                conf["sasl.kerberos.principal"] = options["principal"]
        elif key == "ssl.truststore.location":
            if props.get("ssl.truststore.type", "").upper() == "PEM" or value.endswith(
                (".pem", ".crt")
            ):
                conf["ssl.ca.location"] = value
            else:
                raise ConfigError(
                    "the control plane (librdkafka) needs the CA as a PEM file: set "
                    "ssl.truststore.type=PEM with a PEM truststore",
                    source=what,
                    key="ssl.truststore.location",
                    value=value,
                )
        elif key == "ssl.keystore.location":
            conf["ssl.keystore.location"] = value
    conf["bootstrap.servers"] = props.get("bootstrap.servers", "")
    return conf
