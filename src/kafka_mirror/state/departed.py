"""Since when source topics have been out of a flow (deleted on the source or no longer
selected), so that what the flow keeps about each of them (offset translation, exactly-once
restart records, acknowledged positions, its topic ID) goes once ``mirror.topic.state.retention.ms``
has passed: a flow whose topics come and go keeps the state of the topics it mirrors and of
those that left it lately, not of every topic it ever mirrored.

Kept in a file of the flow's state (``departed-topics.json``: topic -> milliseconds since the
epoch when it was first seen out of the flow), so that restarts do not start the wait over.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from pathlib import Path

from kafka_mirror.state.files import read_json, write_json

DEPARTED_FILE = "departed-topics.json"


class DepartedTopics:
    """The topics out of one flow, with when each was first seen out of it."""

    def __init__(self, path: Path, clock: Callable[[], float] = time.time) -> None:
        self.path = path
        self.clock = clock
        # unreadable: the wait starts over (state is kept longer, never dropped early)
        self.since: dict[str, int] = read_json(
            path, lambda loaded: {str(topic): int(ms) for topic, ms in loaded.items()},
            "the topics out of the flow are timed again") or {}

    def expired(self, mirrored: Collection[str], kept: Collection[str],
                retention_ms: int) -> list[str]:
        """Of ``kept`` (the topics the flow has state of), note those not ``mirrored`` now and
        forget those mirrored again; return those out of the flow for ``retention_ms`` or
        longer, whose state is to be dropped (they are no longer timed after this)."""
        now = int(self.clock() * 1000)
        since = {topic: self.since.get(topic, now) for topic in kept if topic not in mirrored}
        expired = sorted(topic for topic, ms in since.items() if now - ms >= retention_ms)
        for topic in expired:
            del since[topic]
        if since != self.since:
            self.since = since
            write_json(self.path, dict(sorted(since.items())))
        return expired
