"""Topic ACLs copied to the target as MirrorMaker 2 does it (``sync.topic.acls.enabled``).

MM2's rule (``MirrorSourceConnector.syncTopicAcls``): every LITERAL TOPIC binding of the source
whose topic the flow replicates is created on the target for the remote topic name, except
ALLOW WRITE (only the mirror writes there); ALLOW ALL is narrowed to ALLOW READ. PREFIXED
bindings and GROUP, CLUSTER and TRANSACTIONAL_ID ACLs are never copied, and nothing is ever
deleted on the target.

Planning is a pure function of both clusters' bindings (testable, and what a dry run prints);
applying the plan is a separate step.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from enum import Enum
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ConfigResource,
    ResourcePatternType,
    ResourceType,
)

from kafka_mirror.config.model import FlowSpec
from kafka_mirror.kafka.admin import ClusterAdmin

log = logging.getLogger(__name__)

REQUEST_TIMEOUT_SECONDS = 30.0
# Broker answers that mean "this principal may not do that": retried at the next interval.
AUTHORIZATION_CODES = frozenset(
    {
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
    }
)


def any_topic_acl() -> AclBindingFilter:
    """MM2's ``ANY_TOPIC_ACL``: TOPIC resources, any name, pattern ANY, any entry."""
    # None matches any name, principal and host (confluent-kafka's annotations say str)
    anything: Any = None
    return AclBindingFilter(
        ResourceType.TOPIC, anything, ResourcePatternType.ANY,
        anything, anything, AclOperation.ANY, AclPermissionType.ANY,
    )


def target_binding(flow: FlowSpec, binding: AclBinding) -> AclBinding | None:
    """The binding ``binding`` of the source becomes on the target, or None if not copied."""
    if binding.restype != ResourceType.TOPIC:
        return None
    if binding.resource_pattern_type != ResourcePatternType.LITERAL:
        return None
    if (
        binding.permission_type == AclPermissionType.ALLOW
        and binding.operation == AclOperation.WRITE
    ):
        return None
    # the wildcard "*" is LITERAL too: it is tested and renamed like a topic name
    if not flow.should_mirror(binding.name):
        return None
    operation = binding.operation
    if binding.permission_type == AclPermissionType.ALLOW and operation == AclOperation.ALL:
        operation = AclOperation.READ
    return AclBinding(
        ResourceType.TOPIC,
        flow.target_topic(binding.name),
        ResourcePatternType.LITERAL,
        binding.principal,
        binding.host,
        operation,
        binding.permission_type,
    )


def plan_acls(
    flow: FlowSpec,
    source_bindings: Sequence[AclBinding],
    existing_target: Sequence[AclBinding],
) -> list[AclBinding]:
    """The bindings to create on the target that it does not hold yet (sorted, no duplicates)."""
    existing = set(existing_target)
    planned: set[AclBinding] = set()
    for binding in source_bindings:
        wanted = target_binding(flow, binding)
        if wanted is not None and wanted not in existing:
            planned.add(wanted)
    return sorted(planned)


def _error(exc: BaseException) -> KafkaError | None:
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0]
    return None


def _code(exc: BaseException) -> int | None:
    error = _error(exc)
    return error.code() if error is not None else None


def _reason(exc: BaseException) -> str:
    error = _error(exc)
    return error.str() if error is not None else str(exc)


def _name(value: object) -> str:
    return value.name if isinstance(value, Enum) else str(value)


def describe(binding: AclBinding) -> str:
    """``User:alice ALLOW READ on topic A.orders (host *)``."""
    return (
        f"{binding.principal} {_name(binding.permission_type)} {_name(binding.operation)} "
        f"on topic {binding.name} (host {binding.host})"
    )


