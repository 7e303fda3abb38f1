"""Control-plane tasks that repeat (checkpoints, group sync, heartbeats, ACL sync), each in a
thread of its own so a slow one never delays another; a failing round is logged and retried."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from kafka_mirror.failure_streak import FailureStreak

log = logging.getLogger(__name__)


class Periodic:
    """Runs ``action`` every ``interval`` seconds until :meth:`stop` (first run after
    ``first_delay``)."""

    def __init__(
        self, name: str, interval: float, action: Callable[[], object], first_delay: float = 0.0
    ) -> None:
        self.name = name
        self.interval = interval
        self.action = action
        self.first_delay = first_delay
        self.failures = FailureStreak(log, name)
        self.runs = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def start(self) -> Periodic:
        self._thread.start()
        return self

    def _loop(self) -> None:
        wait = self.first_delay
        while not self._stop.wait(wait):
            try:
                self.action()
                self.runs += 1
                self.failures.succeeded()
            except Exception as exc:
                self.failures.failed(exc)
            wait = self.interval

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
