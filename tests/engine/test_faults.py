"""The fault-injection suite, on clusters of its own and under continuous produce: broker
restarts (destination, source), repeated ``kill -9`` of the mirror at random points, network cuts
between the mirror and each cluster (the mirror in a network namespace of its own), and a
destination that runs out of disk. The mirror must ride through each by itself (no exit, no
operator, except the broker restart an operator does after freeing disk), lose nothing and keep
order, and write every record exactly once (``mirror.exactly.once.target``, on by default: a
restart skips what a batch cut short already wrote). The figures go to docs/reliability.md.

The CI form is short: 3 kills (a broker killed and restarted, network cuts and a full disk are in
the CI form of the 3-node suite, test_faults_3node.py). ``KAFKA_MIRROR_FULL=1`` (the full form of
every long suite) runs 10 kills, both broker restarts, 60 s cuts from both sides and the
destination out of disk. ``KAFKA_MIRROR_FAULTS`` picks the broker restarts
(``destination,source``) and runs them in either form; the mirrors run in kafka-mirror's
default mode, real-time; ``KAFKA_MIRROR_MODE=micro-batch`` runs them in micro-batch mode.
"""

from __future__ import annotations

import os
import random
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import netns
import pytest
from continuous import (
    PARTITIONS,
    ContinuousProducer,
    LagGroup,
    assert_no_duplicates,
    compare,
    finish,
    mirror_config,
    tmpfs,
    wait_caught_up,
)
from mirror_process import (
    MirrorProcess,
    end_offsets,
    running,
)

from kafka_mirror_testing.forms import FULL, full_form_only, in_full_form
from kafka_mirror_testing.localcluster import LocalKafkaCluster
from kafka_mirror_testing.waiting import wait_for

# one worker runs them all (pytest-xdist): the network cuts use fixed test addresses
pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.xdist_group("faults")]

TOTAL = 12_000
OUTAGE_SECONDS = 15.0
KILLS = 10 if FULL else 3
CUT_SECONDS = 60.0 if FULL else 20.0


@pytest.fixture(scope="module")
def fault_clusters(tmp_path_factory: pytest.TempPathFactory
                   ) -> Iterator[tuple[LocalKafkaCluster, LocalKafkaCluster]]:
    home = tmp_path_factory.mktemp("faults")
    pair = (LocalKafkaCluster("fsrc", home, heap="384m"),
            LocalKafkaCluster("fdst", home, heap="384m"))
    with running(pair):
        yield pair


PICKED = os.environ.get("KAFKA_MIRROR_FAULTS")
FAULTS = (PICKED.split(",") if PICKED
          else [in_full_form("destination"), in_full_form("source")])


@pytest.mark.parametrize("restarted", FAULTS)
def test_broker_restart_mid_stream_loses_nothing(
    fault_clusters: tuple[LocalKafkaCluster, LocalKafkaCluster], restarted: str,
    tmp_path: Path,
) -> None:
    source, destination = fault_clusters
    topic = f"faults-{restarted}"
    source.create_topic(topic, PARTITIONS)
    config = mirror_config(tmp_path / "mm2.properties", source.bootstrap, destination.bootstrap,
                           topic)
    writer = ContinuousProducer(source, topic, total=TOTAL).start()
    mirror = MirrorProcess(["run", str(config), "--state-dir", str(tmp_path / "state")],
                           tmp_path / "mirror.log").start()
    broker = destination if restarted == "destination" else source
    # progress is read on the cluster that stays up (librdkafka's admin client asserts when a
    # request is pending on a broker that restarts): the lag group on the source, or the
    # target's end offsets
    if restarted == "destination":
        copied = LagGroup(source, topic).total
    else:
        def copied() -> int:
            return sum(end_offsets(destination, f"fsrc.{topic}").values())
    try:
        wait_for(lambda: copied() >= 3000, 240, "mirroring under way", mirror)
        broker.stop()
        time.sleep(OUTAGE_SECONDS)
        assert mirror.proc is not None and mirror.proc.poll() is None, mirror.output()[-3000:]
        broker.start(90.0)
        try:
            # the producer stops once the broker is back (it may not have sent all TOTAL: the
            # source's outage held it up)
            total, resumed = finish(mirror, writer, copied)
        except AssertionError as exc:
            ends = end_offsets(destination, f"fsrc.{topic}")
            raise AssertionError(f"target end offsets {ends}, progress "
                                 f"{copied()}: {exc}") from None
    finally:
        mirror.cleanup()
    duplicates = compare(source, topic, destination, total)
    assert_no_duplicates(duplicates, mirror.output())
    print(f"{restarted} broker restart ({OUTAGE_SECONDS:.0f} s down), {total} records: 0 lost, "
          f"order kept, {duplicates} duplicates, caught up {resumed:.0f} s after the broker was "
          "back")


