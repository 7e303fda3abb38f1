"""Waiting for a condition instead of sleeping for a guessed time.

A test that needs something to have happened (or to have had the chance to happen) waits for
the event that shows it with :func:`wait_for`; a process being watched (e.g. the mirror) can cut
the wait short when it has died and add its log's tail to the failure.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Protocol

# How many times its timeout a wait may take: the timeouts are bounds for a failure, never what
# a test asserts, and the 2-core CI machine runs some days 3 times slower than others (the test
# command sets 2).
PATIENCE = float(os.environ.get("KAFKA_MIRROR_TEST_PATIENCE", "1") or "1")


class Watched(Protocol):
    """A process a wait depends on."""

    def failure(self) -> str | None:
        """Why waiting any longer is pointless (e.g. the process exited), or ``None``."""

    def tail(self) -> str:
        """What to show with a failed wait (e.g. the end of the process's log)."""


def wait_for(condition: Callable[[], object], timeout: float, what: str,
             watched: Watched | None = None, *, interval: float = 1.0) -> None:
    """Poll ``condition`` every ``interval`` seconds until it is true; fail the test with an
    ``AssertionError`` naming ``what`` when ``timeout`` seconds (times :data:`PATIENCE`) pass
    first, or as soon as ``watched`` reports a failure."""
    timeout *= PATIENCE
    deadline = time.monotonic() + timeout
    while True:
        if condition():
            return
        failure = watched.failure() if watched is not None else None
        if failure is not None:
            raise AssertionError(f"{failure} while waiting for {what}:\n{_tail(watched)}")
        if time.monotonic() >= deadline:
            raise AssertionError(
                f"timed out after {timeout}s waiting for {what}\n{_tail(watched)}")
        time.sleep(interval)


def _tail(watched: Watched | None) -> str:
    return watched.tail() if watched is not None else ""
