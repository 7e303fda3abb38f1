"""Heartbeats as MirrorMaker 2 emits them: for every pair whose ``emit.heartbeats.enabled`` holds
(enabled or not), record (source, target, now) into ``heartbeats`` on the target, every
``emit.heartbeats.interval.seconds``. Mirrored like any topic (``A.heartbeats`` on B), they let
``MirrorClient.replicationHops`` and ``upstreamClusters`` see the replication path."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping

from kafka_mirror.config.model import HeartbeatSpec
from kafka_mirror.kafka.admin import ClusterAdmin
from kafka_mirror.kafka.internal_topics import CLOSE_TIMEOUT, InternalTopicWriter, on_delivery
from kafka_mirror.mm2.records import Heartbeat

log = logging.getLogger(__name__)


class HeartbeatEmitter:
    """Emits one pair's heartbeats."""

    def __init__(self, spec: HeartbeatSpec, admins: Mapping[str, ClusterAdmin],
                 delivered: Callable[[float], None] | None = None) -> None:
        self.spec = spec
        self.delivered = delivered  # told each heartbeat's time (Unix) once the target has it
        self.admin = admins[spec.target.alias]
        self.writer = InternalTopicWriter(
            spec.target, spec.topic, label=f"heartbeat {spec.name} not written to"
        )
        self.errors = 0

    def start(self) -> None:
        self.writer.ensure_topic(self.admin, self.spec.replication_factor)

    def beat(self) -> None:
        now = int(time.time() * 1000)
        beat = Heartbeat(self.spec.source.alias, self.spec.target.alias, now)

        def delivered(reason: str | None) -> None:
            if reason is not None:
                self.errors += 1
                log.warning("heartbeat %s not delivered: %s", self.spec.name, reason)
            elif self.delivered is not None:
                self.delivered(now / 1000.0)

        self.writer.send(beat.key(), beat.value(), partition=0, timestamp=now,
                         delivered=on_delivery(delivered))
        self.writer.poll()

    def close(self, timeout: float = CLOSE_TIMEOUT) -> None:
        self.writer.close(timeout)
