"""The lag group's commits (kafka_mirror.observability.lag) against a fake consumer (no Kafka):
at most one per interval, kept for a retry when one fails, and a stop that never closes a consumer
while another thread is in its commit (librdkafka aborts the process then)."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from kafka_mirror.config.mm2 import mm2_from_text
from kafka_mirror.config.model import FlowSpec
from kafka_mirror.engine.batches import BatchCommitted
from kafka_mirror.observability.lag import LagCommitter

CONFIG = ("clusters = a, b\na.bootstrap.servers = x:1\nb.bootstrap.servers = y:1\n"
          "a->b.enabled = true\na->b.mirror.lag.commit.interval.ms = 0\n"
          "mirror.mode = micro-batch\n")  # real-time mode commits as records are acknowledged


@dataclass
class Refused:
    """A partition of a commit's answer the broker refused."""

    topic: str
    partition: int
    error: KafkaError = field(default_factory=lambda: KafkaError(KafkaError.NOT_COORDINATOR))


class FakeConsumer:
    def __init__(self) -> None:
        self.commits: list[dict[tuple[str, int], int]] = []
        self.closed = False
        self.fail = False
        self.entered = threading.Event()  # a commit began
        self.release = threading.Event()  # lets a commit end
        self.release.set()
        self.refuse: list[tuple[str, int]] = []  # the next commit's partitions to refuse

    def poll(self, timeout: float) -> None:
        return None

    def commit(self, offsets: list[Any], asynchronous: bool) -> list[Any]:
        assert not asynchronous and not self.closed
        self.entered.set()
        self.release.wait()
        if self.fail:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT))
        self.commits.append({(tp.topic, tp.partition): tp.offset for tp in offsets})
        refused, self.refuse = [Refused(t, p) for t, p in self.refuse], []
        return refused

    def close(self) -> None:
        self.closed = True


def _flow() -> FlowSpec:
    return mm2_from_text(CONFIG).flows[0]


def _batch(flow: FlowSpec, start: int, end: int) -> BatchCommitted:
    return BatchCommitted(flow=flow, batch_id=end, source_start={("t", 0): start},
                          source_end={("t", 0): end}, source_latest={("t", 0): end},
                          target_end={}, records=end - start, bytes=0, input_rate=0.0,
                          process_rate=0.0)


def test_a_failed_commit_is_kept_and_retried_by_the_periodic_flush() -> None:
    consumer = FakeConsumer()
    lag = LagCommitter(consumer_for=lambda flow: consumer)
    flow = _flow()
    lag.on_batch(_batch(flow, 0, 10))  # handed over only: Spark's listener never commits
    assert consumer.commits == []
    consumer.fail = True
    with pytest.raises(KafkaException):
        lag.flush_due()  # failed: kept
    consumer.fail = False
    lag.flush_due()
    assert consumer.commits == [{("t", 0): 10}]
    lag.flush_due()
    assert consumer.commits == [{("t", 0): 10}]  # nothing newer


def test_the_stop_closes_the_consumer_once_no_commit_is_under_way() -> None:
    consumer = FakeConsumer()
    lag = LagCommitter(consumer_for=lambda flow: consumer)
    lag.on_batch(_batch(_flow(), 0, 10))
    lag.flush_due()
    lag.close(timeout=1.0)
    assert consumer.closed
    lag.flush_due()  # the periodic flush after the stop: nothing, and no closed consumer used


def test_the_stop_leaves_a_consumer_that_is_in_a_commit_alone(
    caplog: pytest.LogCaptureFixture,
) -> None:
    consumer = FakeConsumer()
    lag = LagCommitter(consumer_for=lambda flow: consumer)
    flow = _flow()
    consumer.release.clear()  # the commit blocks, as one does with the cluster gone
    lag.on_batch(_batch(flow, 0, 10))
    flush = threading.Thread(target=lag.flush_due, daemon=True)
    flush.start()
    assert consumer.entered.wait(5)
    lag.on_batch(_batch(flow, 10, 20))  # a batch event meanwhile does not wait for the commit
    lag.advance(flow, {("t", 0): 20})  # nor do real-time acknowledgements
    with caplog.at_level(logging.WARNING, logger="kafka_mirror.observability.lag"):
        lag.close(timeout=0.05)
    assert not consumer.closed  # closing it under the commit would abort the process
    assert "did not end within 0.1 s of the stop" in caplog.text
    consumer.release.set()
    flush.join(5)
    lag.flush_due()  # after the stop: no commit starts
    assert consumer.commits == [{("t", 0): 10}]


def test_only_partitions_that_moved_since_the_last_commit_are_committed() -> None:
    """Real-time mode hands over every partition's position after every drain: an idle flow of
    thousands of partitions commits only the few that moved (the mirrored heartbeats)."""
    consumer = FakeConsumer()
    lag = LagCommitter(consumer_for=lambda flow: consumer)
    flow = _flow()
    lag.advance(flow, {("t", 0): 5, ("t", 1): 7, ("u", 0): 1})
    lag.flush_due()
    lag.advance(flow, {("t", 0): 5, ("t", 1): 9, ("u", 0): 1})
    lag.flush_due()
    lag.advance(flow, {("t", 0): 5, ("t", 1): 9, ("u", 0): 1})
    lag.flush_due()  # nothing moved: no commit at all
    lag.advance(flow, {("t", 0): 6})  # t-1 and u-0 no longer mirrored
    lag.flush_due()
    lag.advance(flow, {("t", 0): 6, ("u", 0): 1})  # u-0 mirrored again: committed again
    lag.flush_due()
    assert consumer.commits == [{("t", 0): 5, ("t", 1): 7, ("u", 0): 1}, {("t", 1): 9},
                                {("t", 0): 6}, {("u", 0): 1}]


def test_the_positions_of_ten_thousand_partitions_go_in_requests_the_broker_can_write() -> None:
    """One commit of 10,000 partitions was refused whole by the group coordinator (its batch
    over 1 MiB), every 5 s: the first commit after a start holds every partition."""
    consumer = FakeConsumer()
    lag = LagCommitter(consumer_for=lambda flow: consumer)
    flow = _flow()
    positions = {(f"bench-scale-{t:04d}", p): 10 + p for t in range(1000) for p in range(10)}
    lag.advance(flow, positions)
    lag.flush_due()
    assert len(consumer.commits) == 2  # of at most 512 KiB each (about 1 MB in all)
    assert {tp: o for commit in consumer.commits for tp, o in commit.items()} == positions


def test_a_partition_the_broker_refused_is_committed_again_at_the_next_flush() -> None:
    """A refused partition (its group coordinator moving) was once counted as committed: with
    nothing moving after it (the producer stopped), the lag group stayed behind for good."""
    consumer = FakeConsumer()
    lag = LagCommitter(consumer_for=lambda flow: consumer)
    flow = _flow()
    lag.advance(flow, {("t", 0): 5, ("t", 1): 7})
    consumer.refuse = [("t", 1)]
    lag.flush_due()
    lag.flush_due()  # nothing handed over since: the refused partition again, alone
    lag.flush_due()
    assert consumer.commits == [{("t", 0): 5, ("t", 1): 7}, {("t", 1): 7}]