def test_repeated_kill_9_at_random_points_loses_nothing(
    fault_clusters: tuple[LocalKafkaCluster, LocalKafkaCluster], tmp_path: Path,
) -> None:
    """``kill -9`` of the mirror (and its Spark JVM) KILLS times, each at a random moment after
    its start (before the first batch, mid-batch or between batches), under continuous
    produce; every restart resumes from the last committed batch."""
    source, destination = fault_clusters
    topic = "faults-kill9"
    source.create_topic(topic, PARTITIONS)
    config = mirror_config(tmp_path / "mm2.properties", source.bootstrap, destination.bootstrap,
                           topic)
    args = ["run", str(config), "--state-dir", str(tmp_path / "state")]
    seed = int(os.environ.get("KAFKA_MIRROR_FAULTS_SEED", time.time_ns() % 1_000_000))
    pick = random.Random(seed)
    writer = ContinuousProducer(source, topic, rate=500).start()
    copied = LagGroup(source, topic).total
    moments = []
    try:
        for kill in range(KILLS):
            mirror = MirrorProcess(args, tmp_path / f"mirror-{kill}.log").start()
            try:
                # a random moment once this incarnation has committed a batch: mid-batch,
                # between batches or while restarting queries (every third kill comes
                # earlier, while Spark starts)
                began = time.monotonic()
                if kill % 3 == 2:
                    time.sleep(pick.uniform(2.0, 10.0))
                else:
                    before = copied()
                    wait_for(lambda b=before: copied() > b, 240, "a committed batch", mirror)
                    time.sleep(pick.uniform(0.0, 6.0))
                moment = time.monotonic() - began
                assert mirror.proc is not None and mirror.proc.poll() is None, \
                    mirror.output()[-3000:]
                mirror.kill_hard()
                moments.append(f"{moment:.0f}s/{max(0, copied())}")
            finally:
                mirror.cleanup()
        total = writer.stop()
        last = MirrorProcess(args, tmp_path / "mirror-last.log").start()
        try:
            resumed = wait_caught_up(copied, total, last)
            code, _ = last.terminate()
            assert code == 0, last.output()[-3000:]
        finally:
            last.cleanup()
    finally:
        writer.stop()
    duplicates = compare(source, topic, destination, total)
    assert_no_duplicates(duplicates, *(log.read_text(errors="replace")
                                       for log in sorted(tmp_path.glob("mirror-*.log"))))
    print(f"{KILLS} x kill -9 (seed {seed}; seconds after start / records mirrored at each: "
          f"{', '.join(moments)}), {total} records: 0 lost, order kept, {duplicates} "
          f"duplicates, the last restart caught up in {resumed:.0f} s")


@pytest.fixture(scope="module")
def mirror_namespace() -> Iterator[netns.MirrorNamespace]:
    why_not = netns.available()
    if why_not:
        pytest.skip(why_not)
    with netns.MirrorNamespace(links=2) as namespace:
        yield namespace


@pytest.fixture(scope="module")
def cut_clusters(mirror_namespace: netns.MirrorNamespace,
                 tmp_path_factory: pytest.TempPathFactory,
                 ) -> Iterator[tuple[LocalKafkaCluster, LocalKafkaCluster]]:
    """Two clusters with a listener on their link to the mirror's namespace (link 0: source,
    link 1: destination); the test itself uses their loopback listeners, never cut."""
    home = tmp_path_factory.mktemp("cuts")
    pair = tuple(
        LocalKafkaCluster(name, home, heap="384m", extra_listeners={"CUT": "PLAINTEXT"},
                          listener_binds={"CUT": (mirror_namespace.cluster_address(link), 0)})
        for link, name in enumerate(("csrc", "cdst"))
    )
    with running(pair):
        yield pair[0], pair[1]


