"""Which consumer groups a flow checkpoints: allow and deny regex lists over whole group ids."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from kafka_mirror.mm2.topic_filter import NameFilter

# MirrorMaker 2's DefaultGroupFilter exclusions (groups.exclude).
DEFAULT_GROUPS_EXCLUDE = (r"console-consumer-.*", r"connect-.*", r"__.*")
# Groups kafka-mirror itself commits to (the lag groups), never checkpointed.
PRODUCT_GROUPS = (r"kafka-mirror\..*",)


@dataclass(frozen=True)
class GroupFilter(NameFilter):
    """Which groups a flow checkpoints (``groups``, ``groups.exclude``)."""

    exclude: tuple[str, ...] = DEFAULT_GROUPS_EXCLUDE
    ALWAYS_EXCLUDED: ClassVar[tuple[str, ...]] = PRODUCT_GROUPS

    def should_sync(self, group: str) -> bool:
        return self.passes(group)
