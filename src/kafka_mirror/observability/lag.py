"""Mirror positions committed to a consumer group on the source cluster.

Spark keeps its positions in the checkpoint and never commits them to Kafka, so standard lag
tools (``kafka-consumer-groups --describe``, Burrow, exporters) could not see how far behind
the mirror is. After committed batches (in real-time mode: as the target acknowledges records) the
positions are committed to the flow's lag group
(``mirror.lag.group.id``, default ``kafka-mirror.<source>_to_<target>``): informational only;
the mirror never reads them back.

The commits are an admin's (Kafka's AlterConsumerGroupOffsets, an OffsetCommit outside the group,
as ``kafka-consumer-groups --reset-offsets`` makes it), sent without waiting: a batch never waits
on the source's group coordinator, a flow has at most one commit in flight, and the stop waits
for the last one at most its budget. A consumer would not do: closing one while a commit is in
flight waits for the commit (45 s with the cluster gone), and closing it during another thread's
commit aborts the process (librdkafka's ``rd_kafka_cgrp_terminated`` assertion).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, wait
from dataclasses import dataclass
from typing import Any

from confluent_kafka import (
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from kafka_mirror.config.model import FlowSpec
from kafka_mirror.engine.batches import BatchCommitted
from kafka_mirror.engine.positions import Positions
from kafka_mirror.kafka.clients import consumer_properties
from kafka_mirror.kafka.librdkafka import librdkafka_config, with_client_log

log = logging.getLogger(__name__)

# how long one commit may take, broker lookup included (the next due commit waits for it); also
# how long retriable refusals (the group coordinator loading or moving) are retried at once before
# they are reported
COMMIT_TIMEOUT_SECONDS = 30.0


def lag_group_admin(flow: FlowSpec) -> Any:
    """An admin client on the flow's source cluster, with the data path's consumer settings
    (the principal that reads the records commits their positions)."""
    conf = librdkafka_config(consumer_properties(flow), f"cluster '{flow.source.alias}'")
    conf.pop("isolation.level", None)
    return AdminClient(with_client_log(conf, f"flow {flow.name}: lag group"))


class LagCommitFailed(Exception):
    """A flow's commit to its lag group was refused or timed out (retried at the next flush)."""


@dataclass
class _Sent:
    positions: dict[tuple[str, int], int]
    future: Future[Any]


# the group coordinator loading or moving: a consumer's commit retries these (Kafka's
# ConsumerCoordinator does the same), an admin's AlterConsumerGroupOffsets hands them back
_COORDINATOR_BUSY = frozenset({
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.NOT_COORDINATOR,
})


def _busy(error: Any) -> bool:
    return isinstance(error, KafkaError) and error.code() in _COORDINATOR_BUSY


@dataclass(frozen=True)
class _Failure:
    text: str
    retriable: bool  # the coordinator loading or moving: the consumer's commit retries those


def _failure(flow: FlowSpec, future: Future[Any]) -> _Failure | None:
    """What went wrong with a finished commit, if anything (a partition's error included)."""
    what = f"flow {flow.name}: lag group {flow.lag_group_id}"
    exc = future.exception()
    if exc is not None:
        return _Failure(f"{what}: {exc}", _busy(exc.args[0] if exc.args else None))
    refused = [tp for tp in future.result().topic_partitions if tp.error is not None]
    if refused:
        tp = refused[0]
        more = f" (and {len(refused) - 1} more)" if len(refused) > 1 else ""
        return _Failure(f"{what}: {tp.topic}-{tp.partition}: {tp.error.str()}{more}",
                        all(_busy(t.error) for t in refused))
    return None


