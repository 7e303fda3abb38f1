"""Topic ACL bindings and an ``A->B`` flow, as the ACL sync tests (with and without clusters)
write them."""

from __future__ import annotations

from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)

from kafka_mirror.config.mm2 import mm2_from_text
from kafka_mirror.config.model import FlowSpec

ALLOW = AclPermissionType.ALLOW
DENY = AclPermissionType.DENY
READ = AclOperation.READ
WRITE = AclOperation.WRITE
ALL = AclOperation.ALL
DESCRIBE = AclOperation.DESCRIBE
TOPIC = ResourceType.TOPIC
LITERAL = ResourcePatternType.LITERAL
PREFIXED = ResourcePatternType.PREFIXED


def make_flow(
    extra: str = "", source: str = "a1:9092", target: str = "b1:9092"
) -> FlowSpec:
    """The flow ``A->B`` between clusters at ``source`` and ``target``, with ``extra`` keys."""
    config = mm2_from_text(
        "clusters = A, B\n"
        f"A.bootstrap.servers = {source}\n"
        f"B.bootstrap.servers = {target}\n"
        "A->B.enabled = true\n" + extra
    )
    return config.flows[0]


def acl(
    name: str,
    operation: AclOperation = READ,
    permission: AclPermissionType = ALLOW,
    principal: str = "User:alice",
    host: str = "*",
    pattern: ResourcePatternType = LITERAL,
    restype: ResourceType = TOPIC,
) -> AclBinding:
    """A binding as written in the tests: by default ALLOW READ on the literal topic ``name``
    for User:alice from any host."""
    return AclBinding(restype, name, pattern, principal, host, operation, permission)
