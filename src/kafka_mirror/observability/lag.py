"""Mirror positions committed to a consumer group on the source cluster.

Spark keeps its positions in the checkpoint and never commits them to Kafka, so standard lag
tools (``kafka-consumer-groups --describe``, Burrow, exporters) could not see how far behind
the mirror is. After committed batches (in real-time mode: as the target acknowledges records) the
positions are committed to the flow's lag group
(``mirror.lag.group.id``, default ``kafka-mirror.<source>_to_<target>``): informational only;
the mirror never reads them back.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

from kafka_mirror.config.model import FlowSpec
from kafka_mirror.engine.batches import BatchCommitted
from kafka_mirror.engine.positions import Positions
from kafka_mirror.kafka.clients import consumer_properties
from kafka_mirror.kafka.librdkafka import librdkafka_config, with_client_log

log = logging.getLogger(__name__)


def lag_group_consumer(flow: FlowSpec) -> Any:
    """A consumer of the flow's source cluster for its lag group, with the data path's consumer
    settings (the principal that reads the records commits their positions); it never joins the
    group (its commits are outside it, as ``kafka-consumer-groups --reset-offsets`` makes them)."""
    conf = with_client_log(
        librdkafka_config(consumer_properties(flow), f"cluster '{flow.source.alias}'"),
        f"flow {flow.name}: lag group",
    )
    conf.pop("isolation.level", None)
    return Consumer(conf | {"group.id": flow.lag_group_id, "enable.auto.commit": False})


class LagCommitter:
    """Commits each flow's source positions to its lag group, at most once per interval."""

    def __init__(self, consumer_for: Callable[[FlowSpec], Any] | None = None) -> None:
        self._consumer_for = consumer_for or lag_group_consumer
        self._consumers: dict[str, Any] = {}
        self._last: dict[str, float] = {}
        self._pending: dict[str, dict[tuple[str, int], int]] = {}
        self._flows: dict[str, FlowSpec] = {}
        self._lock = threading.Lock()
        self._closed = False

    def _consumer(self, flow: FlowSpec) -> Any:
        consumer = self._consumers.get(flow.name)
        if consumer is None:
            consumer = self._consumers[flow.name] = self._consumer_for(flow)
        return consumer

    def on_batch(self, event: BatchCommitted) -> None:
        flow = event.flow
        if not flow.lag_group_id or flow.realtime:  # real-time: advance() follows the acks
            return
        with self._lock:
            self._flows[flow.name] = flow
            if event.moved:
                self._pending[flow.name] = event.source_end
        try:
            self.flush_due()
        except KafkaException as exc:  # kept; the periodic flush retries and reports failures
            log.debug("flow %s: lag commit failed after a batch: %s", flow.name, exc)

    def advance(self, flow: FlowSpec, positions: Positions) -> None:
        """Real-time mode: the positions after the records the target acknowledged (committed
        at the next due flush)."""
        if not flow.lag_group_id:
            return
        with self._lock:
            self._flows[flow.name] = flow
            self._pending[flow.name] = dict(positions)

    def flush_due(self) -> None:
        """Commit each flow's newest positions once its interval has passed (also called
        periodically: when the stream goes idle, no batch event would commit the last ones)."""
        with self._lock:
            if self._closed:
                return
            now = time.monotonic()
            for name, pending in list(self._pending.items()):
                flow = self._flows[name]
                if now - self._last.get(name, 0.0) < flow.lag_commit_interval_ms / 1000.0:
                    continue
                self._last[name] = now
                offsets = [TopicPartition(t, p, o) for (t, p), o in sorted(pending.items())]
                consumer = self._consumer(flow)
                consumer.poll(0)  # serves librdkafka's queued log lines (never assigned)
                consumer.commit(offsets=offsets, asynchronous=False)
                if self._pending.get(name) is pending:  # kept for a retry if the commit failed
                    del self._pending[name]

    def close(self, timeout: float = 10.0) -> None:
        """Close the consumers once no commit is under way, waiting at most ``timeout`` seconds
        for one to end. A consumer closed during another thread's commit aborts the process
        (librdkafka's ``rd_kafka_cgrp_terminated`` assertion; seen at a stop with the clusters
        gone), so when a commit is still blocked the consumers are left as they are: the thread
        in the commit holds them until the process exits, and the positions are informational."""
        if not self._lock.acquire(timeout=max(0.0, timeout)):
            log.warning("the lag groups' commit in flight did not end within %.1f s of the stop; "
                        "their consumers are left open (informational positions; the mirror's "
                        "own are kept)", timeout)
            return
        try:
            self._closed = True
            for consumer in self._consumers.values():
                consumer.close()
            self._consumers.clear()
        finally:
            self._lock.release()
