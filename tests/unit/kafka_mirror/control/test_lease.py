"""One writer per flow: the lease in Kafka (kafka_mirror.control.lease), with a hand-written
cluster that fences transactional producers as a broker does (``initTransactions`` bumps the
producer epoch of the transactional ID; a commit of an older epoch fails as fenced) and a clock
the test moves. The lease threads are not started: each step is called as the thread would."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from kafka_mirror.config.model import ClusterSpec
from kafka_mirror.control.lease import FlowLease, LeaseRecord

TID = "kafka-mirror.lease.A_to_B"
LEASE_MS = 8_000


class Cluster:
    """The lease topic's partition 0 and the transaction coordinator's producer epochs."""

    def __init__(self) -> None:
        self.log: list[tuple[bytes, bytes]] = []
        self.epochs: dict[str, int] = {}
        self.down = False  # commits time out


class Message:
    def __init__(self, offset: int, key: bytes, value: bytes) -> None:
        self._offset, self._key, self._value = offset, key, value

    def error(self) -> None:
        return None

    def offset(self) -> int:
        return self._offset

    def key(self) -> bytes:
        return self._key

    def value(self) -> bytes:
        return self._value


class FakeProducer:
    def __init__(self, cluster: Cluster, conf: dict[str, Any]) -> None:
        self.cluster, self.tid = cluster, conf["transactional.id"]
        self.epoch = -1
        self.pending: list[tuple[bytes, bytes]] = []

    def init_transactions(self, timeout: float) -> None:
        self.epoch = self.cluster.epochs[self.tid] = self.cluster.epochs.get(self.tid, 0) + 1

    def begin_transaction(self) -> None:
        self.pending = []

    def produce(self, topic: str, key: bytes, value: bytes, partition: int) -> None:
        self.pending.append((key, value))

    def commit_transaction(self, timeout: float) -> None:
        if self.cluster.down:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "timed out", retriable=True))
        if self.epoch != self.cluster.epochs[self.tid]:
            raise KafkaException(KafkaError(KafkaError._FENCED, "producer fenced", fatal=True))
        self.cluster.log.extend(self.pending)

    def abort_transaction(self, timeout: float) -> None:
        self.pending = []

    def flush(self, timeout: float) -> int:
        return 0


class FakeConsumer:
    def __init__(self, cluster: Cluster) -> None:
        self.cluster, self.position = cluster, 0

    def assign(self, partitions: list[Any]) -> None:
        self.position = 0

    def get_watermark_offsets(self, tp: Any, timeout: float) -> tuple[int, int]:
        return 0, len(self.cluster.log)

    def poll(self, timeout: float) -> Message | None:
        if self.position >= len(self.cluster.log):
            return None
        key, value = self.cluster.log[self.position]
        self.position += 1
        return Message(self.position - 1, key, value)

    def close(self) -> None:
        pass


class Admin:
    def ensure_compacted_topic(self, topic: str, replication_factor: int = -1) -> bool:
        return False


class Clock:
    now = 1000.0

    def __call__(self) -> float:
        return self.now


def _lease(cluster: Cluster, clock: Clock, name: str, changes: list[str] | None = None
           ) -> FlowLease:
    seen = changes if changes is not None else []
    lease = FlowLease(
        "A->B", TID, ClusterSpec("B", {"bootstrap.servers": "127.0.0.1:2"}), Admin(),  # type: ignore[arg-type]
        LEASE_MS, on_change=lambda: seen.append(name), holder=name,
        producer_factory=lambda conf: FakeProducer(cluster, conf),
        consumer_factory=lambda conf: FakeConsumer(cluster), clock=clock,
    )
    lease._thread = None
    return lease


def _start(lease: FlowLease) -> FlowLease:
    """start() without its thread."""
    lease._set_up()
    return lease


def _records(cluster: Cluster) -> list[LeaseRecord | None]:
    return [LeaseRecord.decode(value) for _, value in cluster.log]


def test_the_first_instance_takes_the_lease_the_second_stands_by() -> None:
    cluster, clock = Cluster(), Clock()
    a = _start(_lease(cluster, clock, "a"))
    b = _start(_lease(cluster, clock, "b"))
    assert a.held() and a.role == "active"
    assert not b.held() and b.role == "standby"
    assert b.describe()["holder"] == "a" and b.describe()["epoch"] == 1
    # renewed in time, the holder keeps it and the standby never takes it
    for _ in range(10):
        clock.now += a.renew_every
        a._renew()
        b._watch(0)
        assert a.held() and not b._free()


def test_a_holder_that_stops_renewing_stops_writing_before_the_standby_takes_over() -> None:
    cluster, clock = Cluster(), Clock()
    changes: list[str] = []
    a = _start(_lease(cluster, clock, "a", changes))
    b = _start(_lease(cluster, clock, "b", changes))
    clock.now += 0.81 * a.lease  # a paused (SIGSTOP, a long GC): it may no longer write
    assert not a.held()
    assert not b._free()  # ... before b may take over
    clock.now += 0.19 * a.lease
    assert b._free()
    b._claim()
    assert b.held() and b.epoch == 2
    # a resumes: its renewal fails as fenced (b's initTransactions bumped the producer epoch)
    a._renew()
    assert not a.held() and a._active is False
    assert changes == ["a", "b", "a"]  # a took it, b took it, a lost it
    assert [(r.holder, r.epoch, r.held) for r in _records(cluster) if r] == [
        ("a", 1, True), ("b", 2, True)]


def test_a_holder_that_sees_its_successor_stops_without_waiting_for_a_renewal() -> None:
    cluster, clock = Cluster(), Clock()
    a = _start(_lease(cluster, clock, "a"))
    b = _start(_lease(cluster, clock, "b"))
    clock.now += a.lease
    b._claim()
    a._watch(0)  # its own record
    a._watch(0)  # b's
    assert a.last is not None and a.last.holder == "b" and a.last.held
    a._lose(f"{a.last.holder} took it")  # what the thread does on seeing it
    assert not a.held()


def test_a_released_lease_is_taken_at_once() -> None:
    cluster, clock = Cluster(), Clock()
    a = _start(_lease(cluster, clock, "a"))
    b = _start(_lease(cluster, clock, "b"))
    a.release()
    b._watch(0)
    assert b._free()
    b._claim()
    assert b.held() and not a.held()
    assert [r.held for r in _records(cluster) if r] == [True, False, True]


def test_two_standbys_claiming_at_once_leave_one_holder() -> None:
    cluster, clock = Cluster(), Clock()
    b, c = _lease(cluster, clock, "b"), _lease(cluster, clock, "c")
    for lease in (b, c):
        lease._consumer = lease._consumer_factory({})
        lease._producer = lease._new_producer()
    b._producer.init_transactions(1)
    c._producer.init_transactions(1)  # fences b
    with pytest.raises(KafkaException):
        b._write(LeaseRecord("b", 1, True))
    c._write(LeaseRecord("c", 1, True))
    assert [r.holder for r in _records(cluster) if r] == ["c"]


def test_lease_records_read_back() -> None:
    record = LeaseRecord("host:1:ab", 3, True)
    assert LeaseRecord.decode(record.encode()) == record
    assert LeaseRecord.decode(b"not json") is None
    assert LeaseRecord.decode(None) is None


def test_a_renewal_that_times_out_starts_a_new_transaction_or_gives_the_lease_up() -> None:
    cluster, clock = Cluster(), Clock()
    a = _start(_lease(cluster, clock, "a"))
    cluster.down = True
    clock.now += a.renew_every
    a._renew()  # times out: the producer is dropped (librdkafka allows no new transaction on it)
    assert a._producer is None and a.holds
    cluster.down = False
    clock.now += a.renew_every
    a._renew()  # a new producer, initTransactions, the renewal
    assert a.held() and a._producer is not None
    cluster.down = True
    for _ in range(4):
        clock.now += a.renew_every
        a._renew()
    assert not a.holds  # past 0.8 of a lease without a renewal: given up, not kept by force
    cluster.down = False
    assert a._free()  # its own record: taken again at once
    a._claim()
    assert a.held()


def test_a_lease_the_cluster_refuses_names_the_acls(caplog: pytest.LogCaptureFixture) -> None:
    cluster, clock = Cluster(), Clock()
    lease = _lease(cluster, clock, "a")

    def refused(conf: dict[str, Any]) -> FakeProducer:
        producer = FakeProducer(cluster, conf)

        def init(timeout: float) -> None:
            raise KafkaException(KafkaError(KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                            "Transactional Id authorization failed"))
        producer.init_transactions = init  # type: ignore[method-assign]
        return producer

    lease._producer_factory = refused
    _start(lease)
    assert not lease.held()
    assert "allows its principal WRITE and DESCRIBE on the topic kafka-mirror.leases and on the " \
        "transactional ID kafka-mirror.lease.A_to_B" in caplog.text
