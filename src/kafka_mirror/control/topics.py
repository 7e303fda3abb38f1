"""Destination topics that match their sources: same partitions, synced safe configs.

Planning is a pure function of what both clusters hold (testable, and what a dry run prints);
applying the plan is a separate step.

As in MirrorMaker 2, a destination topic is created with the source topic's own configs (less
the excluded ones) whether or not configs are synced; ``sync.topic.configs.enabled`` decides
whether existing destination topics are kept in line. On top of MM2, a destination topic must
not change or refuse records: ``message.timestamp.type=LogAppendTime`` and a ``max.message.bytes``
below the source's are corrected when configs are synced (or the mirror created the topic), and
reported otherwise.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)

from kafka_mirror.config.model import FlowSpec
from kafka_mirror.control.destination_checks import Misalignment, misalignments, remedy
from kafka_mirror.control.topic_configs import TopicConfigs, describe_topic_configs
from kafka_mirror.errors import TopicLayoutError
from kafka_mirror.kafka.admin import ClusterAdmin

log = logging.getLogger(__name__)

# Never copied (MirrorMaker 2's defaults plus the timestamp settings fidelity depends on).
NEVER_SYNCED = (
    r"follower\.replication\.throttled\.replicas",
    r"leader\.replication\.throttled\.replicas",
    r"message\.timestamp\..*",
    r"log\.message\.timestamp\..*",
    r"unclean\.leader\.election\.enable",
    r"min\.insync\.replicas",
)
# Set on every destination topic: the source's timestamps are written as CreateTime.
TARGET_FIXED_CONFIGS = {"message.timestamp.type": "CreateTime"}
CONFIG_WAIT_SECONDS = 15.0
# told what changed on the target: (kind, count), kind one of topics_created,
# partitions_added, topic_config_syncs
TopicChanged = Callable[[str, int], None]


T = TypeVar("T")

# A KRaft controller refuses a CreateTopics or CreatePartitions request for more than 10,000
# partitions in all (ReplicationControlManager.MAX_PARTITIONS_PER_BATCH, PolicyViolation
# "Excessively large number of partitions per request."): the mirror asks in smaller requests.
PARTITIONS_PER_REQUEST = 5_000


def partition_batches(items: Sequence[T], partitions: Callable[[T], int],
                      limit: int = PARTITIONS_PER_REQUEST) -> list[list[T]]:
    """``items`` in order, in batches of at most ``limit`` partitions each (an item with more
    on its own)."""
    batches: list[list[T]] = []
    size = limit
    for item in items:
        count = max(0, partitions(item))
        if not batches or size + count > limit:
            batches.append([])
            size = 0
        batches[-1].append(item)
        size += count
    return batches


@dataclass(frozen=True)
class TopicPlan:
    """What one source topic needs on the target."""

    source_topic: str
    target_topic: str
    partitions: int
    target_partitions: int | None
    configs: Mapping[str, str] = field(default_factory=dict)
    config_changes: Mapping[str, str] = field(default_factory=dict)
    # what is wrong with the existing destination topic; fixed by config_changes when
    # ``fixes`` holds, reported otherwise
    problems: tuple[Misalignment, ...] = ()
    fixes: bool = False
    source_max_message_bytes: int | None = None

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
    source_configs: Mapping[str, TopicConfigs],
    target_configs: Mapping[str, TopicConfigs],
    created: Collection[str] = (),
) -> list[TopicPlan]:
    """Plan the target side for every source topic the flow mirrors. ``created``: target topics
    this mirror just created (their problems are fixed even when configs are not synced)."""
    plans = []
    for topic in sorted(source_partitions):
        if not flow.should_mirror(topic):
            continue
        target = flow.target_topic(topic)
        source = source_configs.get(topic, TopicConfigs())
        configs = synced_configs(flow, source.explicit)
        existing = target_partitions.get(target)
        changes: dict[str, str] = {}
        problems: list[Misalignment] = []
        fixes = flow.sync_topic_configs or target in created
        if existing is not None and target in target_configs:
            current = target_configs[target]
            if flow.sync_topic_configs:
                changes = {k: v for k, v in configs.items() if current.explicit.get(k) != v}
            problems = misalignments(topic, target, source, current)
            if fixes:
                changes |= {p.key: p.wanted for p in problems}
        plans.append(
            TopicPlan(
                source_topic=topic,
                target_topic=target,
                partitions=source_partitions[topic],
                target_partitions=existing,
                configs=configs,
                config_changes=changes,
                problems=tuple(problems),
                fixes=fixes,
                source_max_message_bytes=source.max_message_bytes,
            )
        )
    return plans


class TopicSync:
    """Keeps a flow's destination topics in line with its source topics."""

    def __init__(self, flow: FlowSpec, source: ClusterAdmin, target: ClusterAdmin,
                 changed: TopicChanged | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.flow = flow
        self.source = source
        self.target = target
        self.changed = changed
        self._reported: set[str] = set()  # problems warned about (once each)
        self._clock = clock
        # topic configs as last described, per cluster: described again every
        # sync.topic.configs.interval.seconds (as MirrorMaker 2 syncs them), a new topic and a
        # target topic configured since at the next plan
        self._configs: dict[str, dict[str, TopicConfigs]] = {"source": {}, "target": {}}
        self._configs_due = 0.0

    def _changed(self, kind: str, count: int) -> None:
        if self.changed is not None and count > 0:
            self.changed(kind, count)

    def plan(self, created: Collection[str] = ()) -> list[TopicPlan]:
        source_parts = self.source.topic_partitions()
        target_parts = self.target.topic_partitions()
        selected = [t for t in source_parts if self.flow.should_mirror(t)]
        existing = [
            self.flow.target_topic(t) for t in selected if self.flow.target_topic(t) in target_parts
        ]
        now = self._clock()
        due = now >= self._configs_due
        if due:
            interval = self.flow.sync_topic_configs_interval_seconds
            self._configs_due = now + interval if interval >= 0 else float("inf")
        source_cfg = self._described("source", self.source, selected, due)
        target_cfg = self._described("target", self.target, existing, due)
        # a source topic no broker described yet (just created) is planned at the next refresh
        source_parts = {t: n for t, n in source_parts.items()
                        if t in source_cfg or not self.flow.should_mirror(t)}
        return plan_topics(self.flow, source_parts, target_parts, source_cfg, target_cfg,
                           created)

    def _described(self, cluster: str, admin: ClusterAdmin, topics: list[str], every: bool
                   ) -> dict[str, TopicConfigs]:
        """The configs of ``topics``: those known, the others (``every``: all) described now; a
        topic known before that the answering broker does not know keeps what was known."""
        known = self._configs[cluster]
        known.update(describe_topic_configs(
            admin, [t for t in topics if every or t not in known]))
        wanted = set(topics)
        for gone in [t for t in known if t not in wanted]:
            del known[gone]
        return dict(known)

    def apply(self, plans: list[TopicPlan]) -> set[str]:
        """Create, grow and configure target topics; return the target topics created."""
        created = self._create([p for p in plans if p.action == "create"])
        self._grow([p for p in plans if p.action == "grow"])
        configured = [p for p in plans if p.config_changes and p.target_partitions is not None]
        failed = self._configure(configured)
        for plan in configured:  # described again at the next plan (retried if it failed)
            self._configs["target"].pop(plan.target_topic, None)
        self._check_layout([p for p in plans if p.action in ("create", "grow")])
        self._await_configs([p for p in configured if p.target_topic not in failed])
        for plan in plans:
            if plan.target_partitions is not None and plan.target_partitions > plan.partitions:
                log.warning(
                    "%s: target topic %s has %d partitions, source %s has %d; partitions "
                    "beyond the source's stay empty",
                    self.flow.name, plan.target_topic, plan.target_partitions,
                    plan.source_topic, plan.partitions,
                )
            self._report(plan, failed.get(plan.target_topic))
        return created

    def sync(self) -> list[TopicPlan]:
        """Apply the plan and return it. Topics it meant to create are planned once more (the
        size limit of those it created comes from the destination broker unless the source topic
        sets its own; the others existed after all), so that they are checked and aligned too
        before any record is written."""
        plans = self.plan()
        created = self.apply(plans)
        if any(p.action == "create" for p in plans):
            try:
                again = self.plan(created)
            except Exception as exc:  # metadata of new topics can lag behind on some brokers
                log.warning("%s: configs of the topics just created not checked yet (%s); "
                            "checked at the next refresh", self.flow.name, exc)
                return plans
            self.apply(again)
            return again
        return plans

    def _report(self, plan: TopicPlan, error: str | None) -> None:
        for problem in plan.problems:
            if plan.fixes and error is None:
                log.info("%s: %s; set %s=%s", self.flow.name, problem.problem, problem.key,
                         problem.wanted)
                self._reported.discard(problem.problem)
                continue
            if problem.problem in self._reported:
                continue
            self._reported.add(problem.problem)
            if error is not None:
                why = f"it could not be changed ({error}): {remedy(problem)}"
            else:
                why = (
                    "topic configs are not synced (sync.topic.configs.enabled=false): "
                    + remedy(problem)
                )
            log.warning("%s: %s; %s", self.flow.name, problem.problem, why)

    def _create(self, plans: list[TopicPlan]) -> set[str]:
        """Create the topics; return those created (not those another client created first)."""
        created: set[str] = set()
        if not plans:
            return created
        new = [
            NewTopic(
                p.target_topic,
                num_partitions=p.partitions,
                replication_factor=self.flow.replication_factor,
                config=dict(p.configs) | TARGET_FIXED_CONFIGS,
            )
            for p in plans
        ]
        futures = {}
        for batch in partition_batches(new, lambda topic: topic.num_partitions):
            futures.update(self.target.client.create_topics(batch))
        for name, future in futures.items():
            try:
                future.result()
                created.add(name)
                log.info("%s: created topic %s", self.flow.name, name)
            except Exception as exc:
                if "TOPIC_ALREADY_EXISTS" in str(exc) or "already exists" in str(exc):
                    continue
                self._changed("topics_created", len(created))
                raise TopicLayoutError(
                    f"{self.flow.name}: cannot create target topic '{name}' on cluster "
                    f"'{self.flow.target.alias}': {exc}"
                ) from exc
        self._changed("topics_created", len(created))
        return created

    def _grow(self, plans: list[TopicPlan]) -> None:
        if not plans:
            return
        by_name = {p.target_topic: p for p in plans}
        futures = {}
        for batch in partition_batches(plans, lambda p: p.partitions - (p.target_partitions or 0)):
            futures.update(self.target.client.create_partitions(
                [NewPartitions(p.target_topic, p.partitions) for p in batch]))
        for name, future in futures.items():
            plan = by_name[name]
            try:
                future.result()
                log.info(
                    "%s: grew topic %s from %s to %d partitions",
                    self.flow.name, name, plan.target_partitions, plan.partitions,
                )
                self._changed("partitions_added", plan.partitions - (plan.target_partitions or 0))
            except Exception as exc:
                raise TopicLayoutError(
                    f"{self.flow.name}: target topic '{name}' on cluster "
                    f"'{self.flow.target.alias}' has {plan.target_partitions} partitions, "
                    f"source topic '{plan.source_topic}' has {plan.partitions}, and it cannot "
                    f"be grown: {exc}"
                ) from exc

    def _check_layout(self, plans: list[TopicPlan], wait_seconds: float = 30.0) -> None:
        """Every created or grown topic must now have at least the source's partitions.

        Metadata reaches every broker a little after a change, so this waits for it: up to
        ``wait_seconds`` plus a second per 50 partitions without progress (a broker makes
        thousands of new partitions visible at once, after minutes on a small host).
        """
        if not plans:
            return
        wait_seconds += sum(p.partitions for p in plans) / 50
        deadline = time.monotonic() + wait_seconds
        seen = -1
        while True:
            actual = self.target.topic_partitions()
            visible = sum(min(actual.get(p.target_topic, 0), p.partitions) for p in plans)
            if visible >= sum(p.partitions for p in plans):
                return
            if visible > seen:  # progress: the brokers are still creating them
                seen, deadline = visible, time.monotonic() + wait_seconds
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

    def _configure(self, plans: list[TopicPlan]) -> dict[str, str]:
        """Set the planned configs; return why it failed, per target topic."""
        if not plans:
            return {}
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
        failed: dict[str, str] = {}
        for resource, future in self.target.client.incremental_alter_configs(resources).items():
            try:
                future.result()
                log.info("%s: synced configs of topic %s", self.flow.name, resource.name)
                self._changed("topic_config_syncs", 1)
            except Exception as exc:
                failed[resource.name] = str(exc)
                # retried at every refresh; warned about once per topic and reason
                problem = f"configs of {resource.name}: {exc}"
                level = logging.DEBUG if problem in self._reported else logging.WARNING
                self._reported.add(problem)
                log.log(level, "%s: could not sync configs of %s: %s", self.flow.name,
                        resource.name, exc)
        return failed

    def _await_configs(self, plans: list[TopicPlan]) -> None:
        """Wait (a little) until the changed configs are in effect, so that the first records
        written meet them."""
        if not plans:
            return
        deadline = time.monotonic() + CONFIG_WAIT_SECONDS
        pending = {p.target_topic: p.config_changes for p in plans}
        while pending and time.monotonic() < deadline:
            try:
                current = describe_topic_configs(self.target, sorted(pending), wait=0)
            except Exception as exc:
                log.debug("%s: configs not described yet: %s", self.flow.name, exc)
                current = {}
            pending = {
                topic: wanted for topic, wanted in pending.items()
                if topic not in current
                or any(current[topic].effective.get(k) != v for k, v in wanted.items())
            }
            if pending:
                time.sleep(0.3)
