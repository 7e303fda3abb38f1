"""Which topics a flow mirrors: allow and deny lists of regexes matching whole names."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import ClassVar

# MirrorMaker 2 4.x's default topics.exclude (3.x had .*[\-\.]internal instead of mm2.*\.internal);
# MM2's own internal topics and names starting with __ or . are never mirrored whatever the
# filter says (ReplicationPolicy.is_internal_topic).
DEFAULT_TOPICS_EXCLUDE = (r"mm2.*\.internal", r".*\.replica", r"__.*")
# What kafka-mirror legacy excludes (MM1 mirrored no internal topics either)
LEGACY_TOPICS_EXCLUDE = (r".*[\-\.]internal", r".*\.replica", r"__.*")
# Topics kafka.mirror itself writes, never mirrored whatever the configuration says.
PRODUCT_TOPICS = (r"kafka-mirror\..*",)


def regex_union(patterns: tuple[str, ...]) -> re.Pattern[str] | None:
    """One compiled pattern matching any of ``patterns`` as a whole name."""
    if not patterns:
        return None
    return re.compile("|".join(f"(?:{p})" for p in patterns))


@dataclass(frozen=True)
class NameFilter:
    """Allow/deny regex lists over whole names (MM2's filters): a name passes when some allow
    and no deny regex matches it, nor one of the class's always-excluded patterns."""

    include: tuple[str, ...] = (".*",)
    exclude: tuple[str, ...] = ()
    ALWAYS_EXCLUDED: ClassVar[tuple[str, ...]] = ()
    _include: re.Pattern[str] | None = field(init=False, repr=False, compare=False)
    _exclude: re.Pattern[str] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_include", regex_union(self.include))
        object.__setattr__(self, "_exclude", regex_union(self.exclude + self.ALWAYS_EXCLUDED))

    def passes(self, name: str) -> bool:
        if self._include is None or not self._include.fullmatch(name):
            return False
        return not (self._exclude is not None and self._exclude.fullmatch(name))


@dataclass(frozen=True)
class TopicFilter(NameFilter):
    """Which topics a flow mirrors (``topics``, ``topics.exclude``)."""

    exclude: tuple[str, ...] = DEFAULT_TOPICS_EXCLUDE
    ALWAYS_EXCLUDED: ClassVar[tuple[str, ...]] = PRODUCT_TOPICS

    def should_mirror(self, topic: str) -> bool:
        return self.passes(topic)
