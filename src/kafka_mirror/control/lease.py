"""One writer per flow: a lease held in Kafka, on the flow's target cluster.

Every instance given a flow (several hosts, or several processes on one host) takes part. A flow
is known by its lag group (``mirror.lag.group.id``, default ``kafka-mirror.<source>_to_<target>``):
instances that share it are one flow, while flows of the same two clusters with lag groups of
their own (other topics, e.g. an aggregation spread over hosts) are not (:func:`lease_names`).
The lease is a record per flow (key: its lag group) in the compacted topic
``kafka-mirror.leases`` on the target, written in a Kafka transaction by a producer whose
``transactional.id`` is the flow's (``kafka-mirror.lease.<source>_to_<target>`` by default):

- The holder renews it every ``lease / 4``. A batch is written only while the last renewal began
  less than ``0.8 x lease`` ago (:meth:`FlowLease.held`), so a holder that paused (SIGSTOP, a long
  GC, a cut network) stops writing before anyone may take over.
- Another instance (a standby) watches the topic and takes the lease when it saw no renewal for a
  whole ``lease`` (or the holder released it at its stop: at once). Taking it starts with
  ``initTransactions`` of the flow's ``transactional.id``: the broker bumps the producer epoch,
  so the previous holder's next renewal fails as fenced and it knows it lost the lease, even if
  it was paused past it and never saw the takeover (a zombie).
- Two standbys claiming at once: the one whose ``initTransactions`` came last fences the other,
  whose commit fails; exactly one holds it.

A holder's record: ``{"holder": "<host>:<pid>:<id>", "epoch": n, "held": true, "selects":
"<topics>"}``; released: ``"held": false``. A standby whose flow selects other topics than the
holder's says so (a warning: two flows that need lag groups of their own, or a change rolling
out). ``epoch`` counts the takeovers (for status and metrics; the fence is the
producer epoch).

Every instance also says it takes part: a record keyed ``<flow>#member#<member>`` (``member``:
its host and state dir, the same across its restarts) every lease, outside transactions, and a
tombstone at a clean stop. An instance seen within :data:`LIVE_LEASES` leases is live; one
unseen since, without a clean stop (a host lost, kill -9), is lost for a day
(:data:`LOST_FOR_SECONDS`), after which it counts as gone: status, metrics and the alert on a
flow that lost its standby read them.

Needs, on the target, WRITE and DESCRIBE on the topic and on the transactional IDs
``kafka-mirror.lease.*`` (and CREATE on the topic, or create it beforehand: compacted, one
partition).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import (
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

from kafka_mirror.config.model import ClusterSpec
from kafka_mirror.failure_streak import FailureStreak
from kafka_mirror.kafka.admin import ClusterAdmin
from kafka_mirror.kafka.clients import control_consumer_config, control_producer_config

log = logging.getLogger(__name__)

LEASE_TOPIC = "kafka-mirror.leases"
ACTIVE, STANDBY = "active", "standby"
# a holder writes while its last renewal began less than this share of the lease ago
HELD_SHARE = 0.8
# a member is live while seen within this many leases; lost (not stopped cleanly) for a day
LIVE_LEASES = 3
LOST_FOR_SECONDS = 86_400.0
MEMBER_MARK = "#member#"
_DENIED = frozenset({KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                     KafkaError.TOPIC_AUTHORIZATION_FAILED,
                     KafkaError.CLUSTER_AUTHORIZATION_FAILED})


def holder_id() -> str:
    """This process's name in lease records: host, PID and a random part."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def lease_names(lag_group_id: str) -> tuple[str, str]:
    """The lease's record key and transactional ID of the flow whose lag group is
    ``lag_group_id`` (``kafka-mirror.A_to_B`` -> ``kafka-mirror.lease.A_to_B``)."""
    return lag_group_id, f"kafka-mirror.lease.{lag_group_id.removeprefix('kafka-mirror.')}"


