"""The source's leader epochs a flow keeps: written only when one changes, dropped per topic,
and a torn file read as none known (the epochs are learnt again, no check is made up)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kafka_mirror.state.source_epochs import SourceEpochs


def test_epochs_are_kept_on_disk_and_written_only_when_they_change(tmp_path: Path) -> None:
    path = tmp_path / "source-epochs.json"
    epochs = SourceEpochs(path)
    epochs.update({("a", 0): 1, ("a", 1): 0, ("b", 0): 7})
    assert json.loads(path.read_text()) == {"a": {"0": 1, "1": 0}, "b": {"0": 7}}
    path.unlink()
    epochs.update({("a", 0): 1})  # nothing changed: nothing written
    assert not path.exists()
    epochs.update({("a", 0): 1, ("b", 0): 7})
    assert not path.exists()
    epochs.update({("a", 0): 2})
    assert json.loads(path.read_text()) == {"a": {"0": 2, "1": 0}, "b": {"0": 7}}
    assert SourceEpochs(path).get(("b", 0)) == 7
    assert SourceEpochs(path).topics() == {"a", "b"}
    epochs.drop_topic("a")
    assert SourceEpochs(path).epochs == {("b", 0): 7}


def test_a_torn_file_is_read_as_no_epoch_known(tmp_path: Path,
                                               caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "source-epochs.json"
    path.write_text('{"a": {"0": ')
    assert SourceEpochs(path).epochs == {}
    assert "not readable" in caplog.text
