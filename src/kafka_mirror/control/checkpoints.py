"""Consumer-group checkpoints and group offset sync, in MirrorMaker 2's formats and rules.

For every group of the source that the flow's ``groups``/``groups.exclude`` select, its committed
offsets on mirrored topics are translated (:mod:`kafka_mirror.state.offset_ranges`: exact
where offsets map one to one, the batch start where they do not, never past a record the group
has not read) and written to ``<source>.checkpoints.internal`` on the target, where Kafka's own
``RemoteClusterUtils.translateOffsets`` and ``MirrorClient.remoteConsumerOffsets`` read them.
With ``sync.group.offsets.enabled`` the translated offsets are also committed on the target for
groups that are absent or empty there, never moving a partition backwards and never touching a
group with active members. A group that left the source (deleted, or no longer selected) is
forgotten at the next refresh of the groups: no more checkpoints, and it is never committed (so
never re-created) on the target again, as in MM2, whose checkpoint task syncs only the groups it
currently has.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from kafka_mirror.config.model import FlowSpec
from kafka_mirror.kafka.admin import ClusterAdmin
from kafka_mirror.kafka.internal_topics import CLOSE_TIMEOUT, InternalTopicWriter
from kafka_mirror.mm2.records import Checkpoint
from kafka_mirror.state.offset_ranges import OffsetRanges

log = logging.getLogger(__name__)

Translate = Callable[[str, int, int], "int | None"]


def checkpoint_topic_name(flow: FlowSpec, topic: str) -> str:
    """MM2's ``renameTopicPartition``: a topic that came from the target goes back to its
    original name; any other gets the remote name."""
    if flow.policy.topic_source(topic) == flow.target.alias:
        return flow.policy.original_topic(topic)
    return flow.target_topic(topic)


def group_checkpoints(
    flow: FlowSpec,
    group: str,
    committed: dict[tuple[str, int], tuple[int, str]],
    translate: Translate,
) -> list[Checkpoint]:
    """The checkpoints of one group: each committed offset on a topic the flow mirrors that
    the mirror can translate."""
    out = []
    for (topic, partition), (offset, metadata) in sorted(committed.items()):
        if not flow.topic_filter.should_mirror(topic):
            continue
        downstream = translate(topic, partition, offset)
        if downstream is None or downstream < 0:
            continue
        out.append(
            Checkpoint(group, checkpoint_topic_name(flow, topic), partition, offset,
                       downstream, metadata)
        )
    return out


def newer(previous: Checkpoint | None, current: Checkpoint) -> bool:
    """MM2's emit rule: new, the upstream offset went back (a rewind), or downstream advanced."""
    return (
        previous is None
        or current.upstream_offset < previous.upstream_offset
        or current.offset > previous.offset
    )


@dataclass
class SyncOutcome:
    committed: dict[str, int]
    skipped_active: list[str]
    # groups already at (or past) their translated offsets on the target
    in_sync: list[str] = field(default_factory=list)

    @property
    def synced(self) -> int:
        """Groups whose offsets on the target are the translated ones after this round."""
        return len(self.committed) + len(self.in_sync)


