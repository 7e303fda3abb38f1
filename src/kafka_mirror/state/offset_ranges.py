"""What the mirror copied where, per source partition, and offset translation that never skips.

After every written batch the mirror knows, for each source partition that moved, the source
range it read ``[source_start, source_end)`` and the target range it wrote
``[target_start, target_end)``, both measured while no other batch of the flow was writing.
When the batch had no offset gaps (every source offset in it was a record: no transaction
markers, aborted or compacted records) and the two ranges have the same length (no replayed
duplicates, no other writer), offsets map one to one. Translation of a group's committed source
offset ``g`` (the next record it would read) then rests on two facts:

1. a range that maps one to one holds record ``g`` at ``target_start + (g - source_start)``, and
   every later record of the source follows it on the target;
2. the target is append-only and the mirror reads each partition in order, so every source record
   at or after a range's ``source_end`` is written (again) after that range, at or after its
   ``target_end``; a range that does not map one to one still puts every record at or after
   ``source_start`` at or after its ``target_start``.

Each range therefore gives a translation that never skips a record, and the largest of them is
the one with the fewest re-reads: exact where offsets map one to one, the batch start where they
do not.
"""

from __future__ import annotations

import threading
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafka_mirror.state.files import EncodedRows, read_json

# per partition; beyond this the two oldest ranges are merged into one that does not map one
# to one (still never skips: it translates to the older one's start), so memory stays bounded
# while recent offsets, where groups usually are, keep their precision
MAX_RANGES = 1_000


@dataclass(frozen=True)
class CopiedRange:
    """Source offsets ``[source_start, source_end)`` were written to ``[target_start,
    target_end)``; ``exact`` when the offsets map one to one."""

    source_start: int
    source_end: int
    target_start: int
    target_end: int
    exact: bool

    def as_dict(self) -> dict[str, int | bool]:
        """The range as the state file holds it (``dataclasses.asdict``'s, without its deep
        copying: thousands of partitions are saved every few seconds)."""
        return {"source_start": self.source_start, "source_end": self.source_end,
                "target_start": self.target_start, "target_end": self.target_end,
                "exact": self.exact}

    def translate(self, offset: int) -> int | None:
        """A target offset at or before the first copy (in this range or later) of every
        source record at or after ``offset``; None when this range says nothing about it."""
        if offset >= self.source_end:
            return self.target_end
        if offset < self.source_start:
            return None
        if self.exact:
            return self.target_start + (offset - self.source_start)
        return self.target_start

    def follows(self, other: CopiedRange) -> bool:
        """True when ``self`` continues ``other`` seamlessly (so both merge into one)."""
        return (
            self.exact
            and other.exact
            and self.source_start == other.source_end
            and self.target_start == other.target_end
        )


class PartitionRanges:
    """The ranges of one source partition, oldest first; seamless ones merged."""

    def __init__(self, ranges: Iterable[CopiedRange] = ()) -> None:
        self.ranges: list[CopiedRange] = list(ranges)

    def add(self, copied: CopiedRange) -> None:
        if self.ranges and _ends(self.ranges[-1], copied):
            return  # recorded already (a restart that counted the same cut batch again)
        if self.ranges and copied.follows(self.ranges[-1]):
            last = self.ranges[-1]
            self.ranges[-1] = CopiedRange(
                last.source_start, copied.source_end, last.target_start, copied.target_end, True
            )
        else:
            self.ranges.append(copied)
        while len(self.ranges) > max(2, MAX_RANGES):
            older, newer = self.ranges[0], self.ranges[1]
            self.ranges[0:2] = [CopiedRange(
                min(older.source_start, newer.source_start),
                max(older.source_end, newer.source_end),
                older.target_start, newer.target_end, False,
            )]

    def translate(self, offset: int) -> int | None:
        best: int | None = None
        for copied in self.ranges:
            candidate = copied.translate(offset)
            if candidate is not None and (best is None or candidate > best):
                best = candidate
        return best


def _ends(last: CopiedRange, copied: CopiedRange) -> bool:
    """Whether ``copied`` is the tail of ``last`` (same ends on both sides, within it)."""
    return (copied.source_end == last.source_end and copied.target_end == last.target_end
            and copied.source_start >= last.source_start
            and copied.target_start >= last.target_start)


