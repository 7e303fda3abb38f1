"""Which consumer groups a flow checkpoints: allow and deny regex lists over whole group ids."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kafka_mirror.topic_filter import regex_union

# MirrorMaker 2's DefaultGroupFilter exclusions (groups.exclude).
DEFAULT_GROUPS_EXCLUDE = (r"console-consumer-.*", r"connect-.*", r"__.*")
# Groups kafka-mirror itself commits to (the lag groups), never checkpointed.
PRODUCT_GROUPS = (r"kafka-mirror\..*",)


@dataclass(frozen=True)
class GroupFilter:
    """A group is synced when some allow and no deny regex matches its whole id."""

    include: tuple[str, ...] = (".*",)
    exclude: tuple[str, ...] = DEFAULT_GROUPS_EXCLUDE
    _include: re.Pattern[str] | None = field(init=False, repr=False, compare=False)
    _exclude: re.Pattern[str] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_include", regex_union(self.include))
        object.__setattr__(self, "_exclude", regex_union(self.exclude + PRODUCT_GROUPS))

    def should_sync(self, group: str) -> bool:
        if self._include is None or not self._include.fullmatch(group):
            return False
        return not (self._exclude is not None and self._exclude.fullmatch(group))
