"""One writer per flow: the lease in Kafka (kafka_mirror.control.lease), with a hand-written
cluster that fences transactional producers as a broker does (``initTransactions`` bumps the
producer epoch of the transactional ID; a commit of an older epoch fails as fenced) and a clock
the test moves. The lease threads are not started: each step is called as the thread would."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME, KafkaError, KafkaException, TopicPartition

from kafka_mirror.config.model import ClusterSpec
from kafka_mirror.control.lease import FlowLease, LeaseRecord

TID = "kafka-mirror.lease.A_to_B"
LEASE_MS = 8_000


class Clock:
    now = 1000.0

    def __call__(self) -> float:
        return self.now


class Cluster:
    """The lease topic's partition 0 (with each record's create time, from ``clock``) and the
    transaction coordinator's producer epochs."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.log: list[tuple[bytes, bytes | None]] = []
        self.stamps: list[float] = []
        self.clock = clock or Clock()
        self.epochs: dict[str, int] = {}
        self.down = False  # commits time out

    def append(self, records: list[tuple[bytes, bytes | None]]) -> None:
        self.log.extend(records)
        self.stamps.extend(self.clock() for _ in records)


class Message:
    def __init__(self, offset: int, key: bytes, value: bytes | None, stamp: float) -> None:
        self._offset, self._key, self._value, self._stamp = offset, key, value, stamp

    def timestamp(self) -> tuple[int, int]:
        return TIMESTAMP_CREATE_TIME, int(self._stamp * 1000)

    def error(self) -> None:
        return None

    def offset(self) -> int:
        return self._offset

    def key(self) -> bytes:
        return self._key

    def value(self) -> bytes | None:
        return self._value


class FakeProducer:
    def __init__(self, cluster: Cluster, conf: dict[str, Any]) -> None:
        self.cluster, self.tid = cluster, conf.get("transactional.id")
        self.epoch = -1
        self.pending: list[tuple[bytes, bytes | None]] = []

    def init_transactions(self, timeout: float) -> None:
        self.epoch = self.cluster.epochs[self.tid] = self.cluster.epochs.get(self.tid, 0) + 1

    def begin_transaction(self) -> None:
        self.pending = []

    def produce(self, topic: str, key: bytes, value: bytes | None, partition: int) -> None:
        if self.tid is None:  # outside transactions: written at once
            self.cluster.append([(key, value)])
        else:
            self.pending.append((key, value))

    def poll(self, timeout: float) -> int:
        return 0

    def commit_transaction(self, timeout: float) -> None:
        if self.cluster.down:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "timed out", retriable=True))
        if self.epoch != self.cluster.epochs[self.tid]:
            raise KafkaException(KafkaError(KafkaError._FENCED, "producer fenced", fatal=True))
        self.cluster.append(self.pending)

    def abort_transaction(self, timeout: float) -> None:
        self.pending = []

    def flush(self, timeout: float) -> int:
        return 0


class FakeConsumer:
    def __init__(self, cluster: Cluster) -> None:
        self.cluster, self.at = cluster, 0

    def assign(self, partitions: list[Any]) -> None:
        self.at = 0

    def get_watermark_offsets(self, tp: Any, timeout: float) -> tuple[int, int]:
        return 0, len(self.cluster.log)

    def position(self, partitions: list[Any]) -> list[Any]:
        return [TopicPartition(tp.topic, tp.partition, self.at) for tp in partitions]

    def poll(self, timeout: float) -> Message | None:
        if self.at >= len(self.cluster.log):
            return None
        key, value = self.cluster.log[self.at]
        self.at += 1
        return Message(self.at - 1, key, value, self.cluster.stamps[self.at - 1])

    def close(self) -> None:
        pass


class Admin:
    def ensure_compacted_topic(self, topic: str, replication_factor: int = -1) -> bool:
        return False


