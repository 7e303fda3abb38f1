"""Static methods of a JVM class looked up once (kafka_mirror.engine.jvm_statics), with a
stand-in for py4j's views that counts the names it resolves (each a round trip in py4j)."""

from __future__ import annotations

from typing import Any

from kafka_mirror.engine.jvm_statics import JvmStatics


class Names:
    """A py4j view: every attribute read is one name resolved in the JVM."""

    def __init__(self, path: str, resolved: list[str]) -> None:
        self._path = path
        self._resolved = resolved

    def __getattr__(self, name: str) -> Any:
        path = f"{self._path}.{name}" if self._path else name
        self._resolved.append(path)
        if name == "drain":
            return lambda key: f"drained {key}"
        return Names(path, self._resolved)


def test_each_method_is_resolved_once_then_only_called() -> None:
    resolved: list[str] = []
    ranges = JvmStatics(Names("", resolved), "io.kafkamirror.CopiedRanges")
    assert resolved == []  # nothing until the first call
    assert ranges.call("drain", "a") == "drained a"
    assert resolved == ["io", "io.kafkamirror", "io.kafkamirror.CopiedRanges",
                        "io.kafkamirror.CopiedRanges.drain"]
    assert [ranges.call("drain", k) for k in "bc"] == ["drained b", "drained c"]
    assert ranges.method("drain")("d") == "drained d"
    assert len(resolved) == 4
