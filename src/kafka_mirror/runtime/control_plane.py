"""The control plane's assembly: internal topics created, then the periodic tasks (checkpoints,
group offset sync, ACL sync, heartbeats, saving the translation ranges), each registered for
teardown as soon as it exists."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from functools import partial

from kafka_mirror.config.model import HeartbeatSpec
from kafka_mirror.control.acl_sync import AclSync
from kafka_mirror.control.checkpoints import GroupCheckpointer
from kafka_mirror.control.heartbeats import HeartbeatEmitter
from kafka_mirror.kafka.admin import ClusterAdmin
from kafka_mirror.observability.null_metrics import Metrics
from kafka_mirror.runtime.flow import FlowRunner
from kafka_mirror.runtime.periodic import Periodic
from kafka_mirror.runtime.teardown import Teardown

log = logging.getLogger(__name__)


class ControlPlane:
    """The control plane of the process's flows and heartbeats."""

    def __init__(self, admins: Mapping[str, ClusterAdmin], heartbeats: Sequence[HeartbeatSpec],
                 metrics: Metrics, teardown: Teardown) -> None:
        self.admins = admins
        self.heartbeats = heartbeats
        self.metrics = metrics
        self.teardown = teardown
        self.tasks: list[Periodic] = []
        self.checkpointers: list[tuple[GroupCheckpointer, FlowRunner]] = []

    def assemble(self, runners: Mapping[str, FlowRunner]) -> list[Periodic]:
        """Create the internal topics, then the periodic tasks (not started)."""
        for runner in runners.values():
            self._flow(runner)
        for spec in self.heartbeats:
            self.metrics.register_heartbeats(spec)
            emitter = HeartbeatEmitter(spec, self.admins,
                                       partial(self.metrics.heartbeat_delivered, spec))
            self.teardown.emitters.add_waiting(f"{spec.name} heartbeats", emitter.close)
            emitter.start()
            # the pair's flows in this process: heartbeats come from the instance that writes
            # one of them (a standby's would double the stream), from every instance otherwise
            pair = [runner for runner in runners.values()
                    if (runner.flow.source.alias, runner.flow.target.alias)
                    == (spec.source.alias, spec.target.alias)]
            self._task(f"{spec.name} heartbeats", spec.interval,
                       _when_active(pair, emitter.beat) if pair else emitter.beat)
        return self.tasks

    def last_checkpoints_at_stop(self) -> None:
        """Once the flows ran: at the stop, each checkpointer writes the newest positions (for
        consumers that fail over after the stop) before it closes."""
        for checkpointer, runner in self.checkpointers:
            self.teardown.last_checkpoints.add(
                f"last checkpoints of {checkpointer.flow.name}",
                _when_translating(runner, partial(_last_checkpoints, checkpointer)))

    def _task(self, name: str, interval: float, action: Callable[[], object],
              first_delay: float = 0.0) -> None:
        task = Periodic(name, interval, action, first_delay)
        self.teardown.tasks.add_waiting(name, task.stop)
        self.tasks.append(task)

    def _flow(self, runner: FlowRunner) -> None:
        flow, syncs = runner.flow, runner.flow.syncs
        runner.start_control()
        self._task(f"{flow.name} ranges", 10.0, runner.save_ranges, 10.0)
        if syncs.emit_checkpoints:
            checkpointer = GroupCheckpointer(flow, runner.source, runner.target, runner.ranges)
            self.checkpointers.append((checkpointer, runner))
            self.teardown.checkpointers.add_waiting(f"{flow.name} checkpoints",
                                                   checkpointer.close)
            checkpointer.start()
            self._task(f"{flow.name} checkpoints", syncs.checkpoints_interval,
                       _when_translating(runner, self._checkpoint_round(checkpointer)),
                       syncs.checkpoints_interval)
            if syncs.refresh_groups:
                self._task(f"{flow.name} groups", syncs.refresh_groups_interval,
                           checkpointer.refresh_groups, syncs.refresh_groups_interval)
            if syncs.sync_group_offsets:
                interval = syncs.sync_group_offsets_interval
                self._task(f"{flow.name} group offsets", interval,
                           _when_translating(runner, self._group_sync_round(checkpointer)),
                           interval)
        if syncs.sync_topic_acls:
            acls = AclSync(flow, runner.source, runner.target)
            self._task(f"{flow.name} ACLs", syncs.sync_topic_acls_interval,
                       _when_active([runner], acls.run))

    def _checkpoint_round(self, checkpointer: GroupCheckpointer) -> Callable[[], None]:
        """One checkpoint round, reported to the metrics when it succeeded."""
        def emit() -> None:
            checkpointer.emit()
            self.metrics.checkpoints_emitted(checkpointer.flow, checkpointer.groups_checkpointed)
        return emit

    def _group_sync_round(self, checkpointer: GroupCheckpointer) -> Callable[[], None]:
        """One group offset sync round, reported to the metrics when it succeeded."""
        def sync() -> None:
            outcome = checkpointer.sync_group_offsets()
            self.metrics.group_offsets_synced(checkpointer.flow, outcome.synced)
        return sync


def _when_active(runners: Sequence[FlowRunner], action: Callable[[], object]
                 ) -> Callable[[], None]:
    """``action`` run only while this instance writes one of the flows (a standby's translation
    ranges are not the flow's: its checkpoints would be stale; its ACL syncs and heartbeats
    would repeat the writer's)."""
    def run() -> None:
        if any(runner.active for runner in runners):
            action()
    return run


def _when_translating(runner: FlowRunner, action: Callable[[], object]) -> Callable[[], None]:
    """``action`` run only while this instance writes the flow and its offset translation is
    the flow's (:attr:`FlowRunner.translates`: after a takeover, the previous writer's copies are
    read in first; translated before, a group inside them would get a checkpoint that re-reads
    all of them)."""
    def run() -> None:
        if runner.translates:
            action()
    return run


def _last_checkpoints(checkpointer: GroupCheckpointer) -> None:
    """The newest positions, for consumers that fail over after this stop."""
    try:
        checkpointer.emit()
    except Exception as exc:
        log.warning("last checkpoints of %s not written: %s", checkpointer.flow.name, exc)