def _lease(cluster: Cluster, clock: Clock, name: str, changes: list[str] | None = None,
           member: str | None = None, held: list[float | None] | None = None) -> FlowLease:
    seen = changes if changes is not None else []
    until = held if held is not None else []
    lease = FlowLease(
        "A->B", TID, ClusterSpec("B", {"bootstrap.servers": "127.0.0.1:2"}), Admin(),  # type: ignore[arg-type]
        LEASE_MS, on_change=lambda: seen.append(name), holder=name,
        producer_factory=lambda conf: FakeProducer(cluster, conf),
        consumer_factory=lambda conf: FakeConsumer(cluster), clock=clock, wall=clock,
        member=member, on_held=until.append,
    )
    lease._thread = None
    return lease


def _start(lease: FlowLease) -> FlowLease:
    """start() without its thread."""
    lease._set_up()
    return lease


def _drain(lease: FlowLease) -> None:
    """What the lease's thread reads of the topic, up to its end."""
    while lease._consumer.at < len(lease._consumer.cluster.log):
        lease._watch(0)


def _records(cluster: Cluster) -> list[LeaseRecord | None]:
    return [LeaseRecord.decode(value) for _, value in cluster.log]


def test_the_first_instance_takes_the_lease_the_second_stands_by() -> None:
    clock = Clock()
    cluster = Cluster(clock)
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
    clock = Clock()
    cluster = Cluster(clock)
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


def _holder_and_standby() -> tuple[Clock, FlowLease, FlowLease]:
    """a holds the lease, b stands by; both read the topic to its end."""
    clock = Clock()
    cluster = Cluster(clock)
    a = _start(_lease(cluster, clock, "a"))
    b = _start(_lease(cluster, clock, "b"))
    _drain(a)
    _drain(b)
    return clock, a, b


def test_a_standby_wakes_when_the_holders_lease_lapses_not_a_renewal_period_later() -> None:
    clock, a, b = _holder_and_standby()
    assert a._until_next_step() == a.renew_every  # the holder renews every period
    assert b._until_next_step() == b.renew_every  # the lease lapses later than a period from now
    clock.now += 0.9 * b.lease  # a stopped renewing (kill -9)
    assert b._until_next_step() == pytest.approx(0.1 * b.lease)  # wakes when it lapses ...
    clock.now += 0.1 * b.lease
    assert b._until_next_step() == 0.0 and b._free()  # ... and takes it then
    clock.now += b.lease
    assert b._until_next_step() == 0.0


def test_a_holder_that_gave_the_lease_up_reads_where_it_stands_before_it_claims_again() -> None:
    clock, a, b = _holder_and_standby()
    clock.now += a.lease  # a paused (SIGSTOP) past its lease: b takes it over
    assert b._may_claim()
    b._claim()
    a._renew()  # a resumes: too late to renew, it gives the lease up (before it read b's record)
    assert not a.holds and a.last is not None and a.last.holder == "a"
    assert a._free()  # by what it saw before the pause ...
    assert not a._may_claim()  # ... but not once it read the topic to its end: b holds it
    assert a.last.holder == "b" and a.last.epoch == 2 and b.held()


def test_a_holder_that_sees_its_successor_stops_without_waiting_for_a_renewal() -> None:
    clock = Clock()
    cluster = Cluster(clock)
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
    clock = Clock()
    cluster = Cluster(clock)
    a = _start(_lease(cluster, clock, "a"))
    b = _start(_lease(cluster, clock, "b"))
    a.release()
    b._watch(0)
    assert b._free()
    b._claim()
    assert b.held() and not a.held()
    assert [r.held for r in _records(cluster) if r] == [True, False, True]


def test_two_standbys_claiming_at_once_leave_one_holder() -> None:
    clock = Clock()
    cluster = Cluster(clock)
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
    clock = Clock()
    cluster = Cluster(clock)
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
    clock = Clock()
    cluster = Cluster(clock)
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


