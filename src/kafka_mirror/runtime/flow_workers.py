"""Each flow's upkeep on a thread of its own: starting its query, following its topics and
restarting it (which can take minutes: the batch being written finishes, what a cut batch left
on the target is counted) never holds another flow, nor the main loop that watches them and
answers the health probes.

The main loop pokes every flow once a second; a flow whose upkeep is still running skips the
poke. It tells the health endpoint the mirror is alive only while no flow's upkeep is overdue:
longer than ``busy_window`` (a stuck call), or ``restart_window`` while the flow reports that it
restarts its query.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping

log = logging.getLogger(__name__)


class FlowWorker:
    """Runs a flow's first start, then a tick whenever poked, one at a time, on its own
    thread; ``restarting`` tells whether the flow is restarting its query."""

    def __init__(self, name: str, first: Callable[[], None], tick: Callable[[], None],
                 restarting: Callable[[], bool]) -> None:
        self.name = name
        self.first = first
        self.tick = tick
        self.restarting = restarting
        self.error: BaseException | None = None  # raised by the first start: the process ends
        self.busy_since: float | None = None
        self._due = threading.Event()
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"flow {name}", daemon=True)

    def start(self) -> FlowWorker:
        self.busy_since = time.monotonic()
        self._thread.start()
        return self

    def poke(self) -> None:
        """A tick is due (one already running makes it wait for the next poke)."""
        if self.busy_since is None:
            self._due.set()

    def overdue(self, now: float, busy_window: float, restart_window: float) -> float | None:
        """How long the running upkeep has taken, when that is past its window."""
        since = self.busy_since
        if since is None:
            return None
        window = restart_window if self.restarting() else busy_window
        return now - since if now - since > window else None

    def _run(self) -> None:
        try:
            self.first()
        except BaseException as exc:
            self.error = exc
            return
        finally:
            self.busy_since = None
        while True:
            self._due.wait()
            self._due.clear()
            if self._closing.is_set():
                return
            self.busy_since = time.monotonic()
            try:
                self.tick()  # handles its own failures
            except Exception as exc:  # a defect: logged, the flow is tried again
                log.warning("flow %s: upkeep failed: %s", self.name, exc, exc_info=True)
            finally:
                self.busy_since = None

    def close(self) -> None:
        """No upkeep starts from now on."""
        self._closing.set()
        self._due.set()

    def join(self, timeout: float) -> bool:
        """Whether the upkeep under way ended within ``timeout``."""
        if self._thread.ident is None:  # never started (the wiring failed before)
            return True
        self._thread.join(timeout)
        return not self._thread.is_alive()


class FlowWorkers:
    """The workers of every flow, watched by the main loop."""

    def __init__(self, workers: Mapping[str, FlowWorker], busy_window: float,
                 restart_window: float) -> None:
        self.workers = dict(workers)
        self.busy_window = busy_window
        self.restart_window = restart_window
        self._warned: set[str] = set()

    def start(self) -> FlowWorkers:
        for worker in self.workers.values():
            worker.start()
        return self

    def poke(self) -> None:
        """Every flow's tick is due; raises what a flow's first start raised."""
        for worker in self.workers.values():
            if worker.error is not None:
                raise worker.error
            worker.poke()

    def healthy(self, now: float | None = None) -> bool:
        """No flow's upkeep is overdue (each one overdue is warned about once)."""
        now = time.monotonic() if now is None else now
        healthy = True
        for name, worker in self.workers.items():
            took = worker.overdue(now, self.busy_window, self.restart_window)
            if took is None:
                self._warned.discard(name)
                continue
            healthy = False
            if name not in self._warned:
                self._warned.add(name)
                log.warning("flow %s: its upkeep (%s) has taken %.0f s; the mirror reports "
                            "itself not live", name,
                            "a query restart" if worker.restarting() else "a tick", took)
        return healthy

    def close(self, timeout: float) -> None:
        """No upkeep starts; the ones under way get ``timeout`` seconds together to end."""
        for worker in self.workers.values():
            worker.close()
        deadline = time.monotonic() + timeout
        for name, worker in self.workers.items():
            if not worker.join(max(0.0, deadline - time.monotonic())):
                log.warning("flow %s: its upkeep did not end within %.0f s of the stop",
                            name, timeout)
