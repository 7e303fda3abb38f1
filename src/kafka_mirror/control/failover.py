"""Consumer-group failover from the checkpoints kafka-mirror (or MirrorMaker 2) wrote, and the
hand-back of a flow's positions to MirrorMaker 2.

``kafka-mirror offsets translate`` reads ``<source>.checkpoints.internal`` on the target as Kafka's
``MirrorClient.remoteConsumerOffsets`` does (partition 0 from the beginning, the last record per
(group, topic, partition) wins), so it prints what ``RemoteClusterUtils.translateOffsets`` returns.
``kafka-mirror offsets failover`` commits those offsets for the group on the target, refusing a
group with active members there, and never moving a partition backwards.
"""

from __future__ import annotations

from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from kafka_mirror.config.model import ClusterSpec, FlowSpec, MirrorConfig
from kafka_mirror.control.mm2_positions import mm2_offsets_topic, write_mm2_positions
from kafka_mirror.engine.acked_positions import copied_positions
from kafka_mirror.errors import MirrorError
from kafka_mirror.kafka.admin import ClusterAdmin
from kafka_mirror.kafka.internal_topics import InternalRecord, InternalTopicReader
from kafka_mirror.mm2.records import Checkpoint, RecordFormatError


def read_checkpoints(cluster: ClusterSpec, topic: str, timeout: float = 30.0) -> list[Checkpoint]:
    """Every checkpoint in partition 0 of ``topic`` in log order; unreadable records skipped."""
    out: list[Checkpoint] = []

    def decode(record: InternalRecord) -> None:
        with suppress(RecordFormatError):
            out.append(Checkpoint.decode(record.key, record.value))

    InternalTopicReader(
        cluster, topic, label="reading checkpoints", timeout=timeout, partitions=[0]
    ).read_to_end(decode)
    return out


def latest_checkpoints(
    checkpoints: list[Checkpoint], group: str
) -> dict[tuple[str, int], Checkpoint]:
    """The group's checkpoint per target partition: the last one in log order wins."""
    return {(c.topic, c.partition): c for c in checkpoints if c.group == group}


@dataclass(frozen=True)
class Translation:
    flow: FlowSpec
    checkpoints_topic: str
    offsets: dict[tuple[str, int], Checkpoint]


def flows_into(config: MirrorConfig, to_cluster: str | None, from_cluster: str | None
               ) -> list[FlowSpec]:
    flows = [
        f for f in config.flows
        if (to_cluster is None or f.target.alias == to_cluster)
        and (from_cluster is None or f.source.alias == from_cluster)
    ]
    if not flows:
        raise MirrorError(
            f"no enabled flow {from_cluster or '*'}->{to_cluster or '*'} in {config.origin}"
        )
    return flows


def translate(config: MirrorConfig, group: str, to_cluster: str | None = None,
              from_cluster: str | None = None) -> list[Translation]:
    out = []
    for flow in flows_into(config, to_cluster, from_cluster):
        topic = flow.policy.checkpoints_topic(flow.source.alias)
        out.append(Translation(flow, topic,
                               latest_checkpoints(read_checkpoints(flow.target, topic), group)))
    return out


@dataclass(frozen=True)
class FailoverResult:
    cluster: str
    committed: dict[tuple[str, int], int]
    kept: dict[tuple[str, int], int]


def failover(config: MirrorConfig, group: str, to_cluster: str | None = None,
             from_cluster: str | None = None, dry_run: bool = False) -> list[FailoverResult]:
    """Commit the group's translated offsets on the target cluster(s)."""
    results = []
    by_target: dict[str, dict[tuple[str, int], Checkpoint]] = {}
    for translation in translate(config, group, to_cluster, from_cluster):
        by_target.setdefault(translation.flow.target.alias, {}).update(translation.offsets)
    for alias, offsets in sorted(by_target.items()):
        if not offsets:
            raise MirrorError(
                f"no checkpoints for group '{group}' on cluster '{alias}': the mirror has not "
                "translated it yet (is the group selected by 'groups', and did it commit?)"
            )
        admin = ClusterAdmin(config.clusters[alias])
        admin.wait_ready(30)
        state, members = admin.group_state(group)
        if members > 0:
            raise MirrorError(
                f"group '{group}' is active on cluster '{alias}' ({state}, {members} members): "
                "stop its consumers there before failing it over"
            )
        current = admin.committed_offsets(group, offsets)
        wanted = {
            tp: (c.offset, c.metadata) for tp, c in offsets.items()
            if tp not in current or current[tp][0] < c.offset
        }
        kept = {tp: current[tp][0] for tp in offsets if tp not in wanted}
        if wanted and not dry_run:
            admin.commit_group_offsets(group, wanted)
        results.append(FailoverResult(alias, {tp: o for tp, (o, _) in wanted.items()}, kept))
    return results


@dataclass(frozen=True)
class HandBack:
    flow: FlowSpec
    topic: str
    positions: dict[tuple[str, int], int]
    written: int


def hand_back_to_mm2(config: MirrorConfig, state_dir: Path, to_cluster: str | None = None,
                     from_cluster: str | None = None) -> list[HandBack]:
    """Write each flow's positions (its committed batches', in real-time mode its acknowledged
    records') where MirrorMaker 2 (dedicated mode) looks for
    them, so MM2 started on the same mm2.properties continues where kafka-mirror stopped.
    Refused while MM2's worker group has members (MM2 still running)."""
    out = []
    for flow in flows_into(config, to_cluster, from_cluster):
        positions = copied_positions(state_dir / flow.path_name)
        if not positions:
            raise MirrorError(
                f"flow {flow.name} has no committed positions under {state_dir}: nothing to "
                "hand back (is --state-dir the mirror's?)"
            )
        topic = mm2_offsets_topic(config.raw, flow.source.alias, flow.target.alias)
        written = write_mm2_positions(flow.target, topic, flow.source.alias, positions,
                                      flow.positions_partitions, flow.positions_replication_factor)
        out.append(HandBack(flow, topic, dict(positions), written))
    return out
