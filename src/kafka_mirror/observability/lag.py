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

from confluent_kafka import Consumer, TopicPartition

from kafka_mirror.config.model import FlowSpec
from kafka_mirror.engine.batches import BatchCommitted
from kafka_mirror.engine.positions import Positions
from kafka_mirror.kafka.clients import consumer_properties
from kafka_mirror.kafka.librdkafka import librdkafka_config, with_client_log
from kafka_mirror.kafka.offset_commits import commit_offsets

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
    """Commits each flow's source positions to its lag group, at most once per interval, from
    the periodic flush only: a commit blocks while the source does not answer (45 s measured),
    and neither Spark's listener thread (batch events; at a stop, Spark's own stop waits for it)
    nor real-time mode's acknowledgements may wait for one. Positions are handed over under a
    lock of their own, never held during a commit."""

    def __init__(self, consumer_for: Callable[[FlowSpec], Any] | None = None) -> None:
        self._consumer_for = consumer_for or lag_group_consumer
        self._consumers: dict[str, Any] = {}
        self._last: dict[str, float] = {}
        self._pending: dict[str, dict[tuple[str, int], int]] = {}
        # per flow, the positions its last commits gave: only partitions that moved since are
        # committed again (an idle flow of thousands of partitions commits the few that move)
        self._committed: dict[str, dict[tuple[str, int], int]] = {}
        self._flows: dict[str, FlowSpec] = {}
        self._positions = threading.Lock()  # _pending and _flows: held briefly
        self._commits = threading.Lock()  # the consumers: held through a commit, and the close
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
        with self._positions:
            self._flows[flow.name] = flow
            if event.moved:
                self._pending[flow.name] = event.source_end

    def advance(self, flow: FlowSpec, positions: Positions) -> None:
        """Real-time mode: the positions after the records the target acknowledged (committed
        at the next due flush)."""
        if not flow.lag_group_id:
            return
        with self._positions:
            self._flows[flow.name] = flow
            self._pending[flow.name] = dict(positions)

    def flush_due(self) -> None:
        """Commit each flow's newest positions once its interval has passed (called
        periodically, also when the stream is idle)."""
        with self._commits:
            if self._closed:
                return
            now = time.monotonic()
            with self._positions:
                due = [(self._flows[name], pending) for name, pending in self._pending.items()
                       if now - self._last.get(name, 0.0)
                       >= self._flows[name].lag_commit_interval_ms / 1000.0]
            for flow, pending in due:
                self._last[flow.name] = now
                committed = self._committed.setdefault(flow.name, {})
                moved = {tp: o for tp, o in pending.items() if committed.get(tp) != o}
                refused: set[tuple[str, int]] = set()
                if moved:
                    offsets = [TopicPartition(t, p, o) for (t, p), o in sorted(moved.items())]
                    consumer = self._consumer(flow)
                    consumer.poll(0)  # serves librdkafka's queued log lines (never assigned)
                    # a partition the broker refused (its group coordinator moving, its topic
                    # deleted) is not counted as committed: it is committed again at the next
                    # flush, with the newest position handed over by then
                    refused = {(tp.topic, tp.partition) for tp in
                               commit_offsets(consumer, flow.lag_group_id, offsets)}
                    if refused:
                        log.debug("flow %s: lag group commit refused for %d partitions",
                                  flow.name, len(refused))
                    committed.update({tp: o for tp, o in moved.items() if tp not in refused})
                for gone in [tp for tp in committed if tp not in pending]:
                    del committed[gone]  # no longer mirrored: not kept for ever
                with self._positions:  # kept for a retry if the commit failed
                    if self._pending.get(flow.name) is pending and not refused:
                        del self._pending[flow.name]

    def close(self, timeout: float = 10.0) -> None:
        """Close the consumers once no commit is under way, waiting at most ``timeout`` seconds
        for one to end. A consumer closed during another thread's commit aborts the process
        (librdkafka's ``rd_kafka_cgrp_terminated`` assertion; seen at a stop with the clusters
        gone), so when a commit is still blocked the consumers are left as they are: the thread
        in the commit holds them until the process exits, and the positions are informational."""
        self._closed = True  # no commit starts from now on
        if not self._commits.acquire(timeout=max(0.0, timeout)):
            log.warning("the lag groups' commit in flight did not end within %.1f s of the stop; "
                        "their consumers are left open (informational positions; the mirror's "
                        "own are kept)", timeout)
            return
        try:
            for consumer in self._consumers.values():
                consumer.close()
            self._consumers.clear()
        finally:
            self._commits.release()
