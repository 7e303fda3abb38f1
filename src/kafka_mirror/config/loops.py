"""Configurations that would mirror records in a circle, refused before anything runs.

With IdentityReplicationPolicy a topic keeps its name, so MirrorMaker 2's cycle detection (which
reads the source alias from the name) cannot see that ``A->B`` and ``B->A`` pass the same topic
back and forth. Two such flows are refused when some topic name passes both topic filters; the
filters are compared as regular languages (interegular), so the error can name an example.
"""

from __future__ import annotations

from collections.abc import Sequence

import interegular

from kafka_mirror.config.model import FlowSpec
from kafka_mirror.errors import ConfigError
from kafka_mirror.policy import IdentityReplicationPolicy
from kafka_mirror.topic_filter import PRODUCT_TOPICS


def _language(patterns: tuple[str, ...]) -> interegular.FSM | None:
    fsm = None
    for pattern in patterns:
        try:
            one = interegular.parse_pattern(pattern).to_fsm()
        except Exception:  # a construct interegular cannot model (e.g. look-around)
            return None
        fsm = one if fsm is None else fsm.union(one)
    return fsm


def _accepted(flow: FlowSpec) -> interegular.FSM | None:
    include = _language(flow.topic_filter.include)
    exclude = _language(flow.topic_filter.exclude + PRODUCT_TOPICS)
    if include is None:
        return None
    return include if exclude is None else include.difference(exclude)


def _example(fsm: interegular.FSM) -> str:
    for chars in fsm.strings():
        return "".join(str(c) for c in chars)
    return ""


def refuse_identity_loops(flows: Sequence[FlowSpec], origin: str) -> None:
    """Raise :class:`ConfigError` when two opposite identity flows share a topic name."""
    by_name = {(f.source.alias, f.target.alias): f for f in flows}
    for (source, target), flow in sorted(by_name.items()):
        back = by_name.get((target, source))
        if back is None or source > target:
            continue
        if not (
            isinstance(flow.policy, IdentityReplicationPolicy)
            and isinstance(back.policy, IdentityReplicationPolicy)
        ):
            continue
        there, home = _accepted(flow), _accepted(back)
        if there is None or home is None:
            common = None
            example = "(filters too complex to compare: give each direction its own topics)"
        else:
            common = there.intersection(home)
            if common.empty():
                continue
            example = repr(_example(common))
        raise ConfigError(
            f"{flow.name} and {back.name} both use IdentityReplicationPolicy and both mirror "
            f"topic {example}: each record would travel back and forth forever (identity names "
            "carry no source alias, so cycles cannot be detected). Give the two directions "
            "disjoint 'topics' lists, or use DefaultReplicationPolicy",
            source=origin,
            key=f"{flow.name}.topics",
            value=",".join(flow.topic_filter.include),
        )
