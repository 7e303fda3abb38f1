"""Lag in seconds (kafka_mirror.observability.lag_time) and the metrics series that follow a flow's
features, topics and partitions, without Kafka or Spark."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import generate_latest

from kafka_mirror.config.mm2 import mm2_from_text
from kafka_mirror.config.model import FlowSpec, MirrorConfig
from kafka_mirror.control.topics import TopicPlan, TopicSync
from kafka_mirror.engine.batches import BatchCommitted, progress_time
from kafka_mirror.observability.lag_time import TABLE_SIZE, PartitionLagClock
from kafka_mirror.observability.metrics import MirrorMetrics

BASE = ("clusters = a, b\na.bootstrap.servers = x:1\nb.bootstrap.servers = y:1\n"
        "a->b.enabled = true\n")


def _config(extra: str = "") -> MirrorConfig:
    return mm2_from_text(BASE + extra)


def _series(metrics: MirrorMetrics, name: str) -> dict[str, float]:
    """``name``'s samples: labels text -> value."""
    out = {}
    for line in generate_latest(metrics.registry).decode().splitlines():
        if line.startswith(name + "{"):
            labels, value = line.rsplit(" ", 1)
            out[labels[len(name):]] = float(value)
    return out


def _event(flow: FlowSpec, latest: dict[tuple[str, int], int],
           end: dict[tuple[str, int], int], planned: float) -> BatchCommitted:
    return BatchCommitted(flow=flow, batch_id=1, source_start=end, source_end=end,
                          source_latest=latest, target_end={}, records=0, bytes=0,
                          input_rate=0.0, process_rate=0.0, planned=planned)


def test_lag_seconds_is_the_age_of_the_first_end_offset_past_the_position() -> None:
    clock = PartitionLagClock()
    clock.observe(100, 100, at=0.0)
    assert clock.seconds(5.0) == 0.0  # caught up
    clock.observe(150, 100, at=10.0)  # offsets 100..149 appeared by t=10
    assert clock.seconds(15.0) == 5.0
    clock.observe(200, 120, at=20.0)  # offset 120 was first known at t=10
    assert clock.seconds(25.0) == 15.0
    clock.observe(200, 160, at=30.0)  # offset 160 was first known at t=20
    assert clock.seconds(30.0) == 10.0
    clock.observe(200, 200, at=40.0)
    assert clock.seconds(50.0) == 0.0 and clock.table == []
    # the topic was deleted and created again: its offsets start over
    clock.observe(5, 0, at=50.0)
    assert clock.seconds(60.0) == 10.0


def test_lag_table_stays_small_and_keeps_the_oldest_entry() -> None:
    clock = PartitionLagClock()
    for i in range(1, 1000):  # a mirror stuck at 0 while the source grows
        clock.observe(i * 10, 0, at=float(i))
        assert len(clock.table) <= TABLE_SIZE
    assert clock.table[0] == (10, 1.0) and clock.table[-1] == (9990, 999.0)
    assert clock.seconds(1000.0) == 999.0


def test_progress_time_parses_sparks_timestamps() -> None:
    assert progress_time("1970-01-01T00:01:40.500Z") == 100.5
    assert progress_time("garbage") is None and progress_time(None) is None


def test_lag_series_follow_the_assignment() -> None:
    flow = _config().flows[0]
    metrics = MirrorMetrics()
    metrics.register(flow)
    metrics.set_assignment(flow, {"t": 2, "u": 1})
    latest = {("t", 0): 10, ("t", 1): 20, ("u", 0): 30}
    metrics.on_batch(_event(flow, latest, {("t", 0): 10, ("t", 1): 5, ("u", 0): 30}, 1.0))
    seconds = _series(metrics, "kafka_mirror_lag_seconds")
    assert len(seconds) == 3 and len(_series(metrics, "kafka_mirror_lag_records")) == 3
    behind = next(v for k, v in seconds.items() if 'partition="1"' in k and 'topic="t"' in k)
    assert behind > 60  # first seen at Unix time 1
    assert sum(seconds.values()) == behind  # the others are caught up
    assert metrics.snapshot()[flow.name].lag_seconds == pytest.approx(behind, abs=1)
    # u was deleted, t shrank to one partition (re-created): their series go
    metrics.set_assignment(flow, {"t": 1})
    assert list(_series(metrics, "kafka_mirror_lag_seconds")) == [
        '{flow="a->b",partition="0",source="a",target="b",topic="t"}']
    assert len(_series(metrics, "kafka_mirror_lag_records")) == 1
    # a late event of the query that still mirrored them does not bring them back
    metrics.on_batch(_event(flow, latest, latest, 2.0))
    assert len(_series(metrics, "kafka_mirror_lag_seconds")) == 1
    assert len(_series(metrics, "kafka_mirror_lag_records")) == 1


