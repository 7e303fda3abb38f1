"""A topic's configs as its cluster describes them: in effect, and set on the topic itself."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import ConfigEntry, ConfigResource, ConfigSource

from kafka_mirror.kafka.admin import ClusterAdmin, error_code

log = logging.getLogger(__name__)

TIMESTAMP_TYPE = "message.timestamp.type"
MAX_MESSAGE_BYTES = "max.message.bytes"
LOG_APPEND_TIME = "LogAppendTime"
CREATE_TIME = "CreateTime"
# how long a listed topic the answering broker does not know yet is asked for again
UNKNOWN_TOPIC_WAIT_SECONDS = 10.0


@dataclass(frozen=True)
class TopicConfigs:
    """``effective``: every config in effect (topic, broker or default); ``explicit``: those set
    on the topic itself (what MirrorMaker 2 copies)."""

    effective: Mapping[str, str] = field(default_factory=dict)
    explicit: Mapping[str, str] = field(default_factory=dict)

    @property
    def max_message_bytes(self) -> int | None:
        """The largest record batch the topic accepts (the broker's message.max.bytes unless
        the topic sets its own)."""
        value = self.effective.get(MAX_MESSAGE_BYTES)
        return int(value) if value is not None and value.strip().isdigit() else None

    @property
    def timestamp_type(self) -> str:
        return self.effective.get(TIMESTAMP_TYPE, CREATE_TIME)


def describe_topic_configs(
    admin: ClusterAdmin, topics: list[str], wait: float | None = None,
    sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic,
) -> dict[str, TopicConfigs]:
    """The configs of each of ``topics`` (sensitive values left out). A topic the answering
    broker does not know (created a moment ago on a cluster of several brokers, whose metadata
    reaches each broker in turn; or deleted since it was listed) is asked for again for up to
    ``wait`` seconds (UNKNOWN_TOPIC_WAIT_SECONDS unless given), then left out: the caller plans
    it at its next refresh."""
    out: dict[str, TopicConfigs] = {}
    deadline = clock() + (UNKNOWN_TOPIC_WAIT_SECONDS if wait is None else wait)
    delay = 0.1
    pending = list(topics)
    while pending:
        resources = [ConfigResource(ConfigResource.Type.TOPIC, t) for t in pending]
        unknown = []
        for resource, future in admin.client.describe_configs(resources).items():
            try:
                entries: dict[str, ConfigEntry] = future.result()
            except KafkaException as exc:
                if error_code(exc) != KafkaError.UNKNOWN_TOPIC_OR_PART:
                    raise
                unknown.append(resource.name)
                continue
            out[resource.name] = _topic_configs(entries)
        if unknown and clock() >= deadline:
            log.info("cluster %s: topics not described (unknown to the broker that answered; "
                     "checked again at the next refresh): %s", admin.cluster.alias,
                     ", ".join(sorted(unknown)))
            break
        if unknown:
            sleep(delay)
            delay = min(delay * 2, 1.0)
        pending = unknown
    return out


def _topic_configs(entries: Mapping[str, ConfigEntry]) -> TopicConfigs:
    usable = {
        name: entry for name, entry in entries.items()
        if entry.value is not None and not entry.is_sensitive
    }
    return TopicConfigs(
        effective={name: str(entry.value) for name, entry in usable.items()},
        explicit={
            name: str(entry.value) for name, entry in usable.items()
            if ConfigSource(entry.source) == ConfigSource.DYNAMIC_TOPIC_CONFIG
        },
    )
