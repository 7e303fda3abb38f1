"""MirrorMaker 2's own records, byte for byte: offset syncs, checkpoints, heartbeats.

Kafka writes them with its protocol ``Schema``/``Struct`` types: fields back to back, big-endian,
STRING = INT16 byte length + UTF-8 (connect-mirror ``OffsetSync``, connect-mirror-client
``Checkpoint`` and ``Heartbeat``). Readers ignore trailing bytes, as Kafka's do. All three live
in partition 0 of single-partition compacted topics.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass


class RecordFormatError(ValueError):
    """Bytes that are not the expected MirrorMaker 2 record."""


def _string(text: str) -> bytes:
    data = text.encode("utf-8")
    if len(data) > 32767:
        raise RecordFormatError(f"string longer than 32767 bytes: {text[:40]!r}...")
    return struct.pack(">h", len(data)) + data


class _Reader:
    def __init__(self, data: bytes | None, what: str) -> None:
        if data is None:
            raise RecordFormatError(f"{what}: null")
        self.data = data
        self.pos = 0
        self.what = what

    def _take(self, size: int) -> bytes:
        if self.pos + size > len(self.data):
            raise RecordFormatError(f"{self.what}: truncated at byte {self.pos}")
        chunk = self.data[self.pos : self.pos + size]
        self.pos += size
        return chunk

    def int16(self) -> int:
        value: int = struct.unpack(">h", self._take(2))[0]
        return value

    def int32(self) -> int:
        value: int = struct.unpack(">i", self._take(4))[0]
        return value

    def int64(self) -> int:
        value: int = struct.unpack(">q", self._take(8))[0]
        return value

    def string(self) -> str:
        size = self.int16()
        if size < 0:
            raise RecordFormatError(f"{self.what}: null string at byte {self.pos - 2}")
        try:
            return self._take(size).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RecordFormatError(f"{self.what}: {exc}") from None


@dataclass(frozen=True)
class OffsetSync:
    """Source record ``upstream_offset`` of ``topic``/``partition`` is at ``offset`` on the target.

    ``topic`` is the upstream (source) name. Both offsets belong to the same record.
    """

    topic: str
    partition: int
    upstream_offset: int
    offset: int

    def key(self) -> bytes:
        return _string(self.topic) + struct.pack(">i", self.partition)

    def value(self) -> bytes:
        return struct.pack(">qq", self.upstream_offset, self.offset)

    @classmethod
    def decode(cls, key: bytes | None, value: bytes | None) -> OffsetSync:
        k = _Reader(key, "offset sync key")
        v = _Reader(value, "offset sync value")
        topic, partition = k.string(), k.int32()
        return cls(topic, partition, v.int64(), v.int64())


@dataclass(frozen=True)
class Checkpoint:
    """Group ``group`` committed ``upstream_offset`` on the source; resume at ``offset``.

    ``topic`` is the target-side name; both offsets are next-to-read positions.
    """

    group: str
    topic: str
    partition: int
    upstream_offset: int
    offset: int
    metadata: str = ""
    VERSION = 0

    def key(self) -> bytes:
        return _string(self.group) + _string(self.topic) + struct.pack(">i", self.partition)

    def value(self) -> bytes:
        return (
            struct.pack(">hqq", self.VERSION, self.upstream_offset, self.offset)
            + _string(self.metadata)
        )

    @classmethod
    def decode(cls, key: bytes | None, value: bytes | None) -> Checkpoint:
        k = _Reader(key, "checkpoint key")
        v = _Reader(value, "checkpoint value")
        group, topic, partition = k.string(), k.string(), k.int32()
        v.int16()  # version: Kafka reads every version as v0
        upstream, offset = v.int64(), v.int64()
        return cls(group, topic, partition, upstream, offset, v.string())


@dataclass(frozen=True)
class Heartbeat:
    """Emitted by the ``source``->``target`` pair into ``heartbeats`` on the target."""

    source: str
    target: str
    timestamp: int
    VERSION = 0

    def key(self) -> bytes:
        return _string(self.source) + _string(self.target)

    def value(self) -> bytes:
        return struct.pack(">hq", self.VERSION, self.timestamp)

    @classmethod
    def decode(cls, key: bytes | None, value: bytes | None) -> Heartbeat:
        k = _Reader(key, "heartbeat key")
        v = _Reader(value, "heartbeat value")
        source, target = k.string(), k.string()
        v.int16()
        return cls(source, target, v.int64())
