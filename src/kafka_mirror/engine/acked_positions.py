"""Real-time mode's positions: where each source partition's acknowledged records end.

A real-time batch lasts ``mirror.realtime.batch.duration.ms``, and Spark commits its positions
only at its end. The interceptor, though, reports every record the target acknowledged
(:mod:`kafka_mirror.engine.realtime`), and a query run reads each partition in order from where
it started: the end of the newest range a run reported is a position every record before which
is on the target (acks=all). These positions are saved at every drain (about once a second), so

- a stop (SIGTERM, a topic change) need not wait for the batch's end: the query stops, its
  producer delivers what it had sent, and the next run resumes after the last acknowledged
  record (nothing is written twice);
- after a crash (``kill -9``) at most the records acknowledged since the last save are written
  again, not a whole batch duration;
- the lag group moves with the acknowledged records, not only at batch ends.

The file is real-time mode's only: a micro-batch run clears it (its exactly-once restart
measures the target around its own committed batches).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from kafka_mirror.config.model import FlowSpec
from kafka_mirror.engine.batch_writer import BatchWritten
from kafka_mirror.engine.positions import FlowState, Positions
from kafka_mirror.state.files import EncodedRows, read_json

FILE = "acked-positions.json"


def copied_positions(flow_dir: Path) -> Positions | None:
    """Where a flow's copy ends by its state directory ``flow_dir``, in either mode: the last
    committed batch's positions, each moved on to the acknowledged one where that is further
    (real-time mode, whose batches commit minutes apart); None when neither exists."""
    return AckedPositions(flow_dir / FILE).resume(FlowState(flow_dir).last_positions())


class AckedPositions:
    """Per source partition, the offset after the last record the target acknowledged (or where
    the run started, when it has copied nothing there yet); a write hook (real-time flows only),
    saved atomically whenever it moved."""

    def __init__(self, path: Path,
                 moved: Callable[[FlowSpec, Positions], None] | None = None) -> None:
        self.path = path
        # called with the flow's positions whenever they moved (the lag group follows them)
        self.moved = moved
        self._lock = threading.Lock()
        # unreadable: never ahead of what was copied, the flow resumes at its last committed
        # batch (records since are written again, none is skipped)
        self._positions: Positions = read_json(
            path, lambda entries: {(e["topic"], int(e["partition"])): int(e["offset"])
                                   for e in entries},
            "resuming at the last committed batch") or {}
        self._rows = EncodedRows()
        self._unsaved = False  # moved since the last save that succeeded
        for key in self._positions:
            self._encode(key)

    def positions(self) -> Positions:
        with self._lock:
            return dict(self._positions)

    def on_written(self, event: BatchWritten) -> None:
        with self._lock:
            ends: Positions = {}
            for copy in event.copies:
                key = (copy.topic, copy.partition)
                ends[key] = max(copy.copied.source_end, ends.get(key, -1))
            self._move(ends)
            # raises while the disk refuses (a full state disk): made again at the next drain,
            # and the lag group told then (it was told only with a save of a move, and positions
            # that moved during the outage were never reported once space was freed)
            saved = self._save_unsaved()
            positions = dict(self._positions)
        if saved and self.moved is not None:
            self.moved(event.flow, positions)

    def seed(self, start: Positions) -> None:
        """A run starts at ``start``: partitions move there where they are behind."""
        with self._lock:
            self._move(start)
            self._save_unsaved()

    def _move(self, offsets: Positions) -> None:
        """Moves partitions forward (never back), to be saved."""
        moved = {key: offset for key, offset in offsets.items()
                 if offset > self._positions.get(key, -1)}
        self._positions.update(moved)
        for key in moved:
            self._encode(key)
        self._unsaved |= bool(moved)

    def _save_unsaved(self) -> bool:
        """Saves what moved since the last save; True when it did."""
        if not self._unsaved:
            return False
        self._save()
        self._unsaved = False
        return True

    def resume(self, known: Positions | None) -> Positions | None:
        """``known`` (the last committed batch's positions), each partition moved on to the
        acknowledged position when that is further; the acknowledged ones alone when there is
        no committed batch yet (None when neither exists)."""
        with self._lock:
            if known is None and not self._positions:
                return None
            merged = dict(known or {})
            for key, offset in self._positions.items():
                merged[key] = max(offset, merged.get(key, -1))
            return merged

    def topics(self) -> set[str]:
        with self._lock:
            return {topic for topic, _ in self._positions}

    def drop_topic(self, topic: str) -> None:
        """A source topic was deleted and created again, or its state's time is up: its old
        positions mean nothing."""
        with self._lock:
            dropped = [k for k in self._positions if k[0] == topic]
            for key in dropped:
                del self._positions[key]
                self._rows.drop(key)
            if dropped:
                self._save()

    def clear(self) -> None:
        with self._lock:
            self._positions.clear()
            self._rows.clear()
            self._unsaved = False
            self.path.unlink(missing_ok=True)

    def _encode(self, key: tuple[str, int]) -> None:
        self._rows.set(key, {"topic": key[0], "partition": key[1],
                             "offset": self._positions[key]})

    def _save(self) -> None:
        if not self._positions:
            self.path.unlink(missing_ok=True)
            return
        self._rows.save(self.path)