class GroupCheckpointer:
    """Emits a flow's checkpoints and, when enabled, syncs group offsets on the target."""

    def __init__(
        self, flow: FlowSpec, source: ClusterAdmin, target: ClusterAdmin, ranges: OffsetRanges,
        writer: InternalTopicWriter | None = None,
    ) -> None:
        """``writer``: of the checkpoints topic (by default a producer to the target)."""
        self.flow = flow
        self.source = source
        self.target = target
        self.ranges = ranges
        self.topic = flow.policy.checkpoints_topic(flow.source.alias)
        self.writer = writer or InternalTopicWriter(
            flow.target, self.topic, label=f"flow {flow.name}: checkpoints not written to"
        )
        self.latest: dict[tuple[str, str, int], Checkpoint] = {}
        self._groups: list[str] = []
        self._active_logged: set[str] = set()
        # groups with checkpoints after the last round (written then, or already current)
        self.groups_checkpointed = 0

    def start(self) -> None:
        self.writer.ensure_topic(self.target, self.flow.syncs.checkpoints_replication_factor)
        self.refresh_groups()

    def refresh_groups(self) -> None:
        groups = [g for g in self.source.consumer_groups() if self.flow.should_checkpoint(g)]
        gone = {key[0] for key in list(self.latest)} - set(groups)
        if gone:
            log.info("flow %s: %d groups left cluster %s or the flow's groups (%s): no longer "
                     "checkpointed, and their offsets on cluster %s no longer synced",
                     self.flow.name, len(gone), self.flow.source.alias,
                     ", ".join(sorted(gone)[:10]) + (", ..." if len(gone) > 10 else ""),
                     self.flow.target.alias)
            # a new dict: emit() and sync_group_offsets() run in other threads
            self.latest = {k: v for k, v in list(self.latest.items()) if k[0] not in gone}
            self._active_logged -= gone
        self._groups = groups

    def emit(self) -> int:
        """One checkpoint round; returns the number of checkpoints written."""
        pending = []
        covered: set[str] = set()
        mirrored = self.source.partitions(self.flow.should_mirror) if self._groups else []
        for group in self._groups:
            committed = self.source.committed_offsets(group, mirrored)
            for checkpoint in group_checkpoints(
                self.flow, group, committed, self.ranges.translate
            ):
                covered.add(group)
                key = (checkpoint.group, checkpoint.topic, checkpoint.partition)
                if newer(self.latest.get(key), checkpoint):
                    pending.append(checkpoint)
        self.writer.write(((c.key(), c.value()) for c in pending), partition=0)
        for checkpoint in pending:
            self.latest[(checkpoint.group, checkpoint.topic, checkpoint.partition)] = checkpoint
        self.groups_checkpointed = len(covered)
        if pending:
            log.debug("flow %s: %d checkpoints written for %d groups", self.flow.name,
                     len(pending), len({c.group for c in pending}))
        return len(pending)

    def sync_group_offsets(self) -> SyncOutcome:
        """Commit the latest checkpoints on the target for absent or empty groups."""
        by_group: dict[str, list[Checkpoint]] = {}
        for checkpoint in list(self.latest.values()):  # emit() runs in another thread
            by_group.setdefault(checkpoint.group, []).append(checkpoint)
        outcome = SyncOutcome({}, [])
        for group, checkpoints in sorted(by_group.items()):
            state, members = self.target.group_state(group)
            if members > 0 or state not in ("ABSENT", "EMPTY"):
                outcome.skipped_active.append(group)
                if group not in self._active_logged:
                    log.info(
                        "flow %s: group %s is active on cluster %s (%s, %d members): its offsets "
                        "there are left alone", self.flow.name, group, self.flow.target.alias,
                        state, members,
                    )
                    self._active_logged.add(group)
                continue
            self._active_logged.discard(group)
            current = self.target.committed_offsets(
                group, [(c.topic, c.partition) for c in checkpoints]
            ) if state == "EMPTY" else {}
            wanted = {
                (c.topic, c.partition): (c.offset, c.metadata)
                for c in checkpoints
                if (c.topic, c.partition) not in current
                or current[(c.topic, c.partition)][0] < c.offset
            }
            if not wanted:
                outcome.in_sync.append(group)
                continue
            self.target.commit_group_offsets(group, wanted)
            outcome.committed[group] = len(wanted)
            log.info("flow %s: group %s: %d offsets committed on cluster %s", self.flow.name,
                     group, len(wanted), self.flow.target.alias)
        log.debug("flow %s: group offsets sync round: %d groups committed, %d in sync, %d active",
                  self.flow.name, len(outcome.committed), len(outcome.in_sync),
                  len(outcome.skipped_active))
        return outcome

    def close(self, timeout: float = CLOSE_TIMEOUT) -> None:
        self.writer.close(timeout)
