"""Failures in a row, logged so that an operator can read them: a round that fails again and
again (a cluster down for minutes) gives the first failure and every 60th as a warning, the
others at DEBUG, and one line when it works again. The repeating threads of every layer use it
(the control plane's :class:`~kafka_mirror.runtime.periodic.Periodic` tasks, the flow's lease)."""

from __future__ import annotations

import logging

# a round that keeps failing warns on the 1st, the (1 + EVERY)th, ... failure in a row
EVERY = 60


class FailureStreak:
    """The failures in a row of one repeating thing, named ``what`` in its log lines."""

    def __init__(self, log: logging.Logger, what: str, every: int = EVERY) -> None:
        self.log, self.what, self.every = log, what, every
        self.count = 0

    def failed(self, reason: object) -> None:
        """One more failure in a row: a warning for the first and every ``every``th after it,
        DEBUG between."""
        self.count += 1
        level = logging.WARNING if self.count % self.every == 1 % self.every else logging.DEBUG
        self.log.log(level, "%s failed (%d in a row): %s", self.what, self.count, reason)

    def succeeded(self) -> None:
        """A round that worked: after failures, one line saying so; the streak starts again."""
        if self.count:
            self.log.info("%s working again (%d failed before)", self.what, self.count)
        self.count = 0
