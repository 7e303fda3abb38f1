"""The flow's lease as the source's readers see it (kafka_mirror.engine.write_gate), with a
stand-in for the JVM's ``io.kafkamirror.source.WriteGate`` (its own behaviour is tested in
jvm/source's WriteGateTest)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from kafka_mirror.engine.write_gate import WriteGate, same_clock


class JvmGates:
    """The JVM class: what the gate was told, and its clock."""

    def __init__(self, clock: Any = time.monotonic_ns) -> None:
        self.calls: list[tuple[str, str, int | None]] = []
        self.clock = clock

    def nanoTime(self) -> int:
        return int(self.clock())

    def openUntil(self, key: str, nanos: int) -> None:
        self.calls.append(("open", key, nanos))

    def close(self, key: str) -> None:
        self.calls.append(("close", key, None))


class Spark:
    def __init__(self, gates: JvmGates, master: str = "local[*]") -> None:
        jvm = type("Jvm", (), {})()
        jvm.io = type("Io", (), {})()
        jvm.io.kafkamirror = type("Km", (), {})()
        jvm.io.kafkamirror.source = type("Src", (), {"WriteGate": gates})()
        self.sparkContext = type("Sc", (), {"master": master, "_jvm": jvm})()


def test_what_the_lease_said_before_the_jvm_is_set_at_attach() -> None:
    gate = WriteGate("A_to_B")
    gate.hold_until(100.5)
    gates = JvmGates()
    assert gate.attach(Spark(gates)) and gate.used
    assert gates.calls == [("open", "A_to_B", 100_500_000_000)]
    gate.hold_until(None)  # the lease lost
    gate.hold_until(101.0)
    assert gates.calls[1:] == [("close", "A_to_B", None), ("open", "A_to_B", 101_000_000_000)]
    assert gate.attach(Spark(JvmGates()))  # attached once: the same JVM
    assert len(gates.calls) == 3


def test_no_gate_on_a_spark_cluster_or_with_another_clock(caplog: pytest.LogCaptureFixture
                                                          ) -> None:
    gates = JvmGates()
    assert not WriteGate("A_to_B").attach(Spark(gates, master="spark://m:7077"))
    other = JvmGates(clock=lambda: time.monotonic_ns() + 10**12)
    gate = WriteGate("A_to_B")
    assert not gate.attach(Spark(other)) and not gate.used
    assert "the JVM's monotonic clock is not Python's" in caplog.text
    gate.hold_until(5.0)
    assert gates.calls == other.calls == []


def test_the_same_clock_is_told_apart_from_another() -> None:
    assert same_clock(time.monotonic_ns)
    assert not same_clock(lambda: time.monotonic_ns() - 5_000_000)
    assert not same_clock(time.time_ns)


def test_a_jvm_going_away_is_no_failure() -> None:
    class Gone(JvmGates):
        def openUntil(self, key: str, nanos: int) -> None:
            raise RuntimeError("py4j: connection refused")

    gate = WriteGate("A_to_B")
    assert gate.attach(Spark(Gone()))
    gate.hold_until(3.0)  # logged at debug, no exception
