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
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from continuous import ContinuousProducer, assert_no_duplicates, compare, mirror_config
from mirror_process import MirrorProcess, end_offsets

from kafka_mirror_testing.localcluster import LocalKafkaCluster
from kafka_mirror_testing.waiting import wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.spark]
TAKEN = "this instance holds the lease now"
STANDING_BY = "standing by: the lease is held by"
LEASE_MS = 5_000


def test_one_instance_writes_a_flow_and_another_takes_over(
    source_cluster: LocalKafkaCluster, destination_cluster: LocalKafkaCluster,
    unique_topic: str, tmp_path: Path,
) -> None:
    topic, target = unique_topic, f"fsrc.{unique_topic}"
    source_cluster.create_topic(topic, 3)
    config = mirror_config(tmp_path / "mm2.properties", source_cluster.bootstrap,
                           destination_cluster.bootstrap, topic,
                           f"mirror.lease.ms = {LEASE_MS}\n")

    def instance(name: str) -> MirrorProcess:
        return MirrorProcess(["run", str(config), "--state-dir", str(tmp_path / name)],
                             tmp_path / f"{name}.log").start()

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

        # a zombie: paused between batches (the producer paused and a caught up first)
        writer.pause()
        wait_for(lambda: on_target() >= writer.sent, 120, "a caught up", a)
        os.killpg(a.proc.pid, signal.SIGSTOP)  # type: ignore[union-attr]
        paused = time.monotonic()
        writer.resume()
        wait_for(lambda: TAKEN in b.output(), 60, "b taking the flow over", b)
        zombie_takeover = time.monotonic() - paused
        grows(b, 1_000)
        os.killpg(a.proc.pid, signal.SIGCONT)  # type: ignore[union-attr]
        wait_for(lambda: "lease lost" in a.output() or "not held any more" in a.output(), 60,
                 "a finding its lease taken", a)
        grows(b, 2_000)

        # host loss: b killed, a (standing by again) takes over
        wait_for(lambda: a.output().count(STANDING_BY) >= 1, 60, "a standing by", a)
        b.kill_hard()
        killed = time.monotonic()
        grows(a)
        kill_takeover = time.monotonic() - killed

        # handover at a clean stop
        c = instance("c")
        mirrors.append(c)
        wait_for(lambda: STANDING_BY in c.output(), 180, "instance c standing by", c)
        stopped = time.monotonic()
        code, _ = a.terminate()
        assert code == 0, a.output()[-3000:]
        grows(c)
        handover = time.monotonic() - stopped

        total = writer.stop()
        wait_for(lambda: on_target() >= total, 180, "every record mirrored", c)
        code, _ = c.terminate()
        assert code == 0, c.output()[-3000:]
    finally:
        writer.stop()
        for mirror in mirrors:
            if mirror.proc is not None and mirror.proc.poll() is None:
                os.killpg(mirror.proc.pid, signal.SIGCONT)
            mirror.cleanup()
    duplicates = compare(source_cluster, topic, destination_cluster, total)
    assert_no_duplicates(duplicates, *(m.output() for m in mirrors))
    assert "lease released" in a.output()
    print(f"one writer per flow, {total} records at 1,000/s: twins wrote each record once; "
          f"a paused past its lease: b took over after {zombie_takeover:.1f} s, a wrote nothing "
          f"more once resumed; b killed (kill -9): a wrote again after {kill_takeover:.1f} s; "
          f"a stopped (SIGTERM): c wrote after {handover:.1f} s; 0 lost, {duplicates} "
          "duplicates")
