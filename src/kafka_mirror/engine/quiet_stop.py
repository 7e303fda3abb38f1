"""A query stopped on purpose, without the messages Spark logs for what the stop interrupts.

Stopping a streaming query cancels its job group. Between two micro-batches there is no job in
it, and Spark 4's ``DAGScheduler`` says so with a WARN line (``Failed to cancel job group ...
Cannot find active jobs for it``), twice at each clean stop. A real-time batch's tasks wait in
the source's poll, and the interrupt makes Spark log errors with stack traces. Operators alert on
both, and neither is a fault. :func:`stop_quietly` turns Spark's loggers that write them off
while the query stops, and back to their levels a few seconds later (they write from Spark's
own threads, after ``stop()`` returned). Stops whose windows overlap (a query restarted, then
the process stopped within seconds) hold a logger off together: it goes back to the level it had
before the first once the last window ends.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any

log = logging.getLogger(__name__)

# What a stop between micro-batches makes Spark log
MICRO_BATCH_STOP_NOISE = ("org.apache.spark.scheduler.DAGScheduler",)
# What a stop of a real-time batch makes Spark log (its tasks interrupted in the source's poll)
REALTIME_STOP_NOISE = (
    "org.apache.spark.util.Utils",
    "org.apache.spark.scheduler.TaskSetManager",
    "org.apache.spark.scheduler.DAGScheduler",
    "org.apache.spark.sql.execution.datasources.v2.DataWritingSparkTask",
    "org.apache.spark.sql.execution.datasources.v2.WriteToDataSourceV2Exec",
)
STOP_NOISE_SECONDS = 5.0

# per JVM and logger: how many stops hold it off, and its level before the first of them
_held: dict[tuple[int, str], tuple[int, Any]] = {}
_held_lock = threading.Lock()


def stop_quietly(jvm: Any, query: Any, loggers: Iterable[str],
                 seconds: float = STOP_NOISE_SECONDS,
                 later: Callable[[float, Callable[[], None]], Any] | None = None) -> None:
    """``query.stop()`` with Spark's ``loggers`` (log4j names, in ``jvm``: the driver's) off,
    restored ``seconds`` later (``later(seconds, action)`` schedules it; a daemon timer by
    default). Without a JVM the query is stopped as it is."""
    if jvm is None:
        query.stop()
        return
    held: list[tuple[int, str]] = []
    configurator = None
    try:
        log4j = jvm.org.apache.logging.log4j
        configurator = log4j.core.config.Configurator
        with _held_lock:
            for name in loggers:
                key = (id(jvm), name)
                count, level = _held.get(key, (0, None))
                if count == 0:  # the first stop to hold it keeps the level to go back to
                    level = log4j.LogManager.getLogger(name).getLevel()
                    configurator.setLevel(name, log4j.Level.OFF)
                _held[key] = (count + 1, level)
                held.append(key)
    except Exception as exc:
        log.debug("Spark's stop messages not silenced (%s)", exc)
    try:
        query.stop()
    finally:
        if configurator is not None and held:
            def restore() -> None:
                with _held_lock:
                    for key in held:
                        count, level = _held[key]
                        if count > 1:
                            _held[key] = (count - 1, level)
                            continue
                        del _held[key]
                        with contextlib.suppress(Exception):
                            configurator.setLevel(key[1], level)

            (later or _timer)(seconds, restore)


def _timer(seconds: float, action: Callable[[], None]) -> None:
    timer = threading.Timer(seconds, action)
    timer.daemon = True
    timer.start()
