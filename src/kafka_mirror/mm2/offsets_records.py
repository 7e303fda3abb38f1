"""MirrorMaker 2's Connect offsets topic: its name, the worker group, and the records' format.

What a MirrorSourceConnector worker writes to (and looks up in) its offsets topic, byte for byte:
see :mod:`kafka_mirror.control.mm2_positions` for the facts from Kafka's sources this follows.

kafka-mirror keeps its own positions in the same records (:mod:`kafka_mirror.state.kept_positions`),
with two more fields beside ``offset``: the target partition's end offset right after the record at
``offset`` was written (``kafka-mirror.target.end``) and the source topic's ID
(``kafka-mirror.topic.id``). Connect accepts extra fields of primitive types in an offset
(``OffsetUtils.validateFormat``) and MM2 reads ``offset`` alone (``MirrorUtils.unwrapOffset``), so
MM2 resumes from these records as from its own.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TypeGuard

from kafka_mirror.errors import ConfigError

__all__ = [
    "DEFAULT_OFFSETS_PARTITIONS",
    "MM2_SOURCE_CONNECTOR",
    "TARGET_END_FIELD",
    "TOPIC_ID_FIELD",
    "is_int",
    "kept_value",
    "mm2_offsets_key",
    "mm2_offsets_topic",
    "mm2_source_key",
    "mm2_source_value",
    "mm2_worker_group",
    "parse_kept_value",
    "parse_source_key",
    "parse_stored_offset",
]

# Dedicated mode names each connector after its class's simple name (MirrorHerder).
MM2_SOURCE_CONNECTOR = "MirrorSourceConnector"
# DistributedConfig: offset.storage.partitions default
DEFAULT_OFFSETS_PARTITIONS = 25

_JAVA_INT_MAX = 2**31 - 1
_JAVA_LONG_MAX = 2**63 - 1
_SHORT_ESCAPES = {0x08: "\\b", 0x09: "\\t", 0x0A: "\\n", 0x0C: "\\f", 0x0D: "\\r"}


# ------------------------------------------------------------------ names


def _setting(props: Mapping[str, str], key: str) -> str | None:
    value = props.get(key)
    if value is None:
        return None
    value = value.strip()  # ConfigDef trims STRING values
    if not value:
        # KafkaOffsetBackingStore: "Offset storage topic must be specified"
        raise ConfigError("MirrorMaker 2 refuses an empty value here", key=key, value="")
    if "${" in value:
        raise ConfigError(
            "config-provider references are not resolved here; pass the topic name itself",
            key=key,
            value=value,
        )
    return value


def mm2_offsets_key(props: Mapping[str, str], target_alias: str, name: str) -> str | None:
    """The key that sets ``offset.storage.<name>`` of the herder writing into ``target_alias``,
    with :func:`mm2_offsets_topic`'s precedence (top-level, then ``<target>.``), or None."""
    for key in (f"offset.storage.{name}", f"{target_alias}.offset.storage.{name}"):
        if key in props:
            return key
    return None


def mm2_offsets_topic(props: Mapping[str, str], source_alias: str, target_alias: str) -> str:
    """The Connect offsets topic MM2 dedicated mode uses for ``source->target`` (on the target).

    Precedence as in ``MirrorMakerConfig.workerConfig``: top-level ``offset.storage.topic``
    (applies to every pair), then ``<target>.offset.storage.topic``, then
    ``mm2-offsets.<source>.internal``. ``<source>-><target>.offset.storage.topic`` is not read.
    """
    for key in ("offset.storage.topic", f"{target_alias}.offset.storage.topic"):
        value = _setting(props, key)
        if value is not None:
            return value
    return f"mm2-offsets.{source_alias}.internal"


def mm2_worker_group(props: Mapping[str, str], source_alias: str, target_alias: str) -> str:
    """The Connect worker group of the ``source->target`` herder (on the target cluster):
    ``<target>.group.id``, else ``<source>-mm2`` (a top-level ``group.id`` is not read)."""
    value = props.get(f"{target_alias}.group.id", "").strip()
    return value or f"{source_alias}-mm2"


# ------------------------------------------------------------------ record format


