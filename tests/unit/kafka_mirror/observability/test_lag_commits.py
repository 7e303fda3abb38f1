"""The lag group's commits (kafka_mirror.observability.lag): sent without waiting, at most one in
flight per flow and one per interval, a failed one retried with the newest positions, and the stop
bounded by its timeout, against a fake admin client (no Kafka)."""

from __future__ import annotations

import logging
from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from kafka_mirror.config.mm2 import mm2_from_text
from kafka_mirror.config.model import FlowSpec
from kafka_mirror.engine.batches import BatchCommitted
from kafka_mirror.observability.lag import LagCommitFailed, LagCommitter

CONFIG = ("clusters = a, b\na.bootstrap.servers = x:1\nb.bootstrap.servers = y:1\n"
          "a->b.enabled = true\n")


class FakeAdmin:
    """Records each AlterConsumerGroupOffsets request; its future is finished by the test."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[tuple[str, int], int]]] = []
        self.futures: list[Future[Any]] = []
        self.polls = 0

    def poll(self, timeout: float) -> int:
        self.polls += 1
        return 0

    def alter_consumer_group_offsets(self, requests: list[Any],
                                     request_timeout: float) -> dict[str, Future[Any]]:
        (request,) = requests
        self.requests.append((request.group_id, {(tp.topic, tp.partition): tp.offset
                                                 for tp in request.topic_partitions}))
        future: Future[Any] = Future()
        future.set_running_or_notify_cancel()
        self.futures.append(future)
        return {request.group_id: future}

    def succeed(self, index: int = -1) -> None:
        self.futures[index].set_result(SimpleNamespace(topic_partitions=[]))


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _flow(extra: str = "") -> FlowSpec:
    return mm2_from_text(CONFIG + extra).flows[0]


def _batch(flow: FlowSpec, start: int, end: int) -> BatchCommitted:
    return BatchCommitted(flow=flow, batch_id=end, source_start={("t", 0): start},
                          source_end={("t", 0): end}, source_latest={("t", 0): end},
                          target_end={}, records=end - start, bytes=0, input_rate=0.0,
                          process_rate=0.0)


def _committer() -> tuple[LagCommitter, FakeAdmin, Clock]:
    admin, clock = FakeAdmin(), Clock()
    return LagCommitter(admin_for=lambda flow: admin, clock=clock), admin, clock


def test_a_batch_sends_its_positions_without_waiting_and_one_commit_at_a_time() -> None:
    lag, admin, clock = _committer()
    flow = _flow()
    lag.on_batch(_batch(flow, 0, 10))
    assert admin.requests == [(flow.lag_group_id, {("t", 0): 10})]
    clock.now += 60  # the interval passed, but the first commit has no answer yet
    lag.on_batch(_batch(flow, 10, 20))
    lag.flush_due()
    assert len(admin.requests) == 1
    admin.succeed()
    lag.flush_due()  # the newest positions go once the commit in flight finished
    assert admin.requests[-1] == (flow.lag_group_id, {("t", 0): 20})
    admin.succeed()
    lag.flush_due()
    assert len(admin.requests) == 2  # nothing newer


def test_commits_keep_the_interval() -> None:
    lag, admin, clock = _committer()
    flow = _flow("a->b.mirror.lag.commit.interval.ms = 5000\n")
    lag.on_batch(_batch(flow, 0, 10))
    admin.succeed()
    clock.now += 4.0
    lag.on_batch(_batch(flow, 10, 20))
    assert len(admin.requests) == 1
    clock.now += 1.0
    lag.flush_due()
    assert admin.requests[-1][1] == {("t", 0): 20}


def test_a_failed_commit_is_reported_and_retried_with_the_newest_positions() -> None:
    lag, admin, clock = _committer()
    flow = _flow()
    lag.on_batch(_batch(flow, 0, 10))
    admin.futures[-1].set_exception(KafkaException(KafkaError(KafkaError._TIMED_OUT)))
    clock.now += 60
    with pytest.raises(LagCommitFailed, match=f"lag group {flow.lag_group_id}"):
        lag.flush_due()
    assert admin.requests[-1][1] == {("t", 0): 10}  # sent again
    admin.futures[-1].set_exception(KafkaException(KafkaError(KafkaError._TIMED_OUT)))
    lag.on_batch(_batch(flow, 10, 20))  # newer positions than the failed ones
    clock.now += 60
    with pytest.raises(LagCommitFailed):
        lag.flush_due()
    assert admin.requests[-1][1] == {("t", 0): 20}


def test_a_partition_refused_is_a_failure_named_with_the_partition() -> None:
    lag, admin, _clock = _committer()
    flow = _flow()
    lag.on_batch(_batch(flow, 0, 10))
    refused = SimpleNamespace(topic="t", partition=0,
                              error=KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED))
    admin.futures[-1].set_result(SimpleNamespace(topic_partitions=[refused]))
    with pytest.raises(LagCommitFailed, match="t-0"):
        lag.flush_due()


def test_the_stop_sends_what_is_pending_and_waits_at_most_its_timeout(
    caplog: pytest.LogCaptureFixture,
) -> None:
    lag, admin, _clock = _committer()
    flow = _flow()
    lag.on_batch(_batch(flow, 0, 10))
    admin.succeed()
    lag.on_batch(_batch(flow, 10, 20))  # within the interval: pending
    assert len(admin.requests) == 1
    with caplog.at_level(logging.WARNING, logger="kafka_mirror.observability.lag"):
        lag.close(timeout=0.05)  # the cluster does not answer
    assert admin.requests[-1][1] == {("t", 0): 20}
    assert "the last commit was given up at the stop" in caplog.text


def test_real_time_positions_go_at_the_next_due_flush() -> None:
    lag, admin, _clock = _committer()
    flow = _flow("a->b.mirror.mode = realtime\n")
    lag.on_batch(_batch(flow, 0, 10))  # real-time flows follow the acknowledgements instead
    assert admin.requests == []
    lag.advance(flow, {("t", 0): 7, ("t", 1): 3})
    lag.flush_due()
    assert admin.requests == [(flow.lag_group_id, {("t", 0): 7, ("t", 1): 3})]


def test_the_flush_goes_on_failing_until_a_commit_succeeds_again() -> None:
    lag, admin, clock = _committer()
    flow = _flow()
    lag.on_batch(_batch(flow, 0, 10))
    admin.futures[-1].set_exception(KafkaException(KafkaError(KafkaError._TIMED_OUT)))
    clock.now += 60
    with pytest.raises(LagCommitFailed):
        lag.flush_due()  # reported; sent again
    with pytest.raises(LagCommitFailed):
        lag.flush_due()  # the retry has no answer yet: not working again
    admin.succeed()
    lag.flush_due()


def test_a_coordinator_loading_is_retried_at_once_and_reported_only_when_it_goes_on() -> None:
    lag, admin, clock = _committer()
    flow = _flow()
    loading = SimpleNamespace(topic="t", partition=0,
                              error=KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS))
    lag.on_batch(_batch(flow, 0, 10))
    admin.futures[-1].set_result(SimpleNamespace(topic_partitions=[loading]))
    clock.now += 1
    lag.flush_due()  # not reported; sent again at once (not after the 5 s interval)
    assert len(admin.requests) == 2
    for _ in range(30):
        admin.futures[-1].set_result(SimpleNamespace(topic_partitions=[loading]))
        clock.now += 1
        try:
            lag.flush_due()
        except LagCommitFailed as exc:
            assert "COORDINATOR_LOAD_IN_PROGRESS" in str(exc) or "load in progress" in str(exc)
            break
    else:
        raise AssertionError("a refusal that goes on for 30 s was never reported")
    admin.succeed()
    lag.flush_due()
