"""The mirror process's teardown: what it started is closed stage by stage, in a fixed order
whatever order it started in (flows before the control plane, the Spark session last), also
when the wiring fails part-way; a resource that fails to close is logged and the next one is
closed all the same. The closers that wait on a cluster (a last write, a flush, a task's round
in flight) share one budget of :data:`STOP_BUDGET_SECONDS`, so a stop while a cluster does not
answer ends within it instead of after every closer's own timeout in turn."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, fields

from kafka_mirror.errors import reason

log = logging.getLogger(__name__)


# what the closers that wait on a cluster may take together (both clusters gone, a stop took 91 s
# before: 40 s for the kept positions, 10 s for each heartbeat writer and for each blocked task)
STOP_BUDGET_SECONDS = 30.0
# a closer that takes this long is named in the log with its time
SLOW_CLOSE_SECONDS = 2.0


class StopBudget:
    """The seconds the closers that wait on a cluster may take together, counted from the
    first one's turn."""

    def __init__(self, seconds: float = STOP_BUDGET_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = seconds
        self._clock = clock
        self._deadline: float | None = None

    def remaining(self) -> float:
        """What is left (the whole budget at the first call)."""
        now = self._clock()
        if self._deadline is None:
            self._deadline = now + self.seconds
        return max(0.0, self._deadline - now)


class Stage:
    """Resources closed together, in the order they were added."""

    def __init__(self, budget: StopBudget | None = None) -> None:
        self._closers: list[tuple[str, Callable[[], object]]] = []
        self._budget = budget or StopBudget()

    def add(self, what: str, close: Callable[[], object]) -> None:
        """``close`` runs at this stage's turn; ``what`` names it when it fails."""
        self._closers.append((what, close))

    def add_waiting(self, what: str, close: Callable[[float], object]) -> None:
        """``close`` waits on a cluster: it is given the seconds left of the stop's budget."""
        self._closers.append((what, lambda: close(self._budget.remaining())))

    def close(self) -> None:
        closers, self._closers = self._closers, []
        for what, close in closers:
            started = time.monotonic()
            try:
                close()
            except Exception as exc:
                log.warning("%s not closed: %s", what, reason(exc))
            took = time.monotonic() - started
            if took >= SLOW_CLOSE_SECONDS:  # a slow stop says where its time went
                log.info("%s: closed in %.1f s", what, took)


@dataclass(frozen=True)
class Teardown:
    """The stages, in the order they are closed."""

    flows: Stage            # the queries, stopped between batches
    handover: Stage         # then each flow's positions kept in Kafka, and its lease released
    tasks: Stage            # the periodic control-plane tasks
    last_checkpoints: Stage  # the newest positions, for consumers that fail over after the stop
    checkpointers: Stage
    emitters: Stage         # heartbeats
    flow_state: Stage       # translation ranges saved, offset sync writers, target offsets
    lag: Stage              # lag commits
    class_data: Stage
    spark: Stage
    server: Stage           # the metrics endpoint

    @classmethod
    def on(cls, stack: ExitStack, budget: StopBudget | None = None) -> Teardown:
        """Stages closed when ``stack`` closes (the last stage first pushed), sharing one
        :class:`StopBudget`."""
        shared = budget or StopBudget()
        teardown = cls(*(Stage(shared) for _ in fields(cls)))
        for field in reversed(fields(cls)):
            stack.callback(getattr(teardown, field.name).close)
        return teardown
