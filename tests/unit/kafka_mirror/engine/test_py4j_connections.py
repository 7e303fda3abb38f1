"""Closing py4j's idle callback connections (:mod:`kafka_mirror.engine.py4j_connections`):
those the JVM opened are closed, a Python thread's own are kept, in order, and the client's lock
is released whatever happens. (The real thing runs in tests/engine/test_soak.py: the mirror's
Python threads stay put across query restarts.)"""

from __future__ import annotations

from collections import deque
from typing import Any

import pytest

from kafka_mirror.engine.py4j_connections import close_idle_callback_connections


class Connection:
    def __init__(self, from_jvm: bool, fails: bool = False) -> None:
        self.from_jvm, self.fails, self.closed = from_jvm, fails, False

    def isInitiatedFromClient(self) -> bool:
        return self.from_jvm

    def shutdown(self) -> None:
        if self.fails:
            raise RuntimeError("py4j error")
        self.closed = True


class Deque:
    def __init__(self, items: list[Connection]) -> None:
        self.items = deque(items)

    def size(self) -> int:
        return len(self.items)

    def pollFirst(self) -> Connection | None:
        return self.items.popleft() if self.items else None

    def addLast(self, item: Connection) -> None:
        self.items.append(item)


class Lock:
    def __init__(self) -> None:
        self.held = 0
        self.taken = 0

    def lock(self) -> None:
        self.held += 1
        self.taken += 1

    def unlock(self) -> None:
        self.held -= 1


class Field:
    def __init__(self, value: Any) -> None:
        self.value, self.accessible = value, False

    def setAccessible(self, flag: bool) -> None:
        self.accessible = flag

    def get(self, _client: Any) -> Any:
        assert self.accessible
        return self.value


class Gateway:
    def __init__(self, connections: Deque, lock: Lock) -> None:
        fields = {"connections": Field(connections), "lock": Field(lock)}
        callback_client = type("CallbackClientClass", (), {
            "getDeclaredField": staticmethod(lambda name: fields[name])})()
        self.java_gateway_server = type("Server", (), {
            "getCallbackClient": staticmethod(lambda: "client")})()
        forName = {"py4j.CallbackClient": callback_client}.__getitem__
        self.jvm = type("Jvm", (), {})()
        self.jvm.java = type("Java", (), {})()
        self.jvm.java.lang = type("Lang", (), {})()
        self.jvm.java.lang.Class = type("Class", (), {"forName": staticmethod(forName)})()


def test_the_jvms_idle_connections_are_closed_pythons_kept_in_order() -> None:
    jvm_a, python_a, jvm_b, python_b = (Connection(True), Connection(False), Connection(True),
                                        Connection(False))
    connections, lock = Deque([jvm_a, python_a, jvm_b, python_b]), Lock()
    assert close_idle_callback_connections(Gateway(connections, lock)) == 2
    assert jvm_a.closed and jvm_b.closed and not python_a.closed and not python_b.closed
    assert list(connections.items) == [python_a, python_b]
    assert lock.taken == 1 and lock.held == 0


def test_the_lock_is_released_when_a_close_fails() -> None:
    connections, lock = Deque([Connection(True, fails=True)]), Lock()
    with pytest.raises(RuntimeError):
        close_idle_callback_connections(Gateway(connections, lock))
    assert lock.held == 0
