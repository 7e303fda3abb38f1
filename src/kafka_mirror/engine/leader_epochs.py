"""Unclean leader elections on the source, found with leader epochs (KIP-320).

A clean election keeps every committed record; an unclean one (``unclean.leader.election.enable``)
makes a replica that lacked some of them the leader, and the records written after it take the
offsets of those lost. A mirror past those offsets would skip the new records without a word.

In micro-batch mode, around every batch the flow asks the source, for the partitions the batch
moves, their end offsets and leader epochs (after Spark planned the batch, before it reads it:
every record below the batch's end was committed under that epoch or an older one). When a
partition's epoch changed since the flow last saw it, the current leader is asked where the log
of the epoch the flow knew ends (OffsetsForLeaderEpoch, as a Kafka consumer validates its
position): ending below the flow's position means records the mirror copied are no longer in the
source's log, and the offsets from there on hold other records, or will. A planned end the
source's end fell behind is the same. The same check runs when a flow starts, for the positions
it resumes at.

Real-time mode has no point between planning and reading: every few seconds the flow reads the
epochs again and checks the positions acknowledged before the previous reading (every record
below them was read before then, so under that epoch or an older one). A loss is found a check
or two after the election, not before the records after it are copied; an election while the
flow is stopped is not found (the positions it resumes at may hold records of a later epoch).

Found ranges are named per partition and handled like records deleted before they were mirrored
(``mirror.fail.on.data.loss``): the flow stops for good, or they are reported and skipped.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from kafka_mirror.engine.jvm_admin import number_list, partition_list
from kafka_mirror.engine.jvm_offsets import JvmEndOffsets
from kafka_mirror.engine.jvm_statics import JvmStatics
from kafka_mirror.engine.positions import Positions
from kafka_mirror.state.source_epochs import Partition, SourceEpochs

log = logging.getLogger(__name__)

# what a Kafka consumer that validated its position (KIP-320) says of a truncated log
_TRUNCATED = re.compile(
    r"(?P<topic>[^\s{},=]+)-(?P<partition>\d+)=OffsetAndMetadata\{offset=(?P<offset>\d+)")
_TRUNCATION = "LogTruncationException"
NO_DIVERGENCE = -1
EPOCH_UNKNOWN = -2  # the leader knows no epoch at or below the one asked about


@dataclass(frozen=True)
class TruncatedRange:
    """Offsets ``first``..``last`` of a source partition that were committed on the source and
    are no longer in its log (an unclean leader election)."""

    topic: str
    partition: int
    first: int
    last: int

    def describe(self) -> str:
        offsets = (f"offset {self.first}" if self.first == self.last
                   else f"offsets {self.first}-{self.last}")
        return f"{self.topic}-{self.partition}: {offsets}"


def describe_all(ranges: list[TruncatedRange], limit: int = 20) -> str:
    text = "; ".join(r.describe() for r in ranges[:limit])
    if len(ranges) > limit:
        text += f"; and {len(ranges) - limit} more partitions"
    return text


def stop_reason(source: str, ranges: list[TruncatedRange]) -> str:
    """Why a flow stops for good (``mirror.fail.on.data.loss=true``)."""
    return (f"an unclean leader election on cluster '{source}' took committed records out of "
            f"its log ({describe_all(ranges)}): the mirror copied them or was about to, and the "
            "records written at those offsets since are others; mirror.fail.on.data.loss=true "
            "stops the flow (set it to false to skip them)")


def skip_notice(source: str, ranges: list[TruncatedRange]) -> str:
    """What is reported when the flow goes on (``mirror.fail.on.data.loss=false``)."""
    return (f"an unclean leader election on cluster '{source}' took committed records out of "
            f"its log ({describe_all(ranges)}); records written at those offsets since then "
            "are skipped (mirror.fail.on.data.loss=false)")


def consumer_truncations(error: str, positions: Positions) -> list[TruncatedRange]:
    """The ranges below ``positions`` that a failed query's Kafka consumer found truncated
    (``LogTruncationException``: the leader's log of the epoch of the records it had fetched
    ends at the divergent offset it names). Real-time mode's consumer reads on from there,
    so this is where it learns of an unclean election on the source first."""
    if _TRUNCATION not in error:
        return []
    text = error[error.index(_TRUNCATION):].split("\n", 1)[0]
    found = {}
    for match in _TRUNCATED.finditer(text):
        tp = (match["topic"], int(match["partition"]))
        diverged, position = int(match["offset"]), positions.get(tp, -1)
        if diverged < position:
            found[tp] = TruncatedRange(tp[0], tp[1], diverged, position - 1)
    return [found[tp] for tp in sorted(found)]


class EpochReader(Protocol):
    def latest(self, partitions: list[Partition], timeout: float | None = None
               ) -> dict[Partition, tuple[int, int]]: ...

    def divergence(self, marks: Mapping[Partition, tuple[int, int]]) -> dict[Partition, int]: ...


class JvmLeaderEpochs(JvmEndOffsets):
    """The source's leader epochs (and end offsets) through Kafka's Java clients in the Spark
    driver's JVM (``io.kafkamirror.LeaderEpochs``), with the flow's settings for the source
    cluster."""

    def __init__(self, spark: Any, props: Mapping[str, str], timeout: float = 10.0) -> None:
        super().__init__(spark, dict(props) | {"client.id": "kafka-mirror-epochs"}, timeout)
        self._epochs = JvmStatics(self._jvm, "io.kafkamirror.LeaderEpochs")

    def latest(self, partitions: list[Partition], timeout: float | None = None
               ) -> dict[Partition, tuple[int, int]]:
        """Per partition: (end offset, leader epoch; -1 when the broker gives none), within
        ``timeout`` seconds (the client's own by default)."""
        if not partitions:
            return {}
        wait = self._timeout_ms if timeout is None else int(timeout * 1000)
        text = str(self._epochs.call(
            "latest", self._admin, partition_list(partitions), wait))
        pairs = (item.split(":") for item in text.split(","))
        return {tp: (int(end), int(epoch)) for tp, (end, epoch) in zip(partitions, pairs,
                                                                          strict=True)}

    def divergence(self, marks: Mapping[Partition, tuple[int, int]]) -> dict[Partition, int]:
        """Per partition given (position, epoch): where the current log diverges below the
        position, or NO_DIVERGENCE, or EPOCH_UNKNOWN."""
        if not marks:
            return {}
        order = sorted(marks)
        text = str(self._epochs.call(
            "divergence", self._props, partition_list(order),
            number_list(marks[tp][0] for tp in order),
            number_list(marks[tp][1] for tp in order), self._timeout_ms))
        return dict(zip(order, (int(x) for x in text.split(",")), strict=True))


class UncleanElections:
    """One flow's check for records taken out of the source's log after it read them.

    ``skip_lost``: lost ranges are reported once and the flow goes on (the epochs seen are
    kept); otherwise the partitions with lost ranges keep the epoch they had, so every later
    check (a restart included) finds them again.
    """

    def __init__(self, reader: EpochReader, epochs: SourceEpochs, skip_lost: bool) -> None:
        self.reader = reader
        self.epochs = epochs
        self.skip_lost = skip_lost

    def check_batch(self, start: Positions, end: Positions) -> list[TruncatedRange]:
        """Before a batch reads ``start``..``end`` (Spark's offset log; after it planned them):
        the ranges lost from partitions the batch moves, or whose planned end went back. The
        epochs seen are kept (on disk before the batch can commit)."""
        asked = sorted(tp for tp, offset in end.items() if offset != start.get(tp, -1))
        if not asked:
            return []
        latest = self.reader.latest(asked)
        to_validate: dict[Partition, tuple[int, int]] = {}
        for tp in asked:
            high, epoch = latest[tp]
            known = self.epochs.get(tp)
            position = start.get(tp)
            if position is not None and known is not None and known >= 0 and (
                    epoch != known or end[tp] < position or high < end[tp]):
                to_validate[tp] = (position, known)
        found = {(r.topic, r.partition): r for r in self._validate(to_validate)}
        for tp in asked:
            position, planned, high = start.get(tp), end[tp], latest[tp][0]
            if tp in found:
                continue
            if position is not None and planned < position:
                # Spark saw the source's end behind the flow's position
                found[tp] = TruncatedRange(tp[0], tp[1], planned, position - 1)
            elif high < planned:
                # committed (below the end Spark planned) and gone before the batch read them
                found[tp] = TruncatedRange(tp[0], tp[1], high, planned - 1)
        self._keep(latest, found)
        return [found[tp] for tp in sorted(found)]

    def check_resume(self, positions: Positions) -> list[TruncatedRange]:
        """When a flow starts at ``positions``: the ranges below them lost since it stopped."""
        return self.check_positions(positions, positions)

    def check_positions(self, checked: Positions, current: Positions,
                        read: Mapping[Partition, tuple[int, int]] | None = None
                        ) -> list[TruncatedRange]:
        """The ranges below ``checked`` lost since the epochs kept were read, where every record
        below ``checked`` had been read before then (a start: the positions resumed at; real-time
        mode, every few seconds: the positions acknowledged before the last check). The epochs
        read now (or ``read``: end offsets and epochs the caller read after ``current``, when it
        holds every partition asked about) are kept for the partitions of ``current`` (read
        before them, so the next check may take them as its ``checked``)."""
        asked = sorted(set(current) | set(checked))
        if not asked:
            return []
        latest = (dict(read) if read is not None and all(tp in read for tp in asked)
                  else self.reader.latest(asked))
        changed = {tp: (position, epoch) for tp, position in checked.items()
                   if position > 0 and (epoch := self.epochs.get(tp)) is not None and epoch >= 0
                   and (latest[tp][1] != epoch or latest[tp][0] < position)}
        found = {(r.topic, r.partition): r for r in self._validate(changed)}
        for tp, (position, _) in changed.items():
            if tp not in found and latest[tp][0] < position:
                found[tp] = TruncatedRange(tp[0], tp[1], latest[tp][0], position - 1)
        self._keep(latest, found)
        return [found[tp] for tp in sorted(found)]

    def _keep(self, latest: Mapping[Partition, tuple[int, int]],
              found: Mapping[Partition, TruncatedRange]) -> None:
        self.epochs.update({tp: epoch for tp, (_, epoch) in latest.items()
                            if epoch >= 0 and (self.skip_lost or tp not in found)})

    def _validate(self, marks: Mapping[Partition, tuple[int, int]]) -> list[TruncatedRange]:
        if not marks:
            return []
        lost = []
        for tp, diverged in sorted(self.reader.divergence(marks).items()):
            position = marks[tp][0]
            if diverged == EPOCH_UNKNOWN:
                log.warning("source partition %s-%d: its leader knows no leader epoch up to %d, "
                            "the one its records below offset %d were committed under; not "
                            "checked for an unclean leader election", tp[0], tp[1], marks[tp][1],
                            position)
            elif 0 <= diverged < position:
                lost.append(TruncatedRange(tp[0], tp[1], diverged, position - 1))
        return lost