class LagCommitter:
    """Commits each flow's source positions to its lag group, at most once per interval and one
    commit in flight per flow."""

    def __init__(self, admin_for: Callable[[FlowSpec], Any] = lag_group_admin,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._admin_for = admin_for
        self._clock = clock
        self._admins: dict[str, Any] = {}
        self._last: dict[str, float] = {}
        self._pending: dict[str, dict[tuple[str, int], int]] = {}
        self._sent: dict[str, _Sent] = {}
        self._flows: dict[str, FlowSpec] = {}
        self._failures: list[str] = []  # since the last periodic flush
        self._failing: dict[str, str] = {}  # flows whose last finished commit failed: why
        self._retrying: dict[str, float] = {}  # flows refused retriably: since when
        self._lock = threading.Lock()

    def on_batch(self, event: BatchCommitted) -> None:
        flow = event.flow
        if not flow.lag_group_id or flow.realtime:  # real-time: advance() follows the acks
            return
        with self._lock:
            self._flows[flow.name] = flow
            if event.moved:
                self._pending[flow.name] = dict(event.source_end)
            self._send_due()  # failures are the periodic flush's to report

    def advance(self, flow: FlowSpec, positions: Positions) -> None:
        """Real-time mode: the positions after the records the target acknowledged (committed
        at the next due flush)."""
        if not flow.lag_group_id:
            return
        with self._lock:
            self._flows[flow.name] = flow
            self._pending[flow.name] = dict(positions)

    def flush_due(self) -> None:
        """Send each flow's newest positions once its interval has passed and its last commit
        finished (also called periodically: when the stream goes idle, no batch event would
        commit the last ones). Raises :class:`LagCommitFailed` for commits that failed since
        the last call, and while a flow's last finished commit failed."""
        with self._lock:
            self._send_due()
            failures, self._failures = self._failures, []
            # until a commit succeeds again, the flush is still failing (not working again)
            failures = failures or list(self._failing.values())
        if failures:
            raise LagCommitFailed("; ".join(failures))

    def close(self, timeout: float = 10.0) -> None:
        """Send what is pending, wait at most ``timeout`` seconds for the commits in flight, then
        drop the clients (a commit still in flight is abandoned: informational positions)."""
        deadline = self._clock() + timeout
        with self._lock:
            self._settle()
            if self._sent:  # a commit in flight: the newest positions go once it is done
                wait([sent.future for sent in self._sent.values()],
                     timeout=max(0.0, deadline - self._clock()))
                self._settle()
            for name in list(self._pending):
                if name not in self._sent:
                    self._send(name)
            in_flight = [sent.future for sent in self._sent.values()]
            left = max(0.0, deadline - self._clock())
            if in_flight and wait(in_flight, timeout=left).not_done:
                log.warning("lag groups: the last commit was given up at the stop, unanswered "
                            "after %.1f s (informational positions; the mirror's own are kept)",
                            timeout)
            self._settle()
            for failure in self._failures:
                log.warning("%s", failure)
            self._failures.clear()
            for admin in self._admins.values():
                admin.poll(0)  # its last queued log lines
            self._admins.clear()
            self._sent.clear()
            self._failing.clear()
            self._retrying.clear()

    def _send_due(self) -> None:
        """Each flow's pending positions whose interval passed and whose last commit finished
        (the lock held)."""
        self._settle()
        now = self._clock()
        for name in list(self._pending):
            interval = self._flows[name].lag_commit_interval_ms / 1000.0
            if name not in self._sent and now - self._last.get(name, 0.0) >= interval:
                self._last[name] = now
                self._send(name)

    def _send(self, name: str) -> None:
        """One commit of the flow's pending positions, sent without waiting (the lock held; a
        failure to send keeps them pending)."""
        flow = self._flows[name]
        positions = self._pending.pop(name)
        offsets = [TopicPartition(t, p, o) for (t, p), o in sorted(positions.items()) if o >= 0]
        if not offsets or flow.lag_group_id is None:
            return
        try:
            admin = self._admins.get(name)
            if admin is None:
                admin = self._admins[name] = self._admin_for(flow)
            admin.poll(0)  # serves librdkafka's queued log lines
            futures = admin.alter_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(flow.lag_group_id, offsets)],
                request_timeout=COMMIT_TIMEOUT_SECONDS)
        except KafkaException as exc:
            self._pending.setdefault(name, positions)
            failure = f"flow {name}: lag group {flow.lag_group_id}: {exc}"
            self._failures.append(failure)
            self._failing[name] = failure
            return
        self._sent[name] = _Sent(positions, futures[flow.lag_group_id])

    def _settle(self) -> None:
        """Forget finished commits; a failed one's positions are pending again unless newer ones
        are, and its failure is kept for the periodic flush to report (the lock held)."""
        for name, sent in list(self._sent.items()):
            if not sent.future.done():
                continue
            del self._sent[name]
            try:
                failure = _failure(self._flows[name], sent.future)
            except KafkaException as exc:
                failure = _Failure(f"flow {name}: lag group: {exc}", False)
            if failure is None:
                self._failing.pop(name, None)
                self._retrying.pop(name, None)
                continue
            self._pending.setdefault(name, sent.positions)
            if failure.retriable:  # sent again at once; reported once it goes on
                since = self._retrying.setdefault(name, self._clock())
                self._last.pop(name, None)
                if self._clock() - since < COMMIT_TIMEOUT_SECONDS:
                    continue
            self._failures.append(failure.text)
            self._failing[name] = failure.text