class AclSync:
    """Copies a flow's topic ACLs from its source to its target cluster, add-only."""

    def __init__(self, flow: FlowSpec, source: ClusterAdmin, target: ClusterAdmin) -> None:
        self.flow = flow
        self.source = source
        self.target = target
        self._no_source_authorizer_logged = False
        self._no_target_authorizer_logged = False

    def _describe(self, admin: ClusterAdmin) -> list[AclBinding]:
        future = admin.client.describe_acls(
            any_topic_acl(), request_timeout=REQUEST_TIMEOUT_SECONDS
        )
        result: list[AclBinding] = future.result()
        return result

    def source_bindings(self) -> list[AclBinding] | None:
        """Every topic binding of the source, or None when it cannot be read (logged)."""
        try:
            bindings = self._describe(self.source)
            # librdkafka drops DescribeAcls' error code (SECURITY_DISABLED when the cluster has
            # no authorizer, CLUSTER_AUTHORIZATION_FAILED when DESCRIBE is denied): both come
            # back as an empty list, so an empty list is looked into
            reason = None if bindings else self._why_empty(self.source)
        except KafkaException as exc:
            reason = "no-authorizer" if _code(exc) == KafkaError.SECURITY_DISABLED else None
            if reason is None:
                self._source_failed(exc)
                return None
        if reason == "no-authorizer":
            self._log_no_source_authorizer()
            return None
        if reason == "denied":
            log.warning(
                "%s: cannot describe topic ACLs on the source cluster '%s' (the mirror's "
                "principal needs DESCRIBE on the cluster); retrying at the next interval",
                self.flow.name, self.flow.source.alias,
            )
            return None
        return bindings

    @staticmethod
    def _why_empty(admin: ClusterAdmin) -> str | None:
        """Why a cluster listed no ACLs: "no-authorizer", "denied", or None (it has none, or it
        cannot be told)."""
        try:
            cluster = admin.client.describe_cluster(
                include_authorized_operations=True, request_timeout=REQUEST_TIMEOUT_SECONDS
            ).result()
            # without an authorizer every operation is listed; None means DESCRIBE was denied
            if cluster.authorized_operations is None:
                return "denied"
            if not cluster.nodes:
                return None
            resource = ConfigResource(ConfigResource.Type.BROKER, str(cluster.nodes[0].id))
            configs = admin.client.describe_configs(
                [resource], request_timeout=REQUEST_TIMEOUT_SECONDS
            )[resource].result()
        except KafkaException:
            return None  # e.g. DESCRIBE_CONFIGS denied: the empty list is taken as it is
        entry = configs.get("authorizer.class.name")
        return "no-authorizer" if entry is not None and not entry.value else None

    def _log_no_source_authorizer(self) -> None:
        alias = self.flow.source.alias
        if self._no_source_authorizer_logged:
            log.debug("%s: still no ACL authorizer on cluster '%s'", self.flow.name, alias)
            return
        self._no_source_authorizer_logged = True
        log.info(
            "%s: no ACL authorizer is configured on the source cluster '%s', so no topic ACL "
            "syncing will take place (set sync.topic.acls.enabled = false to stop trying)",
            self.flow.name, alias,
        )

    def _source_failed(self, exc: KafkaException) -> None:
        alias = self.flow.source.alias
        if _code(exc) in AUTHORIZATION_CODES:
            log.warning(
                "%s: cannot describe topic ACLs on the source cluster '%s' (the mirror's "
                "principal needs DESCRIBE on the cluster): %s; retrying at the next interval",
                self.flow.name, alias, _reason(exc),
            )
        else:
            log.warning(
                "%s: cannot describe topic ACLs on the source cluster '%s': %s; retrying "
                "at the next interval",
                self.flow.name, alias, _reason(exc),
            )

    def plan(self) -> list[AclBinding] | None:
        """The bindings to create, or None when either side cannot be read (logged)."""
        source = self.source_bindings()
        if source is None:
            return None
        if not any(target_binding(self.flow, b) is not None for b in source):
            return []
        try:
            existing = self._describe(self.target)
        except KafkaException as exc:
            self._target_failed("describe topic ACLs", "DESCRIBE", exc)
            return None
        return plan_acls(self.flow, source, existing)

    def apply(self, bindings: list[AclBinding]) -> list[AclBinding]:
        """Create ``bindings`` on the target; return those created."""
        if not bindings:
            return []
        try:
            futures = self.target.client.create_acls(
                bindings, request_timeout=REQUEST_TIMEOUT_SECONDS
            )
        except KafkaException as exc:
            self._target_failed("create topic ACLs", "ALTER", exc)
            return []
        created: list[AclBinding] = []
        denied: BaseException | None = None
        for binding, future in futures.items():
            try:
                future.result()
            except KafkaException as exc:
                code = _code(exc)
                if code in AUTHORIZATION_CODES or code == KafkaError.SECURITY_DISABLED:
                    denied = denied or exc
                else:
                    log.warning(
                        "%s: could not create ACL %s on cluster '%s': %s",
                        self.flow.name, describe(binding), self.flow.target.alias, _reason(exc),
                    )
                continue
            created.append(binding)
            log.info(
                "%s: created ACL on cluster '%s': %s",
                self.flow.name, self.flow.target.alias, describe(binding),
            )
        if denied is not None:
            self._target_failed("create topic ACLs", "ALTER", denied)
        return created

    def run(self) -> int:
        """One sync pass; the number of bindings created. Kafka errors are logged (warnings
        naming the cluster), not raised: the next interval tries again."""
        plan = self.plan()
        if not plan:
            return 0
        return len(self.apply(plan))

    def _target_failed(self, action: str, operation: str, exc: BaseException) -> None:
        alias = self.flow.target.alias
        code = _code(exc)
        if code == KafkaError.SECURITY_DISABLED:
            if not self._no_target_authorizer_logged:
                self._no_target_authorizer_logged = True
                log.warning(
                    "%s: the source cluster '%s' has topic ACLs but the target cluster '%s' has "
                    "no ACL authorizer, so they cannot be synced",
                    self.flow.name, self.flow.source.alias, alias,
                )
            return
        if code in AUTHORIZATION_CODES:
            log.warning(
                "%s: cannot %s on the target cluster '%s' (the mirror's principal needs %s on "
                "the cluster): %s; retrying at the next interval",
                self.flow.name, action, alias, operation, _reason(exc),
            )
            return
        log.warning(
            "%s: cannot %s on the target cluster '%s': %s; retrying at the next interval",
            self.flow.name, action, alias, _reason(exc),
        )
