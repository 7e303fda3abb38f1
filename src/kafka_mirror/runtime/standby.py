"""A standby's warm-up: once, what a takeover's start would otherwise wait for (clients
connected, the query's path planned and run on a made-up row, record readers opened), on a
thread of its own, so that neither the flow's upkeep nor a takeover waits for it. A warm-up that
failed (a cluster not answering) is tried again :data:`RETRY_SECONDS` later; a takeover
meanwhile starts cold and reports its own failures."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from kafka_mirror.errors import reason

log = logging.getLogger(__name__)

RETRY_SECONDS = 30.0

Work = Callable[[], None]


def on_thread(name: str) -> Callable[[Work], None]:
    """Runs work on a daemon thread called ``name``."""
    return lambda work: threading.Thread(target=work, daemon=True, name=name).start()


class StandbyWarmUp:
    """One flow's warm-up. ``spawn`` runs the work (a thread of its own; tests run it inline)."""

    def __init__(self, flow_name: str, spawn: Callable[[Work], None],
                 clock: Callable[[], float] = time.monotonic,
                 retry_seconds: float = RETRY_SECONDS) -> None:
        self._name = flow_name
        self._spawn = spawn
        self._clock = clock
        self._retry_seconds = retry_seconds
        self._begun = False  # under way or done
        self._retry_at = 0.0
        self.ready = False

    def start(self, prepare: Callable[[], Work]) -> None:
        """Unless under way, done, or failed less than the retry time ago: ``prepare`` here
        (what must be made on the caller's thread), then the work it returns on the spawned
        one."""
        if self._begun or self._clock() < self._retry_at:
            return
        self._begun = True
        try:
            work = prepare()
        except Exception as exc:
            self._failed(exc)
            return
        self._spawn(lambda: self._run(work))

    def _run(self, work: Work) -> None:
        began = self._clock()
        try:
            work()
        except Exception as exc:
            self._failed(exc)
            return
        self.ready = True
        log.info("flow %s: ready to take over (clients and query path warmed in %.1f s)",
                 self._name, self._clock() - began)

    def _failed(self, exc: Exception) -> None:
        log.debug("flow %s: standby not prepared (%s); trying again in %.0f s", self._name,
                  reason(exc), self._retry_seconds)
        self._retry_at = self._clock() + self._retry_seconds
        self._begun = False
