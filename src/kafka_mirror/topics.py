"""Destination topics that match their sources: same partitions, synced safe configs.

Planning is a pure function of what both clusters hold (testable, and what a dry run prints);
applying the plan is a separate step.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
)

from kafka_mirror.admin import ClusterAdmin
from kafka_mirror.config.model import FlowSpec
from kafka_mirror.errors import TopicLayoutError

log = logging.getLogger(__name__)

# Never copied (MirrorMaker 2's defaults plus the timestamp settings fidelity depends on).
NEVER_SYNCED = (
    r"follower\.replication\.throttled\.replicas",
    r"leader\.replication\.throttled\.replicas",
    r"message\.timestamp\..*",
    r"unclean\.leader\.election\.enable",
    r"min\.insync\.replicas",
)
# Set on every destination topic: the source's timestamps are written as CreateTime.
TARGET_FIXED_CONFIGS = {"message.timestamp.type": "CreateTime"}


@dataclass(frozen=True)
class TopicPlan:
    """What one source topic needs on the target."""

    source_topic: str
    target_topic: str
    partitions: int
    target_partitions: int | None
    configs: Mapping[str, str] = field(default_factory=dict)
    config_changes: Mapping[str, str] = field(default_factory=dict)

    @property
    def action(self) -> str:
        if self.target_partitions is None:
            return "create"
        if self.target_partitions < self.partitions:
            return "grow"
        if self.config_changes:
            return "configure"
        return "unchanged"


def synced_configs(flow: FlowSpec, source_configs: Mapping[str, str]) -> dict[str, str]:
    """The subset of a source topic's explicitly set configs that is copied."""
    excluded = re.compile("|".join(NEVER_SYNCED + flow.config_properties_exclude))
    return {k: v for k, v in source_configs.items() if not excluded.fullmatch(k)}


def plan_topics(
    flow: FlowSpec,
    source_partitions: Mapping[str, int],
    target_partitions: Mapping[str, int],
    source_configs: Mapping[str, Mapping[str, str]],
    target_configs: Mapping[str, Mapping[str, str]],
) -> list[TopicPlan]:
    """Plan the target side for every source topic the flow mirrors."""
    plans = []
    for topic in sorted(source_partitions):
        if not flow.should_mirror(topic):
            continue
        target = flow.target_topic(topic)
        configs = (
            synced_configs(flow, source_configs.get(topic, {})) if flow.sync_topic_configs else {}
        )
        existing = target_partitions.get(target)
        changes: dict[str, str] = {}
        if existing is not None:
            current = target_configs.get(target, {})
            changes = {k: v for k, v in configs.items() if current.get(k) != v}
        plans.append(
            TopicPlan(
                source_topic=topic,
                target_topic=target,
                partitions=source_partitions[topic],
                target_partitions=existing,
                configs=configs,
                config_changes=changes,
            )
        )
    return plans


def explicit_configs(admin: ClusterAdmin, topics: list[str]) -> dict[str, dict[str, str]]:
    """Each topic's configs that were set on the topic itself (not broker defaults)."""
    if not topics:
        return {}
    resources = [ConfigResource(ConfigResource.Type.TOPIC, t) for t in topics]
    out: dict[str, dict[str, str]] = {}
    for resource, future in admin.client.describe_configs(resources).items():
        entries: dict[str, ConfigEntry] = future.result()
        out[resource.name] = {
            name: entry.value
            for name, entry in entries.items()
            if ConfigSource(entry.source) == ConfigSource.DYNAMIC_TOPIC_CONFIG
            and entry.value is not None
            and not entry.is_sensitive
        }
    return out


