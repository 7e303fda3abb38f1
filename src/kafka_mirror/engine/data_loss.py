"""Records deleted on the source (retention, deleted records) before the mirror copied them.

A flow resumes each partition at the position it committed; when the source's log now starts
past that position, the records in between are gone. They are found before the query starts,
named per partition, and either stop the flow (``mirror.fail.on.data.loss=true``) or are
reported and skipped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kafka_mirror.engine.positions import Positions


@dataclass(frozen=True)
class DeletedRange:
    """Offsets ``first``..``last`` of a source partition, deleted before they were mirrored."""

    topic: str
    partition: int
    first: int
    last: int

    def describe(self) -> str:
        offsets = (
            f"offset {self.first}" if self.first == self.last
            else f"offsets {self.first}-{self.last}"
        )
        return f"{self.topic}-{self.partition}: {offsets} deleted before they were mirrored"


def deleted_ranges(
    resume: Positions, log_starts: Mapping[tuple[str, int], int]
) -> list[DeletedRange]:
    """Per partition resumed at ``resume``, the offsets below the source's log start."""
    return [
        DeletedRange(topic, partition, position, log_starts[(topic, partition)] - 1)
        for (topic, partition), position in sorted(resume.items())
        if position >= 0 and log_starts.get((topic, partition), -1) > position
    ]


def describe_all(ranges: list[DeletedRange], limit: int = 20) -> str:
    """The ranges, one after another (the first ``limit`` of them, then how many more)."""
    text = "; ".join(r.describe() for r in ranges[:limit])
    if len(ranges) > limit:
        text += f"; and {len(ranges) - limit} more partitions"
    return text
