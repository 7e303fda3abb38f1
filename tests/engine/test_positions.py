"""Checkpoint generations and starting offsets."""

from __future__ import annotations

import json
from pathlib import Path

from kafka_mirror.engine.positions import FlowState, committed_positions, starting_offsets


def _batch(checkpoint: Path, batch: int, offsets: dict[str, dict[str, int]], commit: bool) -> None:
    (checkpoint / "offsets").mkdir(parents=True, exist_ok=True)
    (checkpoint / "commits").mkdir(parents=True, exist_ok=True)
    meta = {"batchWatermarkMs": 0, "batchTimestampMs": 1, "conf": {}}
    (checkpoint / "offsets" / str(batch)).write_text(
        "v1\n" + json.dumps(meta) + "\n" + json.dumps(offsets)
    )
    if commit:
        (checkpoint / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')


def test_committed_positions_ignore_batch_in_flight(tmp_path: Path) -> None:
    _batch(tmp_path, 0, {"t": {"0": 5, "1": 7}}, commit=True)
    _batch(tmp_path, 1, {"t": {"0": 9, "1": 9}}, commit=False)
    assert committed_positions(tmp_path) == {("t", 0): 5, ("t", 1): 7}


def test_generations_seed_from_newest_committed(tmp_path: Path) -> None:
    state = FlowState(tmp_path / "flow")
    assert state.last_positions() is None
    first = state.new_generation()
    _batch(first, 0, {"t": {"0": 3}}, commit=True)
    second = state.new_generation()  # crashed before its first commit
    assert state.last_positions() == {("t", 0): 3}
    third = state.new_generation()
    state.prune(keep=third)
    assert first.exists() and not second.exists() and third.exists()
    _batch(third, 0, {"t": {"0": 8}}, commit=True)
    assert state.last_positions() == {("t", 0): 8}


def test_starting_offsets_cover_every_partition() -> None:
    known = {("a", 0): 10, ("a", 1): 11}
    spec = json.loads(starting_offsets({"a": 3, "b": 1}, known, "latest"))
    # known partitions resume; a new partition and a new topic start at the earliest offset
    assert spec == {"a": {"0": 10, "1": 11, "2": -2}, "b": {"0": -2}}
    assert json.loads(starting_offsets({"a": 1}, None, "latest")) == {"a": {"0": -1}}
    assert json.loads(starting_offsets({"a": 1}, None, "earliest")) == {"a": {"0": -2}}
