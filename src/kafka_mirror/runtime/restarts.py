"""When a flow's query (re)starts, and how long a failed attempt waits: pure decisions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

MAX_RETRY_SECONDS = 60.0

TOPICS_CHANGED = "topics_changed"
FAILURE = "failure"
TOPIC_RECREATED = "topic_recreated"
RECORD_SIZE = "record_size"
# records reached the target after the restart counted what a cut batch left there
LATE_WRITES = "late_writes"


@dataclass(frozen=True)
class Restart:
    """The query (re)starts; ``reason`` is the metrics' restart reason (None: a first start,
    not counted as a restart)."""

    reason: str | None


def restart_decision(
    current: Mapping[str, int],
    wanted: Mapping[str, int],
    running: bool,
    failures: int,
    recreated: Sequence[str],
    largest_batch: int,
    started_largest_batch: int,
) -> Restart | None:
    """Whether the query (re)starts: ``current`` is the assignment (topic to partition count)
    it runs with, ``wanted`` the one the topics now call for; ``running`` whether a query runs;
    ``failures`` the failed attempts in a row; ``recreated`` the source topics deleted and
    created again since the query started; ``largest_batch`` the largest
    ``max.message.bytes`` of the source topics now and when the query started. None: nothing
    to do."""
    if wanted != current or (wanted and not running):
        if current:
            return Restart(TOPICS_CHANGED)
        return Restart(FAILURE if failures else None)
    if running and recreated:
        return Restart(TOPIC_RECREATED)
    if running and largest_batch > started_largest_batch:
        return Restart(RECORD_SIZE)
    return None


def retry_delay(failures: int) -> float:
    """Seconds before the next attempt after ``failures`` failed ones in a row: doubling from
    2 s, at most :data:`MAX_RETRY_SECONDS`."""
    return min(MAX_RETRY_SECONDS, 2.0 ** min(failures, 6))
