"""The mirror process's teardown: what it started is closed stage by stage, in a fixed order
whatever order it started in (flows before the control plane, the Spark session last), also
when the wiring fails part-way; a resource that fails to close is logged and the next one is
closed all the same."""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, fields

from kafka_mirror.runtime.failures import first_line

log = logging.getLogger(__name__)


class Stage:
    """Resources closed together, in the order they were added."""

    def __init__(self) -> None:
        self._closers: list[tuple[str, Callable[[], object]]] = []

    def add(self, what: str, close: Callable[[], object]) -> None:
        """``close`` runs at this stage's turn; ``what`` names it when it fails."""
        self._closers.append((what, close))

    def close(self) -> None:
        closers, self._closers = self._closers, []
        for what, close in closers:
            try:
                close()
            except Exception as exc:
                log.warning("%s not closed: %s", what, first_line(str(exc)))


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
    def on(cls, stack: ExitStack) -> Teardown:
        """Stages closed when ``stack`` closes (the last stage first pushed)."""
        teardown = cls(*(Stage() for _ in fields(cls)))
        for field in reversed(fields(cls)):
            stack.callback(getattr(teardown, field.name).close)
        return teardown
