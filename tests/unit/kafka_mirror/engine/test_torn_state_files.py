"""Every JSON file of a flow's state, torn or emptied (a power loss after the file was replaced
but before its data reached the disk): read as what a missing file means, kept beside as
``<name>.unreadable``, named in one warning; never a start that fails every time."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kafka_mirror.engine.acked_positions import AckedPositions
from kafka_mirror.engine.exactly_once import TargetEnds
from kafka_mirror.engine.positions import topic_ids
from kafka_mirror.state.departed import DepartedTopics
from kafka_mirror.state.offset_ranges import OffsetRanges
from kafka_mirror.state.source_epochs import SourceEpochs

READERS: dict[str, tuple[str, Callable[[Path], Any], Any]] = {
    "offset ranges": ("offset-ranges.json", lambda p: OffsetRanges.load(p).partitions, {}),
    "target ends": ("target-ends.json", lambda p: TargetEnds(p).pairs, {}),
    "topic ids": ("topic-ids.json", lambda p: topic_ids(p.parent), {}),
    "source epochs": ("source-epochs.json", lambda p: SourceEpochs(p).epochs, {}),
    "departed topics": ("departed-topics.json",
                        lambda p: DepartedTopics(p, time.time).since, {}),
    "acknowledged positions": ("acked-positions.json",
                               lambda p: AckedPositions(p).positions(), {}),
}


@pytest.mark.parametrize("content", ["", '[{"topic": "a", "parti', "[1]", '"text"'],
                         ids=["empty", "torn", "other-shape", "not-a-collection"])
@pytest.mark.parametrize("reader", sorted(READERS))
def test_an_unreadable_state_file_is_kept_aside_and_named(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, reader: str, content: str,
) -> None:
    name, read, empty = READERS[reader]
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        got = read(path)
    assert got == empty
    assert f"{path} is not readable" in caplog.text
    assert not path.exists()
    assert (tmp_path / f"{name}.unreadable").read_text(encoding="utf-8") == content
    # the next start reads nothing and warns no more
    caplog.clear()
    assert read(path) == empty and "not readable" not in caplog.text


@pytest.mark.parametrize("reader", sorted(READERS))
def test_a_missing_state_file_is_no_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, reader: str,
) -> None:
    name, read, empty = READERS[reader]
    with caplog.at_level(logging.WARNING):
        assert read(tmp_path / name) == empty
    assert caplog.text == ""
