"""Topic ACL sync as MirrorMaker 2 does it, between two real clusters with the KRaft
StandardAuthorizer (and one without an authorizer). The plan and the sync against failing
clients, without clusters: tests/unit/kafka_mirror/control/test_acl_sync_cases.py."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)
from mirror_process import running

from kafka_mirror.control.acl_sync import AclSync
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
from kafka_mirror_testing.localcluster import LocalKafkaCluster

AUTHORIZER = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "allow.everyone.if.no.acl.found": "true",
}


# ------------------------------------------------------------------------- real clusters
def _describe_all(admin: Any) -> set[AclBinding]:
    every = AclBindingFilter(ResourceType.ANY, cast(str, None), ResourcePatternType.ANY,
                             cast(str, None), cast(str, None), AclOperation.ANY,
                             AclPermissionType.ANY)
    return set(admin.describe_acls(every, request_timeout=30).result())


def _wait_visible(admin: Any, bindings: set[AclBinding], timeout: float = 15.0) -> set[AclBinding]:
    """All bindings of the cluster, once ``bindings`` are among them.

    CreateAcls is answered by the controller; DescribeAcls by the broker's metadata image,
    which follows a moment later.
    """
    deadline = time.monotonic() + timeout
    while True:
        found = _describe_all(admin)
        if bindings <= found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def _create(admin: Any, bindings: list[AclBinding]) -> None:
    for future in admin.create_acls(bindings, request_timeout=30).values():
        future.result()
    _wait_visible(admin, set(bindings))


@pytest.fixture
def acl_clusters(tmp_path: Path) -> Iterator[tuple[LocalKafkaCluster, LocalKafkaCluster]]:
    """Two clusters with the StandardAuthorizer, started in parallel.

    The test's clients run as User:ANONYMOUS: a super user on the source; on the target it may
    do anything while no CLUSTER ACL exists (``allow.everyone.if.no.acl.found``), which lets
    the test take ALTER away from it at the end.
    """
    source = LocalKafkaCluster("aclsource", tmp_path, heap="384m",
                               server_overrides={**AUTHORIZER, "super.users": "User:ANONYMOUS"})
    target = LocalKafkaCluster("acltarget", tmp_path, heap="384m", server_overrides=AUTHORIZER)
    with running((source, target)):
        yield source, target


@pytest.mark.kafka
def test_topic_acls_are_synced_to_a_real_cluster_like_mm2(
    acl_clusters: tuple[LocalKafkaCluster, LocalKafkaCluster], caplog: pytest.LogCaptureFixture,
) -> None:
    source_cluster, target_cluster = acl_clusters
    for topic in ("orders", "payments", "secret"):
        source_cluster.create_topic(topic)
    flow = make_flow("topics = orders, payments, secret, [*]\ntopics.exclude = secret\n",
                     source_cluster.bootstrap, target_cluster.bootstrap)
    source_admin, target_admin = source_cluster.admin(), target_cluster.admin()
    _create(source_admin, [
        acl("orders", READ, ALLOW, "User:alice"),
        acl("orders", WRITE, ALLOW, "User:alice"),  # dropped
        acl("orders", WRITE, DENY, "User:mallory"),
        acl("payments", ALL, ALLOW, "User:bob", "127.0.0.1"),  # -> READ
        acl("payments", ALL, DENY, "User:mallory"),
        acl("pay", READ, ALLOW, "User:carol", pattern=PREFIXED),  # dropped
        acl("g1", READ, ALLOW, "User:alice", restype=ResourceType.GROUP),  # dropped
        acl("secret", READ, ALLOW, "User:alice"),  # excluded topic: dropped
        acl("*", DESCRIBE, ALLOW, "User:dave"),  # -> LITERAL "A.*"
    ])
    already = [acl("A.orders", READ, ALLOW, "User:alice"),  # already synced: not created again
               acl("unrelated", READ, ALLOW, "User:zoe")]  # kept: sync never deletes
    _create(target_admin, already)
    synced = {
        acl("A.orders", READ, ALLOW, "User:alice"),
        acl("A.orders", WRITE, DENY, "User:mallory"),
        acl("A.payments", READ, ALLOW, "User:bob", "127.0.0.1"),
        acl("A.payments", ALL, DENY, "User:mallory"),
        acl("A.*", DESCRIBE, ALLOW, "User:dave"),
    }

    sync = AclSync(flow, ClusterAdmin(flow.source), ClusterAdmin(flow.target))
    with caplog.at_level(logging.INFO, logger="kafka_mirror.control.acl_sync"):
        assert sync.run() == len(synced) - 1
    assert _wait_visible(target_admin, synced) == synced | set(already)
    assert "created ACL on cluster 'B': User:bob ALLOW READ on topic A.payments" in caplog.text
    assert sync.run() == 0  # idempotent

    # a new source ACL, but the mirror's principal may no longer ALTER the target cluster:
    # a warning naming the target, nothing created, nothing raised
    _create(target_admin, [
        acl("kafka-cluster", ALL, ALLOW, "User:ANONYMOUS", restype=ResourceType.BROKER),
        acl("kafka-cluster", AclOperation.ALTER, DENY, "User:ANONYMOUS",
            restype=ResourceType.BROKER),
    ])
    _create(source_admin, [acl("orders", DESCRIBE, ALLOW, "User:erin")])
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="kafka_mirror.control.acl_sync"):
        assert sync.run() == 0
    assert "cannot create topic ACLs on the target cluster 'B'" in caplog.text
    assert acl("A.orders", DESCRIBE, ALLOW, "User:erin") not in _describe_all(target_admin)


@pytest.mark.kafka
def test_source_without_authorizer_is_skipped_with_one_log(
    source_cluster: LocalKafkaCluster, destination_cluster: LocalKafkaCluster,
    caplog: pytest.LogCaptureFixture,
) -> None:
    flow = make_flow("", source_cluster.bootstrap, destination_cluster.bootstrap)
    sync = AclSync(flow, ClusterAdmin(flow.source), ClusterAdmin(flow.target))
    with caplog.at_level(logging.INFO, logger="kafka_mirror.control.acl_sync"):
        assert sync.run() == 0
        assert sync.run() == 0
    messages = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]
    assert len(messages) == 1, messages
    assert "no ACL authorizer is configured on the source cluster 'A'" in messages[0]