@pytest.mark.parametrize("side", [in_full_form("destination"), in_full_form("source")])
def test_network_cut_mid_stream_loses_nothing(
    mirror_namespace: netns.MirrorNamespace,
    cut_clusters: tuple[LocalKafkaCluster, LocalKafkaCluster], side: str, tmp_path: Path,
) -> None:
    """Every packet between the mirror and one cluster dropped for CUT_SECONDS (no reset: the
    mirror's connections just go silent), then the link comes back."""
    source, destination = cut_clusters
    topic = f"faults-cut-{side}"
    source.create_topic(topic, PARTITIONS)
    config = mirror_config(tmp_path / "mm2.properties", source.bootstrap_for("CUT"),
                           destination.bootstrap_for("CUT"), topic)
    writer = ContinuousProducer(source, topic, total=TOTAL + int(CUT_SECONDS * 300),
                                rate=600).start()
    mirror = MirrorProcess(["run", str(config), "--state-dir", str(tmp_path / "state")],
                           tmp_path / "mirror.log", prefix=mirror_namespace.prefix,
                           env={"SPARK_LOCAL_IP": "127.0.0.1"}).start()
    copied = LagGroup(source, topic).total
    link = 1 if side == "destination" else 0
    try:
        wait_for(lambda: copied() >= 3000, 240, "mirroring under way", mirror)
        mirror_namespace.cut(link)
        cut_at = max(0, copied())
        try:
            time.sleep(CUT_SECONDS)
        finally:
            mirror_namespace.restore(link)
        during = max(0, copied()) - cut_at
        assert mirror.proc is not None and mirror.proc.poll() is None, mirror.output()[-3000:]
        total, resumed = finish(mirror, writer, copied)
    finally:
        mirror.cleanup()
        writer.stop()
    duplicates = compare(source, topic, destination, total)
    assert_no_duplicates(duplicates, mirror.output())
    print(f"network cut mirror <-> {side} ({CUT_SECONDS:.0f} s, {during} records committed "
          f"meanwhile), {total} records: 0 lost, order kept, {duplicates} duplicates, caught "
          f"up {resumed:.0f} s after the link was back")


@full_form_only
def test_destination_out_of_disk_then_space_freed(tmp_path: Path) -> None:
    """The destination's log dir (a small tmpfs) fills up mid-stream; the broker takes the dir
    offline and stops, as Kafka does. The operator frees space and starts the broker again:
    the mirror, which never stopped, goes on by itself."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small file system needs root")
    with tmpfs(tmp_path / "small-disk", "96m") as disk:
        source = LocalKafkaCluster("dsrc", tmp_path, heap="384m")
        destination = LocalKafkaCluster(
            "ddst", tmp_path, heap="384m",
            server_overrides={"log.dirs": str(disk / "logs"), "log.segment.bytes": "4194304",
                              "metadata.log.dir": str(tmp_path / "ddst-metadata")})
        with running((source, destination)):
            topic = "faults-disk"
            source.create_topic(topic, PARTITIONS)
            config = mirror_config(tmp_path / "mm2.properties", source.bootstrap,
                                   destination.bootstrap, topic)
            ballast = disk / "ballast"
            writer = ContinuousProducer(source, topic, total=40_000, rate=2000,
                                        value_bytes=1024).start()
            mirror = MirrorProcess(["run", str(config), "--state-dir", str(tmp_path / "state")],
                                   tmp_path / "mirror.log").start()
            copied = LagGroup(source, topic).total
            try:
                wait_for(lambda: copied() >= 2000, 240, "mirroring under way", mirror)
                free = shutil.disk_usage(disk).free
                with ballast.open("wb") as out:  # leave about 8 MiB
                    out.write(b"\0" * max(0, free - 8 * 1024 * 1024))
                stalled = _wait_stalled(copied, destination, mirror)
                ballast.unlink()
                destination.stop()
                destination.start(90.0)
                total, resumed = finish(mirror, writer, copied)
            finally:
                mirror.cleanup()
                writer.stop()
            duplicates = compare(source, topic, destination, total)
            assert_no_duplicates(duplicates, mirror.output())
    print(f"destination out of disk ({stalled}), {total} records of 1 KiB: 0 lost, order kept, "
          f"{duplicates} duplicates, caught up {resumed:.0f} s after the broker was back")


def _wait_stalled(copied: Callable[[], int], destination: LocalKafkaCluster,
                  mirror: MirrorProcess) -> str:
    """Until the destination broker gave up (it stops when its only log dir fails) or the
    mirror's progress stood still for 20 s; says which."""
    last, since = copied(), time.monotonic()
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        assert mirror.proc is not None and mirror.proc.poll() is None, mirror.output()[-3000:]
        if not destination.alive():
            return "the broker stopped when its log dir failed"
        now = copied()
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since > 20:
            return f"the mirror stalled at {now} records"
        time.sleep(1.0)
    raise AssertionError("the destination never ran out of disk")