def _json_string(text: str) -> str:
    """``text`` as a JSON string the way Kafka 4.3.1's Jackson (2.21) writes it to UTF-8:
    ``"`` and ``\\`` escaped, control characters as ``\\b \\t \\n \\f \\r`` or ``\\u00XX``,
    characters beyond the BMP as an escaped surrogate pair, hex in upper case, all other
    characters (also non-ASCII, DEL, U+2028) as they are."""
    out = ['"']
    for char in text:
        code = ord(char)
        if char == '"':
            out.append('\\"')
        elif char == "\\":
            out.append("\\\\")
        elif code < 0x20:
            out.append(_SHORT_ESCAPES.get(code, f"\\u{code:04X}"))
        elif 0xD800 <= code <= 0xDFFF:
            raise ValueError(f"lone surrogate U+{code:04X} cannot be written as UTF-8")
        elif code > 0xFFFF:
            high = 0xD800 + ((code - 0x10000) >> 10)
            low = 0xDC00 + ((code - 0x10000) & 0x3FF)
            out.append(f"\\u{high:04X}\\u{low:04X}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def mm2_source_key(source_alias: str, topic: str, partition: int) -> bytes:
    """The offsets-topic key MM2's worker writes, and looks up, for one upstream partition."""
    if not 0 <= partition <= _JAVA_INT_MAX:
        raise ValueError(f"partition {partition} out of range")
    text = (
        f"[{_json_string(MM2_SOURCE_CONNECTOR)},{{\"cluster\":{_json_string(source_alias)},"
        f"\"partition\":{partition},\"topic\":{_json_string(topic)}}}]"
    )
    return text.encode("utf-8")


def mm2_source_value(next_offset: int) -> bytes:
    """The offsets-topic value for a position ("next offset to read" ``next_offset`` >= 1):
    MM2 stores the offset of the last copied record."""
    if not 1 <= next_offset <= _JAVA_LONG_MAX:
        raise ValueError(f"position {next_offset} out of range (1 .. 2^63-1)")
    return b'{"offset":%d}' % (next_offset - 1)


TARGET_END_FIELD = "kafka-mirror.target.end"
TOPIC_ID_FIELD = "kafka-mirror.topic.id"


def kept_value(next_offset: int, target_end: int, topic_id: str | None) -> bytes:
    """The value kafka-mirror keeps for a position: MM2's ``{"offset": next - 1}`` with the
    target's end offset after it and the source topic's ID (when known)."""
    if not 1 <= next_offset <= _JAVA_LONG_MAX:
        raise ValueError(f"position {next_offset} out of range (1 .. 2^63-1)")
    if not 0 <= target_end <= _JAVA_LONG_MAX:
        raise ValueError(f"target end {target_end} out of range (0 .. 2^63-1)")
    value: dict[str, int | str] = {"offset": next_offset - 1, TARGET_END_FIELD: target_end}
    if topic_id:
        value[TOPIC_ID_FIELD] = topic_id
    return json.dumps(value, separators=(",", ":")).encode("utf-8")


def parse_kept_value(value: bytes) -> tuple[int, int | None, str | None] | None:
    """``(next offset, target end, topic ID)`` of a stored value; the last two are None in a
    value MM2 wrote itself. None for a value of no known shape or no position (negative)."""
    stored = parse_stored_offset(value)
    if stored is None or stored < 0:
        return None
    parsed = json.loads(value.decode("utf-8"))
    end, topic_id = parsed.get(TARGET_END_FIELD), parsed.get(TOPIC_ID_FIELD)
    return (stored + 1, int(end) if is_int(end) and end >= 0 else None,
            topic_id if isinstance(topic_id, str) and topic_id else None)


def is_int(value: object) -> TypeGuard[int]:
    """A JSON integer (not a boolean)."""
    return isinstance(value, int) and not isinstance(value, bool)


def parse_source_key(key: bytes | None) -> tuple[str, str, str, int] | None:
    """``(connector, cluster, topic, partition)`` of a MirrorSourceConnector key; ``("", ...)``
    for a well-formed key of another connector; None when the key has no known shape."""
    if key is None:
        return None
    try:
        parsed = json.loads(key.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    if (
        not isinstance(parsed, list)
        or len(parsed) != 2
        or not isinstance(parsed[0], str)
        or not isinstance(parsed[1], dict)
    ):
        return None
    connector, partition_map = parsed
    if connector != MM2_SOURCE_CONNECTOR:
        return ("", "", "", 0)
    cluster = partition_map.get("cluster")
    topic = partition_map.get("topic")
    partition = partition_map.get("partition")
    if not (isinstance(cluster, str) and isinstance(topic, str) and is_int(partition)):
        return None
    if not 0 <= partition <= _JAVA_INT_MAX:
        return None
    return connector, cluster, topic, partition


def parse_stored_offset(value: bytes) -> int | None:
    """The offset of a stored value ``{"offset":<integer>}``; None for any other value."""
    try:
        parsed = json.loads(value.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(parsed, dict):
        return None
    offset = parsed.get("offset")
    if not is_int(offset) or not -(2**63) <= offset <= _JAVA_LONG_MAX:
        return None
    return int(offset)
