"""Topic ACL sync as MirrorMaker 2 does it (:mod:`kafka_mirror.control.acl_sync`): the plan, and
the sync against clients that fail as brokers do. (Between real clusters:
tests/engine/test_acl_sync.py.)"""

from __future__ import annotations

import logging
from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any, cast

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    ResourceType,
)

from kafka_mirror.control.acl_sync import AclSync, plan_acls
from kafka_mirror.kafka.admin import ClusterAdmin
from kafka_mirror_testing.acls import (
    ALL,
    ALLOW,
    DENY,
    DESCRIBE,
    PREFIXED,
    READ,
    WRITE,
    acl,
    make_flow,
)


# ------------------------------------------------------------------------------ plan_acls
def test_allow_write_is_dropped_deny_write_kept() -> None:
    flow = make_flow()
    planned = plan_acls(flow, [acl("t", WRITE, ALLOW), acl("t", WRITE, DENY, "User:eve")], [])
    assert planned == [acl("A.t", WRITE, DENY, "User:eve")]


def test_allow_all_becomes_allow_read_keeping_principal_and_host() -> None:
    flow = make_flow()
    planned = plan_acls(flow, [acl("t", ALL, ALLOW, "User:bob", "10.0.0.1")], [])
    assert planned == [acl("A.t", READ, ALLOW, "User:bob", "10.0.0.1")]


def test_deny_all_and_other_operations_are_unchanged() -> None:
    flow = make_flow()
    source = [
        acl("t", ALL, DENY),
        acl("t", DESCRIBE, ALLOW),
        acl("t", AclOperation.ALTER_CONFIGS, DENY),
        acl("t", AclOperation.DELETE, ALLOW, host="192.168.1.1"),
    ]
    assert plan_acls(flow, source, []) == sorted([
        acl("A.t", ALL, DENY),
        acl("A.t", DESCRIBE, ALLOW),
        acl("A.t", AclOperation.ALTER_CONFIGS, DENY),
        acl("A.t", AclOperation.DELETE, ALLOW, host="192.168.1.1"),
    ])


def test_prefixed_and_non_topic_bindings_are_dropped() -> None:
    flow = make_flow()
    source = [
        acl("t", pattern=PREFIXED),
        acl("g1", restype=ResourceType.GROUP),
        acl("kafka-cluster", AclOperation.ALTER, restype=ResourceType.BROKER),
        acl("tx", WRITE, restype=ResourceType.TRANSACTIONAL_ID),
    ]
    assert plan_acls(flow, source, []) == []


def test_topics_the_flow_does_not_mirror_are_dropped() -> None:
    flow = make_flow("topics = orders.*\ntopics.exclude = orders-secret\n")
    source = [acl("orders"), acl("orders-secret"), acl("payments"), acl("B.orders2")]
    assert plan_acls(flow, source, []) == [acl("A.orders")]


def test_internal_and_cycle_topics_are_dropped() -> None:
    flow = make_flow()
    source = [
        acl("__consumer_offsets"),
        acl("__transaction_state", DESCRIBE),
        acl(".hidden"),
        acl("mm2-offsets.A.internal"),
        acl("mm2-offset-syncs.B.internal"),
        acl("A.checkpoints.internal"),
        acl("B.orders"),  # came from the target: a cycle
        acl("C.orders"),  # came from a third cluster: mirrored on
    ]
    assert plan_acls(flow, source, []) == [acl("A.C.orders")]


def test_wildcard_is_a_literal_name_renamed_like_a_topic() -> None:
    # MM2 has no special case for "*": it passes the default filter (.*) and is renamed by
    # formatRemoteTopic, so the target gets a LITERAL binding on the name "A.*" (which matches
    # only a topic called exactly that, not every remote topic)
    source = [acl("*", DESCRIBE), acl("*", ALL, principal="User:bob"), acl("*", WRITE)]
    assert plan_acls(make_flow(), source, []) == [
        acl("A.*", DESCRIBE), acl("A.*", READ, principal="User:bob"),
    ]
    # with the identity policy it stays the wildcard on the target
    identity = make_flow(
        "replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy\n"
    )
    assert plan_acls(identity, [acl("*", DESCRIBE)], []) == [acl("*", DESCRIBE)]
    # a filter that does not match the name "*" drops it
    assert plan_acls(make_flow("topics = orders\n"), [acl("*", DESCRIBE)], []) == []


def test_renaming_default_separator_and_identity_policies() -> None:
    source = [acl("orders"), acl("payments", DESCRIBE, DENY, "User:bob")]
    assert plan_acls(make_flow(), source, []) == [
        acl("A.orders"), acl("A.payments", DESCRIBE, DENY, "User:bob"),
    ]
    underscore = make_flow("replication.policy.separator = _\n")
    assert plan_acls(underscore, [acl("orders")], []) == [acl("A_orders")]
    identity = make_flow(
        "replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy\n"
    )
    assert plan_acls(identity, source, []) == [
        acl("orders"), acl("payments", DESCRIBE, DENY, "User:bob"),
    ]


