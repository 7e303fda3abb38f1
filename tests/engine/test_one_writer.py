"""One writer per flow (issue 28): every instance given a flow takes part in an election held in
Kafka (kafka_mirror.control.lease); exactly one writes it, the others stand by with their Spark
session up and take over when its lease lapses, starting where the positions kept in Kafka say.

One run under continuous produce (1,000 records/s over 3 partitions), three instances of the same
flow, each with a state dir of its own (as on three hosts):
1. twins: A writes, B stands by (it never writes while A holds the lease);
2. a zombie: A is paused (SIGSTOP of its whole process tree) between batches, past its lease: B
   takes the flow over; A, resumed (SIGCONT), finds its lease taken and writes nothing more;
3. host loss: B is killed (kill -9 of its process tree): A takes over;
4. handover: C starts and stands by; A stops (SIGTERM): it releases the lease after its last
   batch and C takes over at once.
At the end every record is on the target exactly once, in order. The takeover times are printed.
The same run in real-time mode (Spark's real-time trigger: no batches to ask the lease before,
records read and written as they come): the source's readers ask the flow's write gate before
every record, so the zombie reads nothing once resumed, and each takeover proves its start from
the pairs (source position, target end) the previous writer kept in Kafka at its drains.
After the kill -9, a consumer group commits offsets inside what b copied: a's checkpoints
translate them from the offset syncs b wrote (a's own translation ranges end where it was
paused), never past them and within a batch. Along the way each instance's ``/status`` (what
``kafka-mirror status`` and the metrics show) says its role, the lease's epoch and holder, and
the flow's members: b, killed, is lost; a, stopped cleanly, is gone.
"""

from __future__ import annotations

import re
import socket
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from continuous import BATCH, ContinuousProducer, assert_no_duplicates, compare, mirror_config
from mirror_process import MirrorProcess, end_offsets

from kafka_mirror.cli.status import fetch_status
from kafka_mirror.config.mm2 import load_mm2
from kafka_mirror.control.failover import translate
from kafka_mirror_testing.localcluster import LOOPBACK, LocalKafkaCluster, free_port
from kafka_mirror_testing.waiting import wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.spark]
FLOW = "fsrc->fdst"
TAKEN = "this instance holds the lease now"
STANDING_BY = "standing by: the lease is held by"
READY = "ready to take over"  # a standby's clients and query path warmed
LEASE_MS = 5_000


