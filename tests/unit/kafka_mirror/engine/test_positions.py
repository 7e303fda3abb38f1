"""Checkpoint generations and starting offsets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kafka_mirror.engine.positions import (
    FlowState,
    TopicIdsUnknown,
    committed_positions,
    ids_to_record,
    recreated_topics,
    starting_offsets,
)


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


def test_topic_ids_kept_per_generation_until_a_new_one_commits(tmp_path: Path) -> None:
    """A generation records the topic IDs it mirrors; the IDs that go with the resumed
    positions are those of the generation that committed them, so a crash before the new
    topic's first commit still sees the old ID (and never applies old positions to the new
    topic)."""
    state = FlowState(tmp_path / "flow")
    first = state.new_generation({"t": "id-1", "u": "id-u"})
    _batch(first, 0, {"t": {"0": 40}, "u": {"0": 2}}, commit=True)
    state.new_generation({"t": "id-2", "u": "id-u"})  # t re-created; crashed before a commit
    positions, ids = state.last_committed() or ({}, {})
    assert positions == {("t", 0): 40, ("u", 0): 2} and ids == {"t": "id-1", "u": "id-u"}
    assert recreated_topics(ids, {"t": "id-2", "u": "id-u"}) == {"t": ("id-1", "id-2")}
    third = state.new_generation({"t": "id-2", "u": "id-u"})
    _batch(third, 0, {"t": {"0": 5}, "u": {"0": 3}}, commit=True)
    assert state.last_committed() == ({("t", 0): 5, ("u", 0): 3}, {"t": "id-2", "u": "id-u"})


def test_recreated_only_when_both_ids_are_known() -> None:
    assert recreated_topics({"t": "a"}, {"t": "a"}) == {}
    assert recreated_topics({}, {"t": "b"}) == {}  # a generation from before topic IDs
    assert recreated_topics({"t": "a"}, {}) == {}  # IDs not readable now
    assert recreated_topics({"t": "a", "u": "c"}, {"t": "b", "u": "c"}) == {"t": ("a", "b")}


def test_a_generation_never_starts_without_the_ids_of_its_topics() -> None:
    """A topic deleted between the listing and the ID read (or IDs not read at all) holds the
    start back: recorded without its ID, a re-creation could never be found again."""
    assert ids_to_record(["u", "t"], {"t": "a", "u": "c"}, None, {}) == {"t": "a", "u": "c"}
    with pytest.raises(TopicIdsUnknown, match=r"^source topic t not found when its query was to "
                                              r"start \(deleted meanwhile\?\)"):
        ids_to_record(["t", "u"], {"u": "c"}, None, {"t": "a"})
    with pytest.raises(TopicIdsUnknown, match=r"^source topic IDs not read \(timed out\)"):
        ids_to_record(["t"], {}, "timed out", {})
    assert ids_to_record(["t"], None, None, {"t": "a"}) == {}  # no topic IDs (before 2.8)


def test_a_generation_remembers_the_ids_of_topics_gone_from_it(tmp_path: Path) -> None:
    """Deleted, a topic leaves the next generation; created again later under its name, the
    remembered old ID is what tells it is a new topic (its old positions and offset translation
    are dropped)."""
    state = FlowState(tmp_path / "flow")
    first = state.new_generation({"t": "a", "u": "c"})
    _batch(first, 0, {"t": {"0": 200}, "u": {"0": 2}}, commit=True)
    # t deleted: the next generation mirrors u only
    ids = ids_to_record(["u"], {"u": "c"}, None, state.newest_topic_ids())
    assert ids == {"t": "a", "u": "c"}
    second = state.new_generation(ids)
    _batch(second, 0, {"u": {"0": 3}}, commit=True)
    # t created again: its new ID differs from the one remembered with the last commit
    positions, known = state.last_committed() or ({}, {})
    assert positions == {("u", 0): 3}
    assert recreated_topics(known, {"t": "b", "u": "c"}) == {"t": ("a", "b")}


def test_starting_offsets_cover_every_partition() -> None:
    known = {("a", 0): 10, ("a", 1): 11}
    spec = json.loads(starting_offsets({"a": 3, "b": 1}, known, "latest"))
    # known partitions resume; a new partition and a new topic start at the earliest offset
    assert spec == {"a": {"0": 10, "1": 11, "2": -2}, "b": {"0": -2}}
    assert json.loads(starting_offsets({"a": 1}, None, "latest")) == {"a": {"0": -1}}
    assert json.loads(starting_offsets({"a": 1}, None, "earliest")) == {"a": {"0": -2}}