def test_existing_target_bindings_and_duplicates_are_not_planned_again() -> None:
    flow = make_flow()
    source = [
        acl("t", ALL),  # becomes ALLOW READ ...
        acl("t", READ),  # ... which this gives too: planned once
        acl("t", DESCRIBE),
        acl("u", READ, principal="User:bob"),
    ]
    existing = [acl("A.t", DESCRIBE), acl("A.u", READ, principal="User:carol")]
    assert plan_acls(flow, source, existing) == [
        acl("A.t", READ), acl("A.u", READ, principal="User:bob"),
    ]
    everything = plan_acls(flow, source, [])
    assert plan_acls(flow, source, everything) == []


# ------------------------------------------------------------------ AclSync, failing clients
class _Admin:
    """Stands in for ClusterAdmin: only ``.client`` is used."""

    def __init__(self, client: Any) -> None:
        self.client = client


def _failed(code: int) -> Future[Any]:
    future: Future[Any] = Future()
    future.set_exception(KafkaException(KafkaError(code)))
    return future


def _done(value: Any) -> Future[Any]:
    future: Future[Any] = Future()
    future.set_result(value)
    return future


class _FakeClient:
    def __init__(self, bindings: list[AclBinding] | None = None, describe_error: int = 0,
                 create_error: int = 0, authorizer: str = "StandardAuthorizer",
                 describe_denied: bool = False) -> None:
        self.bindings = bindings or []
        self.authorizer = authorizer
        self.describe_denied = describe_denied
        self.describe_error = describe_error
        self.create_error = create_error
        self.created: list[AclBinding] = []

    def describe_cluster(self, **_kw: Any) -> Future[Any]:
        ops = None if self.describe_denied else [AclOperation.DESCRIBE]
        return _done(SimpleNamespace(authorized_operations=ops, nodes=[SimpleNamespace(id=1)]))

    def describe_configs(self, resources: list[Any], **_kw: Any) -> dict[Any, Future[Any]]:
        entry = SimpleNamespace(value=self.authorizer)
        return {r: _done({"authorizer.class.name": entry}) for r in resources}

    def describe_acls(self, _filter: AclBindingFilter, **_kw: Any) -> Future[Any]:
        if self.describe_error:
            return _failed(self.describe_error)
        return _done(list(self.bindings))

    def create_acls(self, bindings: list[AclBinding], **_kw: Any) -> dict[AclBinding, Future[Any]]:
        if self.create_error:
            return {b: _failed(self.create_error) for b in bindings}
        self.created.extend(bindings)
        self.bindings.extend(bindings)
        return {b: _done(None) for b in bindings}


def _sync(source: _FakeClient, target: _FakeClient) -> AclSync:
    return AclSync(make_flow(), cast(ClusterAdmin, _Admin(source)),
                   cast(ClusterAdmin, _Admin(target)))


def test_target_that_denies_creating_acls_is_a_warning_naming_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    source = _FakeClient([acl("t")])
    target = _FakeClient(create_error=KafkaError.CLUSTER_AUTHORIZATION_FAILED)
    sync = _sync(source, target)
    with caplog.at_level(logging.INFO, logger="kafka_mirror.control.acl_sync"):
        assert sync.run() == 0
        assert sync.run() == 0  # tried again at the next interval
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2
    assert "target cluster 'B'" in warnings[0] and "ALTER" in warnings[0]
    target.create_error = 0
    assert sync.run() == 1
    assert target.created == [acl("A.t")]


def test_target_that_denies_describing_acls_is_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    source = _FakeClient([acl("t")])
    target = _FakeClient(describe_error=KafkaError.CLUSTER_AUTHORIZATION_FAILED)
    with caplog.at_level(logging.WARNING, logger="kafka_mirror.control.acl_sync"):
        assert _sync(source, target).run() == 0
    assert "cannot describe topic ACLs on the target cluster 'B'" in caplog.text
    assert target.created == []


def test_nothing_to_copy_does_not_touch_the_target() -> None:
    source = _FakeClient([acl("t", WRITE), acl("g", restype=ResourceType.GROUP)])
    target = _FakeClient(describe_error=KafkaError.CLUSTER_AUTHORIZATION_FAILED,
                         create_error=KafkaError.CLUSTER_AUTHORIZATION_FAILED)
    assert _sync(source, target).run() == 0


def test_empty_source_listing_is_looked_into(caplog: pytest.LogCaptureFixture) -> None:
    # librdkafka turns "no authorizer" and "DESCRIBE denied" into an empty list
    target = _FakeClient(describe_error=KafkaError.CLUSTER_AUTHORIZATION_FAILED)
    with caplog.at_level(logging.DEBUG, logger="kafka_mirror.control.acl_sync"):
        assert _sync(_FakeClient(describe_denied=True), target).run() == 0
    assert "cannot describe topic ACLs on the source cluster 'A'" in caplog.text
    caplog.clear()
    sync = _sync(_FakeClient(authorizer=""), target)
    with caplog.at_level(logging.INFO, logger="kafka_mirror.control.acl_sync"):
        assert sync.run() == 0
        assert sync.run() == 0
    assert [r.getMessage()[:60] for r in caplog.records] == [
        "A->B: no ACL authorizer is configured on the source cluster 'A'"[:60]
    ]
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="kafka_mirror.control.acl_sync"):
        assert _sync(_FakeClient(), target).run() == 0  # really no ACLs: silent
    assert caplog.records == []
