"""What the mirror's runtime tells its metrics (:class:`Metrics`), and :class:`NullMetrics`, the
metrics of a mirror without a metrics endpoint: every report is dropped, so that the runtime
reports unconditionally instead of asking at every turn whether metrics are wanted."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from kafka_mirror.config.model import FlowSpec, HeartbeatSpec
from kafka_mirror.engine.batches import BatchCommitted


class Metrics(Protocol):
    """The reports of :class:`~kafka_mirror.observability.metrics.MirrorMetrics` the runtime
    makes (a batch hook too)."""

    def register(self, flow: FlowSpec) -> None: ...
    def register_heartbeats(self, spec: HeartbeatSpec) -> None: ...
    def heartbeat_delivered(self, spec: HeartbeatSpec, at: float) -> None: ...
    def checkpoints_emitted(self, flow: FlowSpec, groups: int) -> None: ...
    def group_offsets_synced(self, flow: FlowSpec, groups: int) -> None: ...
    def offset_syncs_written(self, flow: FlowSpec) -> None: ...
    def topics_changed(self, flow: FlowSpec, kind: str, count: int) -> None: ...
    def set_state(self, flow: FlowSpec, state: str) -> None: ...
    def set_lease(self, flow: FlowSpec, lease: Mapping[str, Any] | None) -> None: ...
    def set_assignment(self, flow: FlowSpec, assignment: Mapping[str, int]) -> None: ...
    def skipped_at_restart(self, flow: FlowSpec, records: int, fallbacks: int) -> None: ...
    def restarted(self, flow: FlowSpec, reason: str) -> None: ...
    def failed(self, flow: FlowSpec, kind: str, message: str) -> None: ...
    def read_topic_latency(self, read: Callable[[], str]) -> None: ...
    def on_batch(self, event: BatchCommitted) -> None: ...


class NullMetrics:
    """Metrics that record nothing (no ``mirror.metrics.port``)."""

    def register(self, flow: FlowSpec) -> None:
        pass

    def register_heartbeats(self, spec: HeartbeatSpec) -> None:
        pass

    def heartbeat_delivered(self, spec: HeartbeatSpec, at: float) -> None:
        pass

    def checkpoints_emitted(self, flow: FlowSpec, groups: int) -> None:
        pass

    def group_offsets_synced(self, flow: FlowSpec, groups: int) -> None:
        pass

    def offset_syncs_written(self, flow: FlowSpec) -> None:
        pass

    def topics_changed(self, flow: FlowSpec, kind: str, count: int) -> None:
        pass

    def set_state(self, flow: FlowSpec, state: str) -> None:
        pass

    def set_lease(self, flow: FlowSpec, lease: Mapping[str, Any] | None) -> None:
        pass

    def set_assignment(self, flow: FlowSpec, assignment: Mapping[str, int]) -> None:
        pass

    def skipped_at_restart(self, flow: FlowSpec, records: int, fallbacks: int) -> None:
        pass

    def restarted(self, flow: FlowSpec, reason: str) -> None:
        pass

    def failed(self, flow: FlowSpec, kind: str, message: str) -> None:
        pass

    def read_topic_latency(self, read: Callable[[], str]) -> None:
        pass

    def on_batch(self, event: BatchCommitted) -> None:
        pass
