"""The check for unclean leader elections, with a source whose leader epochs and epoch ends the
test sets: a clean election (epoch changed, nothing lost) passes, an unclean one is named with
the offsets lost, and what is kept of the epochs decides what later checks find."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from kafka_mirror.engine.leader_epochs import (
    EPOCH_UNKNOWN,
    NO_DIVERGENCE,
    TruncatedRange,
    UncleanElections,
    stop_reason,
)
from kafka_mirror.state.source_epochs import SourceEpochs

TP = ("t", 0)


class FakeSource:
    """One leader: its end offset and epoch now, and where each older epoch ends in its log."""

    def __init__(self, end: int, epoch: int, epoch_ends: Mapping[int, int] | None = None) -> None:
        self.end, self.epoch = end, epoch
        self.epoch_ends = dict(epoch_ends or {})
        self.asked: list[dict[tuple[str, int], tuple[int, int]]] = []

    def latest(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], tuple[int, int]]:
        return {tp: (self.end, self.epoch) for tp in partitions}

    def divergence(self, marks: Mapping[tuple[str, int], tuple[int, int]]
                   ) -> dict[tuple[str, int], int]:
        self.asked.append(dict(marks))
        out = {}
        for tp, (position, epoch) in marks.items():
            if epoch not in self.epoch_ends:
                out[tp] = EPOCH_UNKNOWN
            else:
                ended = self.epoch_ends[epoch]
                out[tp] = ended if ended < position else NO_DIVERGENCE
        return out


def _check(tmp_path: Path, source: FakeSource, skip: bool = False) -> UncleanElections:
    return UncleanElections(source, SourceEpochs(tmp_path / "epochs.json"), skip_lost=skip)


def test_a_partition_seen_first_is_not_validated_and_its_epoch_is_kept(tmp_path: Path) -> None:
    source = FakeSource(end=100, epoch=3)
    check = _check(tmp_path, source)
    assert check.check_batch({}, {TP: 100}) == []
    assert source.asked == []
    assert SourceEpochs(tmp_path / "epochs.json").get(TP) == 3  # on disk


def test_the_same_epoch_needs_no_question_to_the_leader(tmp_path: Path) -> None:
    source = FakeSource(end=100, epoch=3)
    check = _check(tmp_path, source)
    check.check_batch({}, {TP: 50})
    assert check.check_batch({TP: 50}, {TP: 100}) == []
    assert source.asked == []


def test_a_clean_election_keeps_everything_below_the_position(tmp_path: Path) -> None:
    source = FakeSource(end=50, epoch=0)
    check = _check(tmp_path, source)
    check.check_batch({}, {TP: 50})
    # new leader, epoch 1 from offset 70 on: every record below 50 is in its log
    source.end, source.epoch, source.epoch_ends = 120, 1, {0: 70}
    assert check.check_batch({TP: 50}, {TP: 120}) == []
    assert source.asked == [{TP: (50, 0)}]
    assert check.epochs.get(TP) == 1


def test_an_unclean_election_names_the_offsets_lost(tmp_path: Path) -> None:
    source = FakeSource(end=100, epoch=0)
    check = _check(tmp_path, source)
    check.check_batch({}, {TP: 100})
    # node 2 leads from offset 50 on (epoch 1) and took 80 new records: past the position
    source.end, source.epoch, source.epoch_ends = 130, 1, {0: 50}
    lost = check.check_batch({TP: 100}, {TP: 130})
    assert lost == [TruncatedRange("t", 0, 50, 99)]
    assert "t-0: offsets 50-99" in stop_reason("A", lost)
    # the epoch is not taken: a later check (a restart) finds them again
    assert check.epochs.get(TP) == 0
    again = UncleanElections(source, SourceEpochs(tmp_path / "epochs.json"), skip_lost=False)
    assert again.check_resume({TP: 100}) == [TruncatedRange("t", 0, 50, 99)]


def test_skipped_losses_are_reported_once(tmp_path: Path) -> None:
    source = FakeSource(end=100, epoch=0)
    check = _check(tmp_path, source, skip=True)
    check.check_batch({}, {TP: 100})
    source.end, source.epoch, source.epoch_ends = 130, 1, {0: 50}
    assert check.check_batch({TP: 100}, {TP: 130}) == [TruncatedRange("t", 0, 50, 99)]
    source.end = 140
    assert check.check_batch({TP: 130}, {TP: 140}) == []
    assert check.check_resume({TP: 140}) == []


def test_an_end_behind_the_position_is_a_loss_even_without_a_known_epoch(
    tmp_path: Path,
) -> None:
    source = FakeSource(end=60, epoch=1)
    check = _check(tmp_path, source)
    assert check.check_batch({TP: 100}, {TP: 60}) == [TruncatedRange("t", 0, 60, 99)]


def test_records_planned_and_gone_before_the_batch_read_them(tmp_path: Path) -> None:
    source = FakeSource(end=100, epoch=0)
    check = _check(tmp_path, source)
    check.check_batch({}, {TP: 100})
    # planned up to 150 under epoch 0; the new leader (epoch 1) holds 0-119 of them
    source.end, source.epoch, source.epoch_ends = 120, 1, {0: 120}
    assert check.check_batch({TP: 100}, {TP: 150}) == [TruncatedRange("t", 0, 120, 149)]


def test_a_leader_without_the_epoch_is_not_taken_for_a_loss(tmp_path: Path) -> None:
    source = FakeSource(end=10, epoch=0)
    check = _check(tmp_path, source)
    check.check_batch({}, {TP: 10})
    source.end, source.epoch, source.epoch_ends = 30, 4, {}
    assert check.check_batch({TP: 10}, {TP: 30}) == []


def test_resume_asks_only_about_partitions_whose_epoch_changed(tmp_path: Path) -> None:
    source = FakeSource(end=100, epoch=2)
    check = _check(tmp_path, source)
    check.check_batch({}, {TP: 100, ("t", 1): 100})
    assert check.check_resume({TP: 100, ("t", 1): 100, ("u", 0): 5}) == []
    assert source.asked == []


def test_running_checks_validate_the_positions_of_the_check_before(tmp_path: Path) -> None:
    """Real-time mode: records read after an epoch reading may be of a newer epoch, so each check
    validates the positions acknowledged before the previous one, never the latest."""
    source = FakeSource(end=100, epoch=0)
    check = _check(tmp_path, source)
    assert check.check_positions({}, {TP: 80}) == []  # a run's first check only reads
    assert check.epochs.get(TP) == 0
    # a clean election at 100; the mirror has copied 30 records of epoch 1 since
    source.end, source.epoch, source.epoch_ends = 130, 1, {0: 100}
    assert check.check_positions({TP: 80}, {TP: 130}) == []
    assert source.asked == [{TP: (80, 0)}]
    # (had it taken 130, epoch 0 ending at 100 would have looked like a loss of 100-129)
    # an unclean election: the new leader's log of epoch 1 ends at 110, below what was read
    source.end, source.epoch, source.epoch_ends = 150, 2, {1: 110}
    assert check.check_positions({TP: 130}, {TP: 150}) == [TruncatedRange("t", 0, 110, 129)]
    assert check.epochs.get(TP) == 1  # kept: found again by the next check


def test_running_check_finds_the_source_end_behind_the_positions_checked(tmp_path: Path) -> None:
    source = FakeSource(end=100, epoch=4, epoch_ends={4: 100})
    check = _check(tmp_path, source)
    check.check_positions({}, {TP: 100})
    source.end = 60  # same epoch, log shorter (truncated without a new epoch seen)
    assert check.check_positions({TP: 100}, {TP: 100}) == [TruncatedRange("t", 0, 60, 99)]


def test_a_consumers_truncation_error_names_the_ranges_below_the_positions() -> None:
    from kafka_mirror.engine.leader_epochs import consumer_truncations
    error = ("Job aborted due to stage failure: ...: org.apache.kafka.clients.consumer."
             "LogTruncationException: Truncated partitions detected with divergent offsets "
             "{orders-a-0=OffsetAndMetadata{offset=50, leaderEpoch=0, metadata=''}, "
             "orders-a-3=OffsetAndMetadata{offset=900, leaderEpoch=2, metadata=''}}\n"
             "\tat org.apache.kafka...")
    assert consumer_truncations(error, {("orders-a", 0): 100, ("orders-a", 3): 900}) == [
        TruncatedRange("orders-a", 0, 50, 99)]  # partition 3: nothing copied past 900
    assert consumer_truncations("Job aborted: TimeoutException", {("t", 0): 5}) == []