class TopicSync:
    """Keeps a flow's destination topics in line with its source topics."""

    def __init__(self, flow: FlowSpec, source: ClusterAdmin, target: ClusterAdmin) -> None:
        self.flow = flow
        self.source = source
        self.target = target

    def plan(self) -> list[TopicPlan]:
        source_parts = self.source.topic_partitions()
        target_parts = self.target.topic_partitions()
        selected = [t for t in source_parts if self.flow.should_mirror(t)]
        source_cfg = explicit_configs(self.source, selected) if self.flow.sync_topic_configs else {}
        existing = [
            self.flow.target_topic(t) for t in selected if self.flow.target_topic(t) in target_parts
        ]
        target_cfg = explicit_configs(self.target, existing) if self.flow.sync_topic_configs else {}
        return plan_topics(self.flow, source_parts, target_parts, source_cfg, target_cfg)

    def apply(self, plans: list[TopicPlan]) -> list[TopicPlan]:
        """Create, grow and configure target topics; return the plans that were acted on."""
        self._create([p for p in plans if p.action == "create"])
        self._grow([p for p in plans if p.action == "grow"])
        self._configure([p for p in plans if p.config_changes and p.target_partitions is not None])
        self._check_layout([p for p in plans if p.action in ("create", "grow")])
        for plan in plans:
            if plan.target_partitions is not None and plan.target_partitions > plan.partitions:
                log.warning(
                    "%s: target topic %s has %d partitions, source %s has %d; partitions "
                    "beyond the source's stay empty",
                    self.flow.name, plan.target_topic, plan.target_partitions,
                    plan.source_topic, plan.partitions,
                )
        return [p for p in plans if p.action != "unchanged"]

    def sync(self) -> list[TopicPlan]:
        return self.apply(self.plan())

    def _create(self, plans: list[TopicPlan]) -> None:
        if not plans:
            return
        new = [
            NewTopic(
                p.target_topic,
                num_partitions=p.partitions,
                replication_factor=self.flow.replication_factor,
                config=dict(p.configs) | TARGET_FIXED_CONFIGS,
            )
            for p in plans
        ]
        for name, future in self.target.client.create_topics(new).items():
            try:
                future.result()
                log.info("%s: created topic %s", self.flow.name, name)
            except Exception as exc:
                if "TOPIC_ALREADY_EXISTS" in str(exc) or "already exists" in str(exc):
                    continue
                raise TopicLayoutError(
                    f"{self.flow.name}: cannot create target topic '{name}' on cluster "
                    f"'{self.flow.target.alias}': {exc}"
                ) from exc

    def _grow(self, plans: list[TopicPlan]) -> None:
        if not plans:
            return
        requests = [NewPartitions(p.target_topic, p.partitions) for p in plans]
        by_name = {p.target_topic: p for p in plans}
        for name, future in self.target.client.create_partitions(requests).items():
            plan = by_name[name]
            try:
                future.result()
                log.info(
                    "%s: grew topic %s from %s to %d partitions",
                    self.flow.name, name, plan.target_partitions, plan.partitions,
                )
            except Exception as exc:
                raise TopicLayoutError(
                    f"{self.flow.name}: target topic '{name}' on cluster "
                    f"'{self.flow.target.alias}' has {plan.target_partitions} partitions, "
                    f"source topic '{plan.source_topic}' has {plan.partitions}, and it cannot "
                    f"be grown: {exc}"
                ) from exc

    def _check_layout(self, plans: list[TopicPlan], wait_seconds: float = 30.0) -> None:
        """Every created or grown topic must now have at least the source's partitions.

        Metadata reaches every broker a little after a change, so this waits for it.
        """
        if not plans:
            return
        deadline = time.monotonic() + wait_seconds
        while True:
            actual = self.target.topic_partitions()
            if all(actual.get(p.target_topic, 0) >= p.partitions for p in plans):
                return
            if time.monotonic() >= deadline:
                break
            time.sleep(0.5)
        for plan in plans:
            count = actual.get(plan.target_topic)
            if count is None:
                raise TopicLayoutError(
                    f"{self.flow.name}: target topic '{plan.target_topic}' is not visible on "
                    f"cluster '{self.flow.target.alias}' after creating it (is DESCRIBE "
                    "on the topic allowed?)"
                )
            if count < plan.partitions:
                raise TopicLayoutError(
                    f"{self.flow.name}: target topic '{plan.target_topic}' on cluster "
                    f"'{self.flow.target.alias}' has {count} partitions, source topic "
                    f"'{plan.source_topic}' has {plan.partitions}, and it cannot be grown"
                )

    def _configure(self, plans: list[TopicPlan]) -> None:
        if not plans:
            return
        resources = [
            ConfigResource(
                ConfigResource.Type.TOPIC,
                p.target_topic,
                incremental_configs=[
                    ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
                    for k, v in p.config_changes.items()
                ],
            )
            for p in plans
        ]
        for resource, future in self.target.client.incremental_alter_configs(resources).items():
            try:
                future.result()
                log.info("%s: synced configs of topic %s", self.flow.name, resource.name)
            except Exception as exc:
                log.warning(
                    "%s: could not sync configs of %s: %s", self.flow.name, resource.name, exc
                )
