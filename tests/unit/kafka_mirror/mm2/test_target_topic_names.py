"""How each replication policy has a flow's query name target topics (the engine builds the
column from it: tests/engine/test_target_records.py runs it)."""

from __future__ import annotations

from kafka_mirror.mm2.policy import (
    DefaultReplicationPolicy,
    IdentityReplicationPolicy,
    TargetTopicNames,
)


def test_the_default_policy_prefixes_every_name() -> None:
    names = DefaultReplicationPolicy().target_topic_names("A", ["orders"])
    assert names == TargetTopicNames(prefix="A.")
    assert [names.target(t) for t in ("orders", "heartbeats")] == ["A.orders", "A.heartbeats"]


def test_the_identity_policy_prefixes_only_heartbeats_topics() -> None:
    names = IdentityReplicationPolicy().target_topic_names("A", ["orders"])
    # a name that ends with the heartbeats topic's, as MM2's looksLikeHeartbeat tests; not a
    # pattern (a name with SQL LIKE's wildcards in it is no heartbeats topic)
    assert [names.target(t) for t in ("orders", "heartbeats", "B.heartbeats", "heartbeats.x",
                                      "x_heartbeats", "%")] == [
        "orders", "A.heartbeats", "A.B.heartbeats", "heartbeats.x", "A.x_heartbeats", "%"]
    assert names.target("x_heartbeats") == IdentityReplicationPolicy().format_remote_topic(
        "A", "x_heartbeats")


def test_names_given_per_topic_name_no_other() -> None:
    names = TargetTopicNames(names={"a": "b"})
    assert (names.target("a"), names.target("c")) == ("b", None)