def test_status_shows_the_holder_the_lease_age_and_the_members() -> None:
    clock = Clock()
    cluster = Cluster(clock)
    a = _start(_lease(cluster, clock, "host-a:1:x", member="host-a:/var/lib/kafka-mirror"))
    b = _start(_lease(cluster, clock, "host-b:2:y", member="host-b:/var/lib/kafka-mirror"))
    for lease in (a, b):
        lease._announce()
    for lease in (a, b):
        _drain(lease)
    clock.now += a.renew_every
    seen_by_b = b.describe()
    assert seen_by_b["role"] == "standby" and seen_by_b["holder"] == "host-a:1:x"
    assert seen_by_b["epoch"] == 1 and seen_by_b["lease_age_seconds"] == a.renew_every
    assert a.describe()["role"] == "active" and a.describe()["lease_age_seconds"] == a.renew_every
    both = ["host-a:/var/lib/kafka-mirror", "host-b:/var/lib/kafka-mirror"]
    assert a.describe()["members_live"] == both == b.describe()["members_live"]
    assert a.describe()["members_lost"] == {}

    # b's host is lost (no clean stop): after 3 leases unseen it is lost, for a day
    for _ in range(13):
        clock.now += a.renew_every
        a._renew()
        a._announce()
    assert a.describe()["members_live"] == ["host-a:/var/lib/kafka-mirror"]
    assert a.describe()["members_lost"] == {"host-b:/var/lib/kafka-mirror": 14 * a.renew_every}
    # an instance started now reads it from the topic the same way
    c = _start(_lease(cluster, clock, "host-c:3:z", member="host-c:/srv/mirror"))
    assert list(c.describe()["members_lost"]) == ["host-b:/var/lib/kafka-mirror"]
    assert c.describe()["members_live"] == ["host-a:/var/lib/kafka-mirror", "host-c:/srv/mirror"]
    clock.now += 86_400
    # a day on: taken for decommissioned
    assert "host-b:/var/lib/kafka-mirror" not in c.describe()["members_lost"]

    # b's host is back (a new process, the same member): live again
    clock.now -= 86_400
    b2 = _start(_lease(cluster, clock, "host-b:9:w", member="host-b:/var/lib/kafka-mirror"))
    b2._announce()
    _drain(a)
    assert a.describe()["members_lost"] == {}
    assert a.describe()["members_live"] == both

    # a clean stop takes the member out at once (a tombstone): nothing is lost
    b2.release()
    _drain(a)
    assert a.describe()["members_live"] == ["host-a:/var/lib/kafka-mirror"]
    assert a.describe()["members_lost"] == {}


def test_membership_records_leave_the_lease_alone() -> None:
    clock = Clock()
    cluster = Cluster(clock)
    a = _start(_lease(cluster, clock, "a", member="host-a:/s"))
    b = _start(_lease(cluster, clock, "b", member="host-b:/s"))
    for _ in range(8):  # only member records for a whole lease: b sees no renewal
        clock.now += a.renew_every / 2
        a._announce()
        b._watch(0)
    assert b._free()
    assert [r.holder for r in _records(cluster) if r] == ["a"]


def test_a_flow_is_known_by_its_lag_group() -> None:
    from kafka_mirror.control.lease import lease_names

    assert lease_names("kafka-mirror.A_to_B") == ("kafka-mirror.A_to_B",
                                                  "kafka-mirror.lease.A_to_B")
    assert lease_names("kafka-mirror.fleet2.A_to_B") == (
        "kafka-mirror.fleet2.A_to_B", "kafka-mirror.lease.fleet2.A_to_B")
    assert lease_names("mm1-group") == ("mm1-group", "kafka-mirror.lease.mm1-group")


