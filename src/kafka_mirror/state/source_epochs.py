"""Per source partition of a flow, the newest leader epoch under which the records below the
flow's position were committed on the source (KIP-320's leader epochs): what tells an unclean
leader election, which takes committed records out of the source's log, from a clean one.

Kept in ``source-epochs.json`` (topic -> partition -> epoch). Written only when an epoch
changes (a leader election, a partition's first batch), durably and before the batch that
moved the position past it can commit, so that after a restart the epoch is never older than
the records below the committed position.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from kafka_mirror.state.files import read_json, write_json

FILE = "source-epochs.json"

Partition = tuple[str, int]


class SourceEpochs:
    """The leader epochs of one flow's source partitions."""

    def __init__(self, path: Path) -> None:
        self.path = path
        # unreadable: the epochs are learnt again from the next batches (a check is skipped,
        # none is made up)
        self.epochs: dict[Partition, int] = read_json(
            path, lambda loaded: {(str(topic), int(p)): int(epoch)
                                  for topic, parts in loaded.items()
                                  for p, epoch in parts.items()},
            "the source's leader epochs are read again") or {}

    def get(self, tp: Partition) -> int | None:
        return self.epochs.get(tp)

    def update(self, epochs: Mapping[Partition, int]) -> None:
        """Take ``epochs`` (written to disk when one changed)."""
        changed = {tp: e for tp, e in epochs.items() if self.epochs.get(tp) != e}
        if changed:
            self.epochs.update(changed)
            self._save()

    def topics(self) -> set[str]:
        return {topic for topic, _ in self.epochs}

    def drop_topic(self, topic: str) -> None:
        """Forget a topic (deleted, re-created or out of the flow for good)."""
        kept = {tp: e for tp, e in self.epochs.items() if tp[0] != topic}
        if len(kept) != len(self.epochs):
            self.epochs = kept
            self._save()

    def _save(self) -> None:
        data: dict[str, dict[str, int]] = {}
        for (topic, partition), epoch in sorted(self.epochs.items()):
            data.setdefault(topic, {})[str(partition)] = epoch
        write_json(self.path, data, durable=True)