@pytest.mark.parametrize("mode", ["micro-batch", "realtime"])
def test_one_instance_writes_a_flow_and_another_takes_over(
    source_cluster: LocalKafkaCluster, destination_cluster: LocalKafkaCluster,
    unique_topic: str, tmp_path: Path, mode: str,
) -> None:
    topic, target = unique_topic, f"fsrc.{unique_topic}"
    source_cluster.create_topic(topic, 3)
    ports = {name: free_port() for name in "abc"}

    def instance(name: str) -> MirrorProcess:
        # the same flow; a metrics endpoint of its own (as on another host)
        config = mirror_config(tmp_path / f"{name}.properties", source_cluster.bootstrap,
                               destination_cluster.bootstrap, topic,
                               f"mirror.lease.ms = {LEASE_MS}\nmirror.metrics.port = "
                               f"{ports[name]}\nmirror.metrics.bind.address = {LOOPBACK}\n"
                               "emit.checkpoints.interval.seconds = 1\n"
                               "refresh.groups.interval.seconds = 1\n"
                               # a flow (and lease) of its own: the other mode's run of this
                               # test shares the session's clusters; and only the test's topic
                               # (not heartbeats topics other tests left there)
                               f"mirror.lag.group.id = kafka-mirror.{topic}\n"
                               "heartbeats.replication.enabled = false\n",
                               realtime=mode == "realtime")
        return MirrorProcess(["run", str(config), "--state-dir", str(tmp_path / name)],
                             tmp_path / f"{name}.log").start()

    def lease(name: str) -> dict[str, Any]:
        """The flow's entry in instance ``name``'s /status: role and lease."""
        flows = fetch_status(f"http://{LOOPBACK}:{ports[name]}/status")["flows"]
        return {"role": flows[FLOW]["role"], **(flows[FLOW]["lease"] or {})}

    def member(name: str) -> str:
        return f"{socket.gethostname()}:{(tmp_path / name).resolve()}"

    group = f"{topic}-readers"

    def checkpointed() -> dict[int, tuple[int, int]]:
        """The group's last checkpoint per partition: (source offset, target offset)."""
        found = translate(load_mm2(tmp_path / "a.properties"), group)
        return {p: (c.upstream_offset, c.offset) for t in found
                for (_, p), c in t.offsets.items()}

    def on_target() -> int:
        return sum(end_offsets(destination_cluster, target).values())

    def grows(mirror: MirrorProcess, by: int = 1) -> float:
        """Seconds until the target holds ``by`` records more than now."""
        began, now = time.monotonic(), on_target()
        wait_for(lambda: on_target() >= now + by, 120, "records written by the new holder",
                 mirror)
        return time.monotonic() - began

    writer = ContinuousProducer(source_cluster, topic, rate=1000).start()
    mirrors: list[MirrorProcess] = []
    try:
        a = instance("a")
        mirrors.append(a)
        wait_for(lambda: "lease taken (epoch 1" in a.output() and on_target() > 0, 180,
                 "instance a mirroring", a)
        b = instance("b")
        mirrors.append(b)
        wait_for(lambda: STANDING_BY in b.output(), 180, "instance b standing by", b)
        grows(a, 2_000)  # twins: both run, one writes
        wait_for(lambda: lease("b")["members_live"] == [member("a"), member("b")], 30,
                 "b to see both members", b)
        seen_by_a, seen_by_b = lease("a"), lease("b")
        assert seen_by_a["role"] == "active" and seen_by_b["role"] == "standby"
        assert seen_by_a["epoch"] == seen_by_b["epoch"] == 1
        assert seen_by_b["holder"] == seen_by_a["this_instance"] == seen_by_a["holder"]
        assert seen_by_b["lease_age_seconds"] < LEASE_MS / 1000

        # a zombie: paused between batches (the producer paused and a caught up first)
        writer.pause()
        wait_for(lambda: on_target() >= writer.sent, 120, "a caught up", a)
        paused_ends = end_offsets(destination_cluster, target)  # a's translation ends here
        a.pause()
        paused = time.monotonic()
        writer.resume()
        wait_for(lambda: TAKEN in b.output(), 60, "b taking the flow over", b)
        zombie_takeover = time.monotonic() - paused
        grows(b, 1_000)
        a.resume()
        wait_for(lambda: "lease lost" in a.output() or "not held any more" in a.output(), 60,
                 "a finding its lease taken", a)
        grows(b, 2_000)

        # host loss: b killed, a (standing by again) takes over
        wait_for(lambda: a.output().count(STANDING_BY) >= 1, 60, "a standing by", a)
        wait_for(lambda: READY in a.output(), 120, "a ready to take over", a)
        b.kill_hard()
        killed = time.monotonic()
        # a group half-way through what b copied, below the positions b kept in Kafka (each
        # record once, in order: a source offset is its target offset)
        committed = {p: (paused_ends[p] + end) // 2
                     for p, end in end_offsets(destination_cluster, target).items()}
        reader = Consumer(source_cluster.client_config(**{"group.id": group,
                                                          "enable.auto.commit": "false"}))
        try:
            reader.commit(offsets=[TopicPartition(topic, p, o) for p, o in committed.items()],
                          asynchronous=False)
        finally:
            reader.close()
        grows(a)
        kill_takeover = time.monotonic() - killed
        wait_for(lambda: {p: c[0] for p, c in checkpointed().items()} == committed, 60,
                 "a's checkpoints of the group", a)
        assert "offset translation rebuilt for 3 of 3 partitions" in a.output()
        for p, (upstream, downstream) in checkpointed().items():
            # from b's syncs: past a's own ranges, never past the group, within a batch
            assert paused_ends[p] < downstream <= upstream, (p, paused_ends, upstream, downstream)
            assert upstream - downstream < BATCH, (p, upstream, downstream)
        rereads = sum(up - down for up, down in checkpointed().values())
        started = re.findall(r"mirroring .*; (started in [^)]*)\)", a.output())[-1]

        # handover at a clean stop
        c = instance("c")
        mirrors.append(c)
        wait_for(lambda: STANDING_BY in c.output(), 180, "instance c standing by", c)
        # b, killed, is lost to both (unseen for 3 leases, no clean stop)
        wait_for(lambda: member("b") in lease("a")["members_lost"], 60, "a to see b lost", a)
        wait_for(lambda: member("b") in lease("c")["members_lost"], 60, "c to see b lost", c)
        assert lease("a")["role"] == "active" and lease("a")["epoch"] == 3
        assert lease("c")["role"] == "standby"
        stopped = time.monotonic()
        code, _ = a.terminate()
        assert code == 0, a.output()[-3000:]
        grows(c)
        handover = time.monotonic() - stopped
        # a stopped cleanly: no longer a member, not lost either (/status tells the role as of
        # the main loop's last beat, once a second: c may have written before it)
        wait_for(lambda: lease("c")["role"] == "active", 10, "c's status saying active", c)
        after = lease("c")
        assert after["epoch"] == 4
        assert after["members_live"] == [member("c")]
        assert list(after["members_lost"]) == [member("b")]

        total = writer.stop()
        wait_for(lambda: on_target() >= total, 180, "every record mirrored", c)
        code, _ = c.terminate()
        assert code == 0, c.output()[-3000:]
    finally:
        writer.stop()
        for mirror in mirrors:
            if mirror.proc is not None and mirror.proc.poll() is None:
                mirror.resume()
            mirror.cleanup()
    duplicates = compare(source_cluster, topic, destination_cluster, total)
    assert_no_duplicates(duplicates, *(m.output() for m in mirrors))
    assert "lease released" in a.output()
    print(f"one writer per flow ({mode}), {total} records at 1,000/s: twins wrote each record "
          f"once; a paused past its lease: b took over after {zombie_takeover:.1f} s, a wrote "
          f"nothing more once resumed; b killed (kill -9): a wrote again after "
          f"{kill_takeover:.1f} s (its query {started}); "
          f"a stopped (SIGTERM): c wrote after {handover:.1f} s; 0 lost, {duplicates} "
          f"duplicates; a group inside b's copies checkpointed by a with {rereads} re-reads "
          "(3 partitions, 0 skipped)")
