"""The one place where each cluster's client settings are assembled.

Settings are assembled as Java client properties (the names users write in mm2.properties and
MM1 configs) and then rendered for the two client stacks: the Java clients inside Spark's Kafka
source and sink (``kafka.``-prefixed options) and librdkafka (confluent-kafka) in the control
plane (:mod:`kafka_mirror.kafka.librdkafka`).
"""

from __future__ import annotations

from typing import Any

from kafka_mirror.config.model import ClusterSpec, FlowSpec
from kafka_mirror.errors import ConfigError
from kafka_mirror.kafka.librdkafka import librdkafka_config, with_client_log

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
# The Java producer's default buffer.memory.
JAVA_BUFFER_MEMORY = 33_554_432
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


# Java client keys newer than the Kafka clients Spark's Kafka connector ships (3.9), which would
# ignore them (a login that then fails with no word about why): key prefix -> what 3.9 takes
DATA_PATH_KAFKA_CLIENTS = "3.9"
_NEWER_CLIENT_KEYS = {
    "sasl.oauthbearer.client.credentials.client.id": 'clientId="..." in sasl.jaas.config',
    "sasl.oauthbearer.client.credentials.client.secret": 'clientSecret="..." in sasl.jaas.config',
    "sasl.oauthbearer.scope": 'scope="..." in sasl.jaas.config',
    "sasl.oauthbearer.jwt.retriever.class": "OAuthBearerLoginCallbackHandler (client credentials)",
    "sasl.oauthbearer.jwt.validator.class": "the default validation",
    "sasl.oauthbearer.assertion.": "client credentials with a client secret",
}


def check_data_path_keys(flow: FlowSpec) -> None:
    """A ConfigError naming the first key the data path's Java clients would silently ignore."""
    for cluster, props in ((flow.source.alias, consumer_properties(flow)),
                           (flow.target.alias, producer_properties(flow))):
        for key in sorted(props):
            instead = next((v for k, v in _NEWER_CLIENT_KEYS.items() if key.startswith(k)), None)
            if instead is not None:
                raise ConfigError(
                    f"needs Kafka clients 4.1 or newer; the data path (Spark's Kafka connector) "
                    f"runs Kafka clients {DATA_PATH_KAFKA_CLIENTS}, which ignore it: use "
                    f"{instead}", source=f"cluster '{cluster}'", key=key)


def consumer_properties(flow: FlowSpec) -> dict[str, str]:
    """Java consumer settings for reading the flow's source cluster."""
    source = flow.source
    return (
        SAFE_CONSUMER_DEFAULTS
        | dict(source.client)
        | dict(source.consumer)
        | dict(flow.consumer_overrides)
    )


def producer_properties(flow: FlowSpec, partitions: int = 0) -> dict[str, str]:
    """Java producer settings for writing to the flow's target cluster; ``partitions``: how many
    the producer writes to (0: not known), which bounds the default ``batch.size``."""
    target = flow.target
    props = (
        SAFE_PRODUCER_DEFAULTS
        | (REALTIME_PRODUCER_DEFAULTS if flow.realtime else {})
        | dict(target.client)
        | dict(target.producer)
        | dict(flow.producer_overrides)
    )
    return _batch_fits_buffer(flow, props, partitions)


def _batch_fits_buffer(flow: FlowSpec, props: dict[str, str], partitions: int) -> dict[str, str]:
    """The mirror's default ``batch.size`` (256 KiB: fewer requests under a backlog) shrinks to
    what ``buffer.memory`` holds four of for every partition written, rounded down to a power
    of two (at least 16 KiB, Kafka's own default, and never above the buffer; a new batch size
    is a new producer, so it should change seldom as topics come): the Java producer takes a
    whole ``batch.size`` from the buffer for every batch it opens, however few records go in,
    and ``send()`` blocks while the buffer is used up. At 2,000 partitions the default 32 MiB
    holds 128 batches of 256 KiB; a record spread thin over them waited for memory. Both set,
    the batch larger than the buffer, is an error naming them."""
    try:
        buffer = int(props.get("buffer.memory", str(JAVA_BUFFER_MEMORY)))
        batch = int(props["batch.size"])
    except ValueError:
        return props  # not numbers: the Java producer names the key
    if user_set_producer_key(flow, "batch.size"):
        if 0 < buffer < batch:
            raise ConfigError(
                f"the producer's batch.size {batch} is larger than its buffer.memory {buffer}: "
                "no batch could be allocated",
                source=f"flow {flow.name}",
                key="buffer.memory",
                value=str(buffer),
            )
        return props
    if buffer <= 0:
        return props
    share = buffer // (4 * max(1, partitions))
    if share >= 16_384:  # a power of two: a topic added rarely changes it (and the producer)
        share = 1 << (share.bit_length() - 1)
    fitting = min(batch, buffer, max(16_384, share))
    return props if fitting == batch else props | {"batch.size": str(fitting)}


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


def control_producer_config(cluster: ClusterSpec) -> dict[str, Any]:
    """librdkafka settings of a control-plane producer (syncs, checkpoints, heartbeats)."""
    props = dict(cluster.client) | dict(cluster.producer)
    conf = librdkafka_config(props, f"cluster '{cluster.alias}'")
    conf.update({"acks": "all", "enable.idempotence": "true", "linger.ms": "5"})
    return with_client_log(conf, f"cluster '{cluster.alias}' producer")


def control_consumer_config(cluster: ClusterSpec) -> dict[str, Any]:
    """librdkafka settings of a control-plane reader that never commits and reads from a
    partition's start (an offset gone before the read reached it: from the new start)."""
    props = dict(cluster.client) | dict(cluster.consumer)
    conf = librdkafka_config(props, f"cluster '{cluster.alias}'")
    conf.pop("isolation.level", None)
    conf.update({"group.id": "kafka-mirror.reader", "enable.auto.commit": "false",
                 "enable.partition.eof": "true", "auto.offset.reset": "earliest"})
    return with_client_log(conf, f"cluster '{cluster.alias}' reader")


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
                       latency: bool = False, copies_run: str = "",
                       partitions: int = 0) -> dict[str, str]:
    """Options for ``writeStream.format("kafka")``; the interceptor restores timestamps.
    ``largest_source_batch``: the largest ``max.message.bytes`` among the mirrored source
    topics (see :func:`request_size`). ``latency``: the interceptor also records each
    acknowledged record's replication latency under the flow's name (metrics on).
    ``copies_run`` (real-time mode): the interceptor records where each record landed under
    this key (:mod:`kafka_mirror.engine.realtime`); a key per query run also gives each run a
    producer of its own (Spark shares producers of equal settings). ``partitions``: how many
    the query writes to (see :func:`producer_properties`)."""
    props = producer_properties(flow, partitions)
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
