"""Names, constants and the client tuning shared by every part of the benchmark."""

from __future__ import annotations

import os
from collections.abc import Mapping

SOURCE_TOPIC = "bench"
CEILING_TOPIC = "ceiling"
SOURCE_ALIAS = "source"
TARGET_ALIAS = "destination"
TARGET_TOPIC = f"{SOURCE_ALIAS}.{SOURCE_TOPIC}"
MB = 1_000_000
KM_METRICS = "kafka-mirror, metrics on"
KM_AT_LEAST_ONCE = "kafka-mirror, exactly-once off"
KM_STANDALONE = "kafka-mirror, Spark standalone"
KM_REALTIME = "kafka-mirror, real-time"
KM_MICRO_BATCH = "kafka-mirror, micro-batch"
KM_COLD = "kafka-mirror, cold start"
CLK_TCK = os.sysconf("SC_CLK_TCK")
SAMPLE_INTERVAL = 0.5
POLL_INTERVAL = 0.2

# Client tuning applied identically to both mirrors (MirrorMaker 2 reads it from
# <cluster>.consumer.* / <cluster>.producer.*, kafka-mirror from the same keys): the usual
# throughput advice -- bigger batches with some linger, lz4, larger fetches -- while keeping the
# no-loss settings kafka-mirror always uses (acks=all, idempotence, 5 requests in flight).
CONSUMER_TUNING: dict[str, str] = {
    "fetch.min.bytes": "262144",
    "fetch.max.wait.ms": "100",
    "max.partition.fetch.bytes": "4194304",
    "fetch.max.bytes": "52428800",
    "max.poll.records": "5000",
    "receive.buffer.bytes": "1048576",
}
PRODUCER_TUNING: dict[str, str] = {
    "acks": "all",
    "enable.idempotence": "true",
    "max.in.flight.requests.per.connection": "5",
    "batch.size": "262144",
    "linger.ms": "20",
    "compression.type": "lz4",
    "buffer.memory": "134217728",
    "send.buffer.bytes": "1048576",
}

# Latency mode: the same keys for both mirrors, set for low latency instead of throughput. A fetch
# returns as soon as one byte is there (instead of waiting for 256 KiB or 100 ms), and the
# producer lingers 5 ms (Kafka 4's default) instead of 20 ms; the no-loss settings stay.
LATENCY_CONSUMER_TUNING: dict[str, str] = {
    "fetch.min.bytes": "1",
    "fetch.max.wait.ms": "100",
    "max.partition.fetch.bytes": "4194304",
    "fetch.max.bytes": "52428800",
}
LATENCY_PRODUCER_TUNING: dict[str, str] = {
    "acks": "all",
    "enable.idempotence": "true",
    "max.in.flight.requests.per.connection": "5",
    "batch.size": "262144",
    "linger.ms": "5",
    "compression.type": "lz4",
}

# Scale mode: the latency settings without batch.size, so that each mirror sizes its batches as
# it does for a user (MirrorMaker 2: Kafka's 16 KiB; kafka-mirror: 256 KiB shrunk to what
# buffer.memory holds for the partitions written). 256 KiB batches for both, as the latency mode
# sets, fit 128 partitions at a time in the producer's default 32 MiB buffer: send() waited for
# memory at 2,000 partitions, in both mirrors.
SCALE_PRODUCER_TUNING: dict[str, str] = {
    k: v for k, v in LATENCY_PRODUCER_TUNING.items() if k != "batch.size"
}

class MirrorFailed(RuntimeError):
    """A mirror exited early or did not deliver in time."""


def second_km_label(settings: Mapping[str, str]) -> str:
    """The name of the second kafka-mirror's results (``--km-realtime``, or ``--km-micro-batch``
    now that real-time mode is kafka-mirror's default)."""
    return KM_MICRO_BATCH if settings.get("mirror.mode") == "micro-batch" else KM_REALTIME
