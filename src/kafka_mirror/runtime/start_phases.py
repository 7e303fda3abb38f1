"""How long each step of a query's start took, for the line that says it started: a takeover's
time to resume is what an operator (and issue 28's benchmark) asks about first."""

from __future__ import annotations

import time
from collections.abc import Callable

# steps shorter than this are left out of the line
SHOWN_SECONDS = 0.05


class StartPhases:
    """Steps of one start, each timed from the end of the one before."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._began = self._last = clock()
        self._steps: list[tuple[str, float]] = []

    def mark(self, step: str) -> None:
        """``step`` ended now."""
        now = self._clock()
        self._steps.append((step, now - self._last))
        self._last = now

    def describe(self) -> str:
        """``started in 6.1 s: kept positions 1.1, cut batch proven 3.3, query 1.4`` (steps
        under :data:`SHOWN_SECONDS` left out)."""
        steps = ", ".join(f"{step} {seconds:.1f}" for step, seconds in self._steps
                          if seconds >= SHOWN_SECONDS)
        total = f"started in {self._last - self._began:.1f} s"
        return f"{total}: {steps}" if steps else total
