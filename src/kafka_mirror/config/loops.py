"""Configurations that would mirror records in a circle, refused before anything runs.

With IdentityReplicationPolicy a topic keeps its name, so MirrorMaker 2's cycle detection (which
reads the source alias from the name) cannot see that ``A->B`` and ``B->A`` pass the same topic
back and forth. Two such flows are refused when some topic name passes both topic filters; the
filters are compared as regular languages (interegular), so the error can name an example.

When a policy class of the user's own is involved, the two flows are probed instead: each one's
name for a topic is shown to the other's cycle detection (``back.policy.is_cycle(name, source)``);
when neither sees where the name came from, the pair counts as an identity pair and the filters
are compared in the same way (exact for a policy that keeps names; for one that renames topics
without naming the source, on the source's names only).
"""

from __future__ import annotations

from collections.abc import Sequence

import interegular

from kafka_mirror.config.model import FlowSpec
from kafka_mirror.errors import ConfigError
from kafka_mirror.mm2.policy import DefaultReplicationPolicy, IdentityReplicationPolicy
from kafka_mirror.mm2.topic_filter import PRODUCT_TOPICS


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


PROBE_TOPIC = "orders"


def _undetected(there: FlowSpec, back: FlowSpec) -> bool:
    """``back`` does not see that ``there``'s name for a topic came from ``there``'s source."""
    name = there.policy.format_remote_topic(there.source.alias, PROBE_TOPIC)
    return not back.policy.is_cycle(name, there.source.alias)


def _names_carry_no_source(flow: FlowSpec, back: FlowSpec) -> bool:
    built_in = (flow.policy, back.policy)
    if all(isinstance(p, DefaultReplicationPolicy) for p in built_in):
        return all(isinstance(p, IdentityReplicationPolicy) for p in built_in)
    return _undetected(flow, back) and _undetected(back, flow)


def refuse_identity_loops(flows: Sequence[FlowSpec], origin: str) -> None:
    """Raise :class:`ConfigError` when two opposite identity flows share a topic name."""
    by_name = {(f.source.alias, f.target.alias): f for f in flows}
    for (source, target), flow in sorted(by_name.items()):
        back = by_name.get((target, source))
        if back is None or source > target:
            continue
        if not _names_carry_no_source(flow, back):
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
        names = sorted({flow.policy.display_name, back.policy.display_name})
        use = f"both use {names[0]}" if len(names) == 1 else f"use {names[0]} and {names[1]}"
        raise ConfigError(
            f"{flow.name} and {back.name} {use} and both mirror "
            f"topic {example}: each record would travel back and forth forever (these names "
            "carry no source alias, so cycles cannot be detected). Give the two directions "
            "disjoint 'topics' lists, or use DefaultReplicationPolicy",
            source=origin,
            key=f"{flow.name}.topics",
            value=",".join(flow.topic_filter.include),
        )