def test_a_standby_whose_flow_selects_other_topics_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    cluster = Cluster(clock)
    a = _start(_lease(cluster, clock, "a"))
    a.selects = "orders.* excluding "
    clock.now += a.renew_every
    a._renew()
    b = _lease(cluster, clock, "b")
    b.selects = "payments.* excluding "
    _start(b)
    _drain(b)
    assert not b.held()
    assert "is held by a, whose flow selects other topics (orders.* excluding ; this instance: " \
        "payments.* excluding ): if these are two flows, give each a mirror.lag.group.id of " \
        "its own" in caplog.text
    assert caplog.text.count("selects other topics") == 1  # once per holder's selection
    clock.now += a.renew_every
    a._renew()
    _drain(b)
    assert caplog.text.count("selects other topics") == 1


def test_the_gate_is_told_until_when_the_holder_may_write() -> None:
    """``on_held`` (the source readers' gate): after the claim and every renewal, the time until
    which the holder may write (0.8 of a lease after the renewal began, when :meth:`held` turns
    false); None when the lease is lost or released. A renewal that fails says nothing: the
    gate closes at the last time it was told."""
    clock = Clock()
    cluster = Cluster(clock)
    held_a: list[float | None] = []
    held_b: list[float | None] = []
    a = _start(_lease(cluster, clock, "a", held=held_a))
    b = _start(_lease(cluster, clock, "b", held=held_b))
    assert held_a == [1000.0 + 0.8 * a.lease] and held_b == []
    clock.now += a.renew_every
    a._renew()
    assert held_a[-1] == clock.now + 0.8 * a.lease
    cluster.down = True
    clock.now += a.renew_every
    a._renew()
    assert len(held_a) == 2  # not renewed: nothing said, the last time stands
    cluster.down = False
    clock.now += a.lease  # a paused past its lease: b takes it, a is fenced
    b._watch(0)
    b._claim()
    assert held_b == [clock.now + 0.8 * b.lease]
    a._renew()
    assert held_a[-1] is None and not a.held()
    b.release()
    assert held_b[-1] is None


def test_an_upkeep_failing_round_after_round_warns_once_a_minute_not_each_round(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # a cluster down for minutes: the lease thread's rounds fail one after another (each a
    # renewal period apart); the log gets the first and every 60th, then that it works again
    clock = Clock()
    cluster = Cluster(clock)
    lease = _start(_lease(cluster, clock, "h1"))
    lease.renew_every = 0.001  # the thread's wait between failed rounds, in real seconds
    polls = []

    class Down(FakeConsumer):
        def poll(self, timeout: float) -> Message | None:
            polls.append(timeout)
            if len(polls) <= 121:
                raise KafkaException(KafkaError(KafkaError._TRANSPORT))
            clock.now += 1.0  # a good round: the watch ends at its deadline
            if len(polls) > 123:
                lease._closing.set()
            return None

    lease._consumer = Down(cluster)
    with caplog.at_level(logging.DEBUG, logger="kafka_mirror.control.lease"):
        lease._run()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert [w.split(" in a row")[0] for w in warnings] == [
        "flow A->B: lease upkeep failed (1", "flow A->B: lease upkeep failed (61",
        "flow A->B: lease upkeep failed (121"]
    assert "flow A->B: lease upkeep working again (121 failed before)" in caplog.text


def test_a_release_while_the_lease_thread_is_stuck_in_a_call_leaves_its_clients_alone(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    cluster = Cluster(clock)
    lease = _start(_lease(cluster, clock, "h1"))
    lease._claim()
    records = len(cluster.log)
    closed = []
    lease._consumer.close = lambda: closed.append("consumer")  # type: ignore[method-assign]
    stuck = threading.Event()
    lease._thread = threading.Thread(target=stuck.wait, daemon=True)  # a call that hangs
    lease._thread.start()
    lease.lease = 0.05
    try:
        with caplog.at_level(logging.WARNING, logger="kafka_mirror.control.lease"):
            lease.release()
    finally:
        stuck.set()
    assert closed == [] and len(cluster.log) == records  # neither closed nor written under it
    assert not lease.holds
    assert "the lease is left to lapse" in caplog.text