@pytest.mark.parametrize(("extra", "wanted"), [
    ("", {"checkpoints_last_timestamp_seconds", "groups_checkpointed",
          "offset_syncs_last_timestamp_seconds", "heartbeats_last_timestamp_seconds"}),
    ("sync.group.offsets.enabled = true\n",
     {"checkpoints_last_timestamp_seconds", "groups_checkpointed",
      "group_offsets_sync_last_timestamp_seconds", "groups_synced",
      "offset_syncs_last_timestamp_seconds", "heartbeats_last_timestamp_seconds"}),
    ("emit.checkpoints.enabled = false\nsync.group.offsets.enabled = true\n"
     "emit.offset-syncs.enabled = false\nemit.heartbeats.enabled = false\n", set()),
])
def test_control_plane_series_exist_only_for_enabled_features(extra: str,
                                                              wanted: set[str]) -> None:
    config = _config(extra)
    metrics = MirrorMetrics()
    for flow in config.flows:
        metrics.register(flow)
    for spec in config.heartbeats:
        if spec.name == "a->b":
            metrics.register_heartbeats(spec)
    names = ("checkpoints_last_timestamp_seconds", "groups_checkpointed",
             "group_offsets_sync_last_timestamp_seconds", "groups_synced",
             "offset_syncs_last_timestamp_seconds", "heartbeats_last_timestamp_seconds")
    present = {n for n in names if _series(metrics, f"kafka_mirror_{n}")}
    assert present == wanted
    # until a first success the age counts from the process's start (alerts see a feature
    # that never worked)
    for name in wanted:
        if name.endswith("timestamp_seconds"):
            assert set(_series(metrics, f"kafka_mirror_{name}").values()) == {
                metrics.start_time}
    for name in ("topics_created_total", "partitions_added_total", "topic_config_syncs_total"):
        assert list(_series(metrics, f"kafka_mirror_{name}").values()) == [0.0]


class _Done:
    def result(self) -> None:
        return None


class _Client:
    def create_topics(self, new: list[Any]) -> dict[str, _Done]:
        return {t.topic: _Done() for t in new}

    def create_partitions(self, requests: list[Any]) -> dict[str, _Done]:
        return {r.topic: _Done() for r in requests}

    def incremental_alter_configs(self, resources: list[Any]) -> dict[Any, _Done]:
        return {r: _Done() for r in resources}


class _Admin:
    client = _Client()


def test_topic_changes_on_the_target_are_counted() -> None:
    flow = _config().flows[0]
    metrics = MirrorMetrics()
    metrics.register(flow)
    admin: Any = _Admin()
    sync = TopicSync(flow, admin, admin, lambda kind, n: metrics.topics_changed(flow, kind, n))
    sync._create([TopicPlan("t", "a.t", 3, None), TopicPlan("u", "a.u", 1, None)])
    sync._grow([TopicPlan("v", "a.v", 5, 2)])
    sync._configure([TopicPlan("w", "a.w", 1, 1, config_changes={"retention.ms": "1"})])
    assert list(_series(metrics, "kafka_mirror_topics_created_total").values()) == [2.0]
    assert list(_series(metrics, "kafka_mirror_partitions_added_total").values()) == [3.0]
    assert list(_series(metrics, "kafka_mirror_topic_config_syncs_total").values()) == [1.0]


def test_status_shows_lag_in_seconds() -> None:
    from kafka_mirror.cli.status import render

    text = render({"live": True, "ready": True, "flows": {"a->b": {
        "state": "running", "ready": True, "lag": 5, "lag_seconds": 12.3}}})
    assert "lag 5 records (12 s behind)" in text
