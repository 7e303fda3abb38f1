"""A topic's configs as its cluster describes them: in effect, and set on the topic itself."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from confluent_kafka.admin import ConfigEntry, ConfigResource, ConfigSource

from kafka_mirror.kafka.admin import ClusterAdmin

TIMESTAMP_TYPE = "message.timestamp.type"
MAX_MESSAGE_BYTES = "max.message.bytes"
LOG_APPEND_TIME = "LogAppendTime"
CREATE_TIME = "CreateTime"


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


def describe_topic_configs(admin: ClusterAdmin, topics: list[str]) -> dict[str, TopicConfigs]:
    """The configs of each of ``topics`` (sensitive values left out)."""
    if not topics:
        return {}
    resources = [ConfigResource(ConfigResource.Type.TOPIC, t) for t in topics]
    out: dict[str, TopicConfigs] = {}
    for resource, future in admin.client.describe_configs(resources).items():
        entries: dict[str, ConfigEntry] = future.result()
        usable = {
            name: entry for name, entry in entries.items()
            if entry.value is not None and not entry.is_sensitive
        }
        out[resource.name] = TopicConfigs(
            effective={name: str(entry.value) for name, entry in usable.items()},
            explicit={
                name: str(entry.value) for name, entry in usable.items()
                if ConfigSource(entry.source) == ConfigSource.DYNAMIC_TOPIC_CONFIG
            },
        )
    return out
