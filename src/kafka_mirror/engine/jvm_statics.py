"""Static methods of a class in the Spark driver's JVM, each looked up once.

Through py4j, ``jvm.io.kafkamirror.CopiedRanges.drain(key)`` makes five round trips to the JVM:
one per name it resolves (``io``, ``kafkamirror``, the class, the method), then the call. A
real-time flow's upkeep calls such methods every second; one looked up here costs the call only
(an idle mirror's py4j thread in the JVM and the Python side of its calls)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


class JvmStatics:
    """The static methods of ``class_name`` in ``jvm`` (PySpark's ``sparkContext._jvm``)."""

    def __init__(self, jvm: Any, class_name: str) -> None:
        self._jvm = jvm
        self._class_name = class_name
        self._lock = threading.Lock()
        self._methods: dict[str, Callable[..., Any]] = {}

    def method(self, name: str) -> Callable[..., Any]:
        """The static method ``name``, a callable (looked up at the first call)."""
        found = self._methods.get(name)
        if found is None:
            with self._lock:
                found = self._methods.get(name)
                if found is None:
                    owner = self._jvm
                    for part in self._class_name.split("."):
                        owner = getattr(owner, part)
                    found = self._methods[name] = getattr(owner, name)
        return found

    def call(self, name: str, *args: Any) -> Any:
        return self.method(name)(*args)
