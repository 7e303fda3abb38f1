"""A flow's lease as the source's readers see it, in the Spark driver's JVM.

The flow's lease (:mod:`kafka_mirror.control.lease`) lets this instance write while its last
renewal is recent enough; the batch writer asks it before every micro-batch. Inside a batch, and
in real-time mode (no batches to ask before), the readers of kafka-mirror's source
(``io.kafkamirror.source.WriteGate``, jvm/source) ask the gate before every record: it is open
until the time the lease says (on the host's monotonic clock, which Python's
``time.monotonic()`` and the JVM's ``System.nanoTime()`` both read), closed when the lease is
lost. A writer paused past its lease (SIGSTOP, a long GC pause) then reads nothing more when it
runs again, before any thread of its Python process has noticed: its deadline has passed.

Local mode only: executors in other JVMs (a Spark cluster) get no gate (the flow's checks stop
their query once the lease is lost). The gate is not used either when the two clocks differ
(checked once, with a warning).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from kafka_mirror.engine.jvm_statics import JvmStatics

log = logging.getLogger(__name__)

# the JVM's clock read between two readings of Python's: the same clock when it falls between
# them (allowing this much for rounding)
_CLOCK_SLACK_NS = 1_000_000


def same_clock(jvm_nanos: Callable[[], Any],
               clock_ns: Callable[[], int] = time.monotonic_ns) -> bool:
    """Whether ``jvm_nanos()`` reads the clock ``clock_ns`` reads."""
    before = clock_ns()
    theirs = int(jvm_nanos())
    after = clock_ns()
    return before - _CLOCK_SLACK_NS <= theirs <= after + _CLOCK_SLACK_NS


class WriteGate:
    """The gate of one flow (``key``) in the driver's JVM, opened until the time the lease gives
    (seconds on ``time.monotonic()``'s clock) or closed (None). Until :meth:`attach` the last
    state is kept and set there."""

    def __init__(self, key: str) -> None:
        self.key = key
        self._lock = threading.Lock()
        self._until: float | None = None
        self._gates: JvmStatics | None = None  # the JVM class, once attached
        self.used = False  # attached to a JVM whose clock is Python's

    def hold_until(self, until: float | None) -> None:
        """This instance may write until ``until`` (None: it may not)."""
        with self._lock:
            self._until = until
            self._push()

    def attach(self, spark: Any) -> bool:
        """The gate in ``spark``'s JVM from now on; False (no gate) on a Spark cluster or when
        the JVM's clock is another."""
        with self._lock:
            if self._gates is not None:
                return self.used
            if not str(spark.sparkContext.master).startswith("local"):
                return False
            gates = JvmStatics(spark.sparkContext._jvm, "io.kafkamirror.source.WriteGate")
            if not same_clock(gates.method("nanoTime")):
                log.warning("flow %s: the JVM's monotonic clock is not Python's: a writer paused "
                            "past its lease is stopped by the flow's own checks only",
                            self.key)
                return False
            self._gates, self.used = gates, True
            self._push()
            return True

    def _push(self) -> None:
        if self._gates is None:
            return
        try:
            if self._until is None:
                self._gates.call("close", self.key)
            else:
                self._gates.call("openUntil", self.key, int(self._until * 1e9))
        except Exception as exc:  # the JVM is going away; closed stays closed by its deadline
            log.debug("flow %s: write gate not set (%s)", self.key, exc)
