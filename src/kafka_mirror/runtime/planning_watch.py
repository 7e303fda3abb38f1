"""Micro-batch mode: a query that asks the source for its offsets for seconds.

Before each micro-batch Spark asks the source for its partitions' end offsets. A topic deleted
while mirrored makes that wait: Kafka's consumer asks for the deleted partitions again and
again until ``spark.network.timeout``, and no batch of the flow's other topics is planned
meanwhile. The flow then reads its topics at once (not at the next refresh, up to
``refresh.topics.interval.seconds`` later) and restarts without the deleted topic. Once per
such wait: a source that is down makes the same wait, and its topics are read at the next
refresh as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# how long a query asks for the source's offsets before the topics are read again
PLANNING_SECONDS = 5.0
# what Spark's micro-batch query says while it asks its sources for their offsets
PLANNING_MESSAGE = "Getting offsets from"


class PlanningWatch:
    """Watches a micro-batch query's status (``StreamingQuery.status``) from tick to tick."""

    def __init__(self, seconds: float = PLANNING_SECONDS) -> None:
        self.seconds = seconds
        self.since: float | None = None  # since when the query asks for offsets
        self._told = False  # the topics were read again for this wait already

    def overdue(self, status: Mapping[str, Any], now: float) -> float | None:
        """How long the query has asked for offsets, the first time that reaches the limit in
        one wait (the topics are to be read again then); None otherwise."""
        if not (status.get("isTriggerActive")
                and str(status.get("message", "")).startswith(PLANNING_MESSAGE)):
            self.since, self._told = None, False
            return None
        if self.since is None:
            self.since = now
            return None
        if self._told or now - self.since < self.seconds:
            return None
        self._told = True
        return now - self.since