def member_id(state_dir: str) -> str:
    """An instance's name among a flow's members: its host and state dir (kept across its
    restarts, unlike its holder name)."""
    return f"{socket.gethostname()}:{state_dir}"


@dataclass(frozen=True)
class LeaseRecord:
    holder: str
    epoch: int
    held: bool
    selects: str = ""  # the holder's topic selection

    def encode(self) -> bytes:
        return json.dumps({"holder": self.holder, "epoch": self.epoch, "held": self.held,
                           "selects": self.selects}, separators=(",", ":")).encode("utf-8")

    @staticmethod
    def decode(value: bytes | None) -> LeaseRecord | None:
        if value is None:
            return None
        try:
            data = json.loads(value.decode("utf-8"))
            return LeaseRecord(str(data["holder"]), int(data["epoch"]), bool(data["held"]),
                               str(data.get("selects", "")))
        except (ValueError, KeyError, TypeError, AttributeError):
            return None


class FlowLease:
    """The lease of one flow, kept by a thread of its own: ``held()`` tells whether this
    instance may write the flow now; ``on_change`` is called (on that thread) when it is
    taken or lost, and ``on_held`` with the time (on ``clock``) until which this instance may
    write after every claim and renewal, None when it lost or released the lease."""

    def __init__(
        self,
        flow_name: str,
        transactional_id: str,
        target: ClusterSpec,
        admin: ClusterAdmin,
        lease_ms: int,
        on_change: Callable[[], None] = lambda: None,
        *,
        holder: str | None = None,
        topic: str = LEASE_TOPIC,
        producer_factory: Callable[[dict[str, Any]], Any] = Producer,
        consumer_factory: Callable[[dict[str, Any]], Any] = Consumer,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        member: str | None = None,
        key: str | None = None,
        selects: str = "",
        on_held: Callable[[float | None], None] = lambda _until: None,
    ) -> None:
        self.flow_name = flow_name
        self.on_held = on_held
        self.key = (key or flow_name).encode("utf-8")
        self.selects = selects
        self._selects_warned = ""
        self.transactional_id = transactional_id
        self.target = target
        self.admin = admin
        self.lease = lease_ms / 1000.0
        self.renew_every = self.lease / 4
        self.on_change = on_change
        self.holder = holder or holder_id()
        self.topic = topic
        self._producer_factory = producer_factory
        self._consumer_factory = consumer_factory
        self._clock = clock
        self._wall = wall
        self.member = member or self.holder
        self._member_prefix = self.key + MEMBER_MARK.encode()
        self._member_key = self._member_prefix + self.member.encode("utf-8")
        self._members: dict[str, float] = {}  # member -> wall clock it was last seen at
        self._announced_at = float("-inf")
        self._announcer: Any = None
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._renewed = threading.Event()  # a renewal (or a loss) since a batch began to wait
        self._settled = threading.Event()  # the first step of start() is done
        self._failing = False  # renewals (or claims) fail: reported once until one succeeds
        # the thread's rounds that failed in a row
        self._upkeep_failures = FailureStreak(log, f"flow {self.flow_name}: lease upkeep")
        self._thread: threading.Thread | None = None
        self._producer: Any = None
        self._consumer: Any = None
        # what the topic says: the last record of this flow, and when it was seen
        self.last: LeaseRecord | None = None
        self._seen_at = clock()
        # this instance: active since it took the lease; the start of its last renewal
        self._active = False
        self._renewed_at = float("-inf")
        self.epoch = 0
        self.taken_at: float | None = None

    # ------------------------------------------------------------------ what the flow asks

    def held(self) -> bool:
        """This instance holds the lease and renewed it recently enough to write a batch."""
        with self._lock:
            return self._active and self._clock() - self._renewed_at < HELD_SHARE * self.lease

    @property
    def holds(self) -> bool:
        """This instance took the lease and did not lose it (its last renewal may be late)."""
        return self._active

    def wait_held(self) -> bool:
        """Before a batch: :meth:`held`, once a late renewal came (a busy machine), or False
        when the lease is lost or still not renewed within a lease."""
        deadline = self._clock() + self.lease
        while self._active and not self.held() and self._clock() < deadline:
            self._renewed.wait(0.05)
        return self.held()

    @property
    def role(self) -> str:
        return ACTIVE if self.held() else STANDBY

    def describe(self) -> dict[str, Any]:
        """Role, epoch, holder, the lease's age and the flow's members (status, metrics)."""
        role = self.role
        with self._lock:
            last = self.last
            # since the holder's last renewal as this instance knows it: its own, or the last
            # record of the lease it saw
            age = self._clock() - (self._renewed_at if self._active else self._seen_at)
            now = self._wall()
            seen = {self.member: now, **self._members}
        live = sorted(m for m, at in seen.items() if now - at <= LIVE_LEASES * self.lease)
        lost = {m: round(now - at, 1) for m, at in sorted(seen.items())
                if LIVE_LEASES * self.lease < now - at <= LOST_FOR_SECONDS}
        return {
            "role": role,
            "epoch": last.epoch if last else 0,
            "holder": last.holder if last and last.held else None,
            "this_instance": self.holder,
            "member": self.member,
            "lease_age_seconds": round(max(age, 0.0), 1),
            "members_live": live,
            "members_lost": lost,
        }

    # ------------------------------------------------------------------ life

    def start(self) -> FlowLease:
        """Read where the lease stands and take it when it is free, then keep it (or watch it),
        all on a thread of its own: the first step (a claim waits for the target's transaction
        coordinator, which a cluster that never had a transaction creates first) runs while
        the process does other start-up work; :meth:`settle` waits for it."""
        self._thread = threading.Thread(target=self._first_step_then_run,
                                        name=f"lease {self.flow_name}", daemon=True)
        self._thread.start()
        return self

    def settle(self, timeout: float) -> bool:
        """Wait (up to ``timeout`` seconds) until the lease's first step is done: taken, found
        held by another instance, or not known yet (the thread tries again); whether it is."""
        return self._settled.wait(timeout)

    def _first_step_then_run(self) -> None:
        try:
            self._set_up()
        except Exception as exc:  # the thread tries again; the flow stands by meanwhile
            log.warning("flow %s: the lease in %s on cluster '%s' is not known yet (%s); "
                        "trying again", self.flow_name, self.topic, self.target.alias,
                        (str(exc).splitlines() or [""])[0])
        finally:
            self._settled.set()
        self._run()

    def _set_up(self) -> None:
        """The topic, the watching consumer, where the lease stands; taken when free."""
        if self._consumer is None:
            self.admin.ensure_compacted_topic(self.topic)
            consumer = self._consumer_factory(
                {**control_consumer_config(self.target), "isolation.level": "read_committed"})
            self._consumer = consumer
            try:
                self._catch_up()
            except Exception:
                self._consumer = None
                consumer.close()
                raise
        if self._free():
            self._claim()

    def release(self) -> None:
        """At a clean stop, once the flow writes no more: hand the lease over at once."""
        self._closing.set()
        if self._thread is not None:
            self._thread.join(timeout=self.lease)
        with self._lock:
            active, self._active = self._active, False
        self.on_held(None)
        if self._thread is not None and self._thread.is_alive():
            # still in a call on its clients: closing them (or writing with them) under it
            # could abort the process (librdkafka asserts on a consumer closed mid-call); they
            # go with the process, and the lease lapses
            log.warning("flow %s: the lease thread did not end within %.0f s of the stop; the "
                        "lease is left to lapse", self.flow_name, self.lease)
            return
        if active and self._producer is not None:
            try:
                self._write(LeaseRecord(self.holder, self.epoch, False, self.selects))
                log.info("flow %s: lease released (epoch %d)", self.flow_name, self.epoch)
            except KafkaException as exc:
                log.warning("flow %s: the lease was not released (%s); another instance takes "
                            "it over once it lapses", self.flow_name, _reason(exc))
        self._announce(leaving=True)
        self.close()

    def close(self) -> None:
        self._closing.set()
        for client in (self._consumer, self._producer, self._announcer):
            try:
                if client is self._consumer and client is not None:
                    client.close()
                elif client is not None:
                    client.flush(1)
            except Exception as exc:  # closing: nothing depends on it
                log.debug("flow %s: lease client not closed cleanly: %s", self.flow_name, exc)
        self._consumer = self._producer = self._announcer = None

    # ------------------------------------------------------------------ the thread

    def _run(self) -> None:
        while not self._closing.is_set():
            try:
                if self._consumer is None:
                    self._closing.wait(self.renew_every)
                    self._set_up()
                    continue
                self._watch(self._until_next_step())
                if self._closing.is_set():
                    return
                if self._clock() - self._announced_at >= self.lease:
                    self._announce()
                if self._active:
                    taken = self.last
                    if taken is not None and taken.held and taken.holder != self.holder:
                        self._lose(f"{taken.holder} took it (epoch {taken.epoch})")
                    elif self._clock() - self._renewed_at >= self.renew_every:
                        self._renew()
                elif self._may_claim():
                    self._claim()
                self._upkeep_failures.succeeded()
            except Exception as exc:  # a defect or an unexpected client error: go on
                self._upkeep_failures.failed(exc)
                self._closing.wait(self.renew_every)

    def _until_next_step(self) -> float:
        """How long to watch the topic before the next step: a renewal period, or, for a standby,
        until the holder's lease lapses if that comes sooner (so the lease is taken when it
        lapses, not up to a period later)."""
        if self._active:
            return self.renew_every
        with self._lock:
            lapses_in = self._seen_at + self.lease - self._clock()
        return max(0.0, min(self.renew_every, lapses_in))

    def _watch(self, timeout: float) -> None:
        """Records of the lease topic that arrived, for up to ``timeout`` seconds."""
        deadline = self._clock() + timeout
        while not self._closing.is_set():
            message = self._consumer.poll(max(0.0, min(deadline - self._clock(), 0.5)))
            if message is None or message.error() is not None:
                if self._clock() >= deadline:
                    return
                continue
            if self._read(message):
                return  # acted on at once (a release, a takeover)

    def _read(self, message: Any) -> bool:
        """A record of the lease topic taken in; whether it was this flow's lease record."""
        if message.key() == self.key:
            self._saw(LeaseRecord.decode(message.value()))
            return True
        self._saw_member(message.key(), message.value(), self._wall())
        return False

    def _may_claim(self) -> bool:
        """Whether this instance takes the lease now: it is free by what this instance saw, and
        still so once it read the topic to its end (what it saw may be old: a standby, or a holder
        that gave the lease up, paused past it, must not act on what it saw before the pause)."""
        return self._free() and self._caught_up() and self._free()

    def _caught_up(self) -> bool:
        """Read the lease topic to where it ends now (within a quarter lease); False when that
        end was not reached in time (no claim on what may be old)."""
        return self._read_to_end(self.renew_every, self._read)

    def _read_to_end(self, within: float, take: Callable[[Any], object],
                     first: bool = False) -> bool:
        """Hand the lease topic's records to ``take`` up to where it ends now, for at most
        ``within`` seconds; whether that end was reached. It is reached once the consumer's
        position is there (librdkafka moves it past the last transaction marker before a fetch
        reports the end), or at an end-of-partition event there (read_committed: the end a
        reader reaches is the last committed record's). ``first``: the read of a start, from
        the topic's first offset, assigned as a number (a logical ``beginning`` costs librdkafka
        half a second before its first fetch), and ended by any end-of-partition event."""
        partition = TopicPartition(self.topic, 0)
        low, high = self._consumer.get_watermark_offsets(partition, timeout=within)
        if first:
            self._consumer.assign([TopicPartition(self.topic, 0, low)])
        deadline = self._clock() + within
        while not self._closing.is_set():
            if high <= low or self._consumer.position([partition])[0].offset >= high:
                return True
            if self._clock() >= deadline:
                return False
            message = self._consumer.poll(0.05)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF and (first or
                                                                  message.offset() >= high):
                    return True
                continue
            take(message)
        return False

    def _saw(self, record: LeaseRecord | None) -> None:
        with self._lock:
            self.last, self._seen_at = record, self._clock()
        if record is not None and record.held and record.holder != self.holder and \
                record.selects and self.selects and record.selects != self.selects and \
                record.selects != self._selects_warned:
            self._selects_warned = record.selects
            log.warning("flow %s: the lease %s is held by %s, whose flow selects other topics "
                        "(%s; this instance: %s): if these are two flows, give each a "
                        "mirror.lag.group.id of its own (instances with the same lag group are "
                        "one flow, one of them writes it)", self.flow_name,
                        self.key.decode("utf-8", "replace"), record.holder, record.selects,
                        self.selects)

    def _saw_member(self, key: bytes | None, value: bytes | None, at: float) -> None:
        """A member's record (``at``: when it was written, or seen) or tombstone (a clean
        stop); this instance's own are not counted (it is live while it runs)."""
        if key is None or not key.startswith(self._member_prefix) or key == self._member_key:
            return
        member = key[len(self._member_prefix):].decode("utf-8", "replace")
        with self._lock:
            if value is None:
                self._members.pop(member, None)
            else:
                self._members[member] = max(at, self._members.get(member, at))

    def _announce(self, leaving: bool = False) -> None:
        """This instance takes part (every lease), or left (a clean stop: a tombstone). A
        failure is retried at the next lease: presence only feeds status and alerts."""
        self._announced_at = self._clock()
        try:
            if self._announcer is None:
                if leaving:
                    return  # never announced: nothing to take back
                self._announcer = self._producer_factory(control_producer_config(self.target))
            value = None if leaving else json.dumps(
                {"member": self.member, "holder": self.holder}, separators=(",", ":")).encode()
            self._announcer.produce(self.topic, key=self._member_key, value=value, partition=0)
            self._announcer.poll(0)
            if leaving:
                self._announcer.flush(self.lease / 2)
        except Exception as exc:  # BufferError, KafkaException: the next lease tries again
            log.debug("flow %s: membership not written: %s", self.flow_name, exc)

    def _free(self) -> bool:
        """Whether this standby may take the lease: never held, released, or not renewed by
        its holder for a whole lease."""
        last = self.last
        if last is None or not last.held or last.holder == self.holder:
            return True
        return self._clock() - self._seen_at >= self.lease

    def _claim(self) -> None:
        previous = self.last
        began = self._clock()
        try:
            self._producer = self._producer or self._new_producer()
            self._producer.init_transactions(self.lease)  # fences the previous holder
            epoch = (previous.epoch if previous else 0) + 1
            self._write(LeaseRecord(self.holder, epoch, True, self.selects))
        except KafkaException as exc:
            self._drop_producer()
            if not self._failing:
                self._failing = True
                error = exc.args[0] if exc.args else None
                if isinstance(error, KafkaError) and error.code() in _DENIED:
                    log.warning(
                        "flow %s: lease not taken (%s): this instance does not mirror the flow "
                        "until cluster '%s' allows its principal WRITE and DESCRIBE on the topic "
                        "%s and on the transactional ID %s (or mirror.lease.ms = 0 turns the "
                        "lease off)", self.flow_name, _reason(exc), self.target.alias,
                        self.topic, self.transactional_id)
                else:
                    log.info("flow %s: lease not taken (%s); watching it", self.flow_name,
                             _reason(exc))
            return
        self._failing = False
        with self._lock:
            self._active, self._renewed_at, self.epoch = True, began, epoch
            self.taken_at = self._clock()
        self.on_held(began + HELD_SHARE * self.lease)
        was = f"; was held by {previous.holder}" if previous and previous.held else ""
        log.info("flow %s: lease taken (epoch %d%s): this instance writes the flow",
                 self.flow_name, epoch, was)
        self.on_change()

    def _renew(self) -> None:
        """Renew the lease. A renewal that fails without a fence (the cluster unreachable, a
        timeout) leaves a producer librdkafka allows no new transaction on: the next renewal
        starts a new one (``initTransactions`` again), as long as no standby may have taken
        the lease meanwhile (less than ``HELD_SHARE`` of a lease since the last renewal);
        past that, the lease is given up and taken again only when free."""
        began = self._clock()
        try:
            if began - self._renewed_at >= HELD_SHARE * self.lease:
                self._lose(f"not renewed for {HELD_SHARE * self.lease:.1f} s", taken=False)
                return
            if self._producer is None:
                self._producer = self._new_producer()
                self._producer.init_transactions(self.lease / 2)
            self._write(LeaseRecord(self.holder, self.epoch, True, self.selects))
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            fenced = isinstance(error, KafkaError) and (error.fatal() or error.code() in (
                KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                KafkaError.INVALID_PRODUCER_EPOCH))
            if fenced:
                self._lose(_reason(exc))
                return
            self._drop_producer()
            if not self._failing:
                self._failing = True
                log.warning("flow %s: lease not renewed (%s); writing pauses when it is %.1f s "
                            "old", self.flow_name, _reason(exc), HELD_SHARE * self.lease)
            return
        with self._lock:
            self._renewed_at = began
        self.on_held(began + HELD_SHARE * self.lease)
        if self._failing:
            self._failing = False
            log.info("flow %s: lease renewed again", self.flow_name)
        self._renewed.set()
        self._renewed.clear()

    def _lose(self, why: str, taken: bool = True) -> None:
        self._drop_producer()
        with self._lock:
            self._active = False
        self.on_held(None)
        self._failing = False
        if taken:
            log.warning("flow %s: lease lost: another instance took the flow over (%s); this "
                        "instance stops writing it and stands by", self.flow_name, why)
        else:
            log.warning("flow %s: lease given up (%s): this instance stops writing the flow and "
                        "takes the lease again once it is free", self.flow_name, why)
        self.on_change()

    # ------------------------------------------------------------------ clients

    def _write(self, record: LeaseRecord) -> None:
        producer = self._producer
        producer.begin_transaction()
        try:
            producer.produce(self.topic, key=self.key, value=record.encode(), partition=0)
            producer.commit_transaction(self.lease / 2)
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            if isinstance(error, KafkaError) and error.txn_requires_abort():
                with contextlib.suppress(KafkaException):
                    producer.abort_transaction(self.lease / 2)
            raise

    def _new_producer(self) -> Any:
        conf = control_producer_config(self.target)
        conf.update({"transactional.id": self.transactional_id,
                     "transaction.timeout.ms": max(int(self.lease * 1000), 1000)})
        return self._producer_factory(conf)

    def _drop_producer(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            try:
                producer.flush(0)
            except Exception as exc:  # a fenced producer: nothing to deliver
                log.debug("flow %s: %s", self.flow_name, exc)

    def _catch_up(self) -> None:
        """Read the topic to its end: where the lease stands. A holder found there has a whole
        lease from now to renew it."""
        self._read_to_end(self.lease * 2, self._take_stamped, first=True)
        with self._lock:
            self._seen_at = self._clock()

    def _take_stamped(self, message: Any) -> None:
        """A record read at a start: a member's last sign of life is its record's time."""
        if message.key() == self.key:
            self._saw(LeaseRecord.decode(message.value()))
            return
        kind, stamp = message.timestamp()
        self._saw_member(message.key(), message.value(),
                         stamp / 1000.0 if kind != TIMESTAMP_NOT_AVAILABLE else self._wall())


def _reason(exc: KafkaException) -> str:
    error = exc.args[0] if exc.args else None
    return error.str() if isinstance(error, KafkaError) else str(exc)