class OffsetRanges:
    """Every partition's copied ranges for one flow, keyed by (source topic, partition).

    Safe to share between the batch writer (which adds) and the checkpointer (which reads).
    """

    def __init__(self) -> None:
        self.partitions: dict[tuple[str, int], PartitionRanges] = {}
        self._lock = threading.Lock()
        # one save at a time (the periodic save, a restart's, the rebuild's: one file)
        self._saving = threading.Lock()
        self.dirty = False
        # the file's rows kept encoded: a save encodes the partitions changed since the last
        # (None: all of them), as a real-time drain moves a few of thousands
        self._rows = EncodedRows()
        self._changed: set[tuple[str, int]] | None = None

    def _touched(self, key: tuple[str, int]) -> None:
        self.dirty = True
        if self._changed is not None:
            self._changed.add(key)

    def add(self, topic: str, partition: int, copied: CopiedRange) -> None:
        with self._lock:
            self.partitions.setdefault((topic, partition), PartitionRanges()).add(copied)
            self._touched((topic, partition))

    def merge(self, topic: str, partition: int, facts: Iterable[CopiedRange]) -> None:
        """Add ranges known from elsewhere (offset syncs, positions kept in Kafka) to a
        partition's, in source order (translation takes the largest of all, so a fact never
        makes it skip)."""
        with self._lock:
            known = self.partitions.get((topic, partition))
            merged = PartitionRanges()
            for copied in sorted([*(known.ranges if known else []), *facts],
                                 key=lambda r: (r.source_start, r.target_start, r.source_end)):
                merged.add(copied)
            self.partitions[(topic, partition)] = merged
            self._touched((topic, partition))

    def reaches(self, topic: str, partition: int, position: int) -> bool:
        """Whether the partition's own ranges cover its copies up to ``position``."""
        with self._lock:
            known = self.partitions.get((topic, partition))
            return known is not None and any(
                r.source_end >= position and r.source_end > r.source_start for r in known.ranges)

    def drop_topic(self, topic: str) -> None:
        """Forget a topic's ranges (its offsets now belong to another topic of that name)."""
        with self._lock:
            for key in [k for k in self.partitions if k[0] == topic]:
                del self.partitions[key]
                self._touched(key)

    def topics(self) -> set[str]:
        with self._lock:
            return {topic for topic, _ in self.partitions}

    def translate(self, topic: str, partition: int, offset: int) -> int | None:
        with self._lock:
            ranges = self.partitions.get((topic, partition))
            return None if ranges is None else ranges.translate(offset)

    def items(self) -> Iterator[tuple[tuple[str, int], PartitionRanges]]:
        with self._lock:
            snapshot = [(tp, PartitionRanges(pr.ranges)) for tp, pr in self.partitions.items()]
        yield from snapshot

    # ---------------------------------------------------------------- persistence
    def save(self, path: Path) -> None:
        """Write atomically (a crash leaves the previous file); nothing when unchanged."""
        with self._saving:
            with self._lock:
                if not self.dirty:
                    return
                self.dirty = False
                changed, self._changed = self._changed, set()
                if changed is None:
                    self._rows.clear()
                    changed = set(self.partitions)
                rows = {key: [r.as_dict() for r in self.partitions[key].ranges]
                        if key in self.partitions else None for key in changed}
            for (topic, partition), ranges in rows.items():
                if ranges is None:
                    self._rows.drop((topic, partition))
                else:
                    self._rows.set((topic, partition),
                                   {"topic": topic, "partition": partition, "ranges": ranges})
            self._rows.save(path, durable=True)

    @classmethod
    def load(cls, path: Path) -> OffsetRanges:
        def parse(entries: Any) -> OffsetRanges:
            ranges = cls()
            for entry in entries:
                ranges.partitions[(entry["topic"], int(entry["partition"]))] = PartitionRanges(
                    CopiedRange(**r) for r in entry["ranges"]
                )
            return ranges

        loaded = read_json(path, parse, "offset translation starts again from the next "
                           "batches (checkpoints of older group offsets wait for them)")
        return loaded if loaded is not None else cls()


def ranges_from_syncs(syncs: Sequence[tuple[int, int]], position: int, target_end: int
                      ) -> list[CopiedRange]:
    """What a new writer knows of a partition's earlier copies: ``syncs``, the (source offset,
    target offset) pairs of offset syncs in log order (each a record's two places, written by
    whichever mirror copied it), and the position kept in Kafka (``position``: every source
    record before it is on the target below ``target_end``).

    Only the syncs after the last one that went back on either side (a topic deleted and
    created again, a rewind) count, and only those below the kept pair; each is an exact range
    of one record (a record copied twice has two: translation takes the later copy, after which
    every later record follows it). A sync that goes back but lies between two earlier ones on
    both sides states what they say again (a new writer's proof of records its predecessor
    copied past the positions it kept) and changes nothing. The
    kept pair itself says that every record from ``position`` on lands at or after
    ``target_end``. A group offset between two syncs translates to the record after the
    earlier one: never past where it reads, as MirrorMaker 2's own translation."""
    run: list[tuple[int, int]] = []
    for upstream, downstream in syncs:
        if run and (upstream < run[-1][0] or downstream < run[-1][1]):
            if _restates(run, upstream, downstream):
                continue
            run = []
        if not run or (upstream, downstream) != run[-1]:
            run.append((upstream, downstream))
    facts = [CopiedRange(up, up + 1, down, down + 1, True) for up, down in run
             if up < position and down < target_end]
    facts.append(CopiedRange(position, position, target_end, target_end, False))
    return facts


def _restates(run: Sequence[tuple[int, int]], upstream: int, downstream: int) -> bool:
    """Whether the sync lies between two syncs of ``run`` (ordered on both sides) on both
    sides, or is one of them."""
    below = bisect_right(run, (upstream, downstream))  # the syncs at or below it
    if below == 0 or run[below - 1][1] > downstream:
        return False
    return below == len(run) or (upstream <= run[below][0] and downstream <= run[below][1])
