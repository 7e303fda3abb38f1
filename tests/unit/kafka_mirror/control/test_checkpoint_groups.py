"""Which groups the checkpointer keeps (:mod:`kafka_mirror.control.checkpoints`): a group that left
the source is no longer checkpointed, and its offsets are never committed (re-creating it) on
the target again; the groups that remain go on as before."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from kafka_mirror.config.mm2 import mm2_from_text
from kafka_mirror.control.checkpoints import GroupCheckpointer
from kafka_mirror.state.offset_ranges import CopiedRange, OffsetRanges

FLOW = mm2_from_text(
    "clusters = A, B\nA.bootstrap.servers = a:1\nB.bootstrap.servers = b:1\n"
    "A->B.enabled = true\nsync.group.offsets.enabled = true\n").flows[0]


class FakeSource:
    """The source's groups, each at offset 10 of t[0]."""

    def __init__(self, groups: list[str]) -> None:
        self.groups = groups

    def consumer_groups(self) -> list[str]:
        return list(self.groups)

    def partitions(self, wanted: Callable[[str], bool]) -> list[tuple[str, int]]:
        return [("t", 0)] if wanted("t") else []

    def committed_offsets(self, group: str, partitions: list[tuple[str, int]]
                          ) -> dict[tuple[str, int], tuple[int, str]]:
        return {tp: (10, "") for tp in partitions} if group in self.groups else {}


class FakeTarget:
    """Every group is absent on the target; what is committed there is kept."""

    def __init__(self) -> None:
        self.commits: list[str] = []

    def group_state(self, group: str) -> tuple[str, int]:
        return "ABSENT", 0

    def commit_group_offsets(self, group: str, offsets: dict[Any, Any]) -> None:
        self.commits.append(group)


class FakeWriter:
    def __init__(self) -> None:
        self.written: list[tuple[bytes, bytes]] = []

    def write(self, records: Iterable[tuple[bytes, bytes]], partition: int) -> None:
        self.written.extend(records)


def test_a_group_gone_from_the_source_is_no_longer_checkpointed_nor_committed() -> None:
    source, target, writer = FakeSource(["kept", "deleted"]), FakeTarget(), FakeWriter()
    ranges = OffsetRanges()
    ranges.add("t", 0, CopiedRange(0, 100, 500, 600, True))
    checkpointer = GroupCheckpointer(FLOW, source, target, ranges,  # type: ignore[arg-type]
                                     writer=writer)  # type: ignore[arg-type]
    checkpointer.refresh_groups()
    assert checkpointer.emit() == 2
    assert checkpointer.sync_group_offsets().committed == {"kept": 1, "deleted": 1}

    source.groups = ["kept"]  # "deleted" was deleted on the source
    target.commits.clear()
    checkpointer.refresh_groups()
    assert {key[0] for key in checkpointer.latest} == {"kept"}
    checkpointer.sync_group_offsets()
    assert target.commits == ["kept"]
    written = len(writer.written)
    checkpointer.emit()  # nothing new: the kept group's checkpoint is current
    assert len(writer.written) == written

    source.groups = ["kept", "deleted"]  # a group of that name again: checkpointed again
    checkpointer.refresh_groups()
    assert checkpointer.emit() == 1
    assert {key[0] for key in checkpointer.latest} == {"kept", "deleted"}
