"""The fault suite on clusters as production runs them: source and target of 3 KRaft nodes each,
topics with replication factor 3 and ``min.insync.replicas`` 2, under continuous produce. Leaders
move on both sides (a reassignment that changes every partition's preferred replica, then
preferred-leader elections), a node leading a partition is killed (``kill -9``) and started
again on each side, and the target's in-sync replicas shrink below ``min.insync.replicas`` (the
mirror's producer must wait, not drop). Each asserts nothing lost, source order kept, no
duplicate, and reports how long the mirror took to catch up; none may be taken for an unclean
leader election. The figures go to docs/reliability.md.

The mirror can also run in a network namespace of its own, linked to every node of each
cluster, and be cut off from one cluster for longer than Spark's network timeout (the source's
consumers then give up mid-fetch, or the driver's offsets request does, and the query fails; the
flow restarts it once the link is back).

CI form: leader moves, the destination's leader node killed, the ISR shrink, the state disk and
a 30 s cut from the source with ``spark.network.timeout`` at 20 s. ``KAFKA_MIRROR_FULL=1`` adds
the source's leader node killed, the quota throttle followed by ``kill -9`` of the mirror (whose
known duplicates are bounded and reported, not yet 0), and cuts from either side of 150 s with
Spark's default timeout (120 s). The mirrors run in real-time mode, the default;
``KAFKA_MIRROR_MODE=micro-batch`` runs them in micro-batch mode.
"""

from __future__ import annotations

import errno
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource
from continuous import (
    PARTITIONS,
    ContinuousProducer,
    LagGroup,
    assert_no_duplicates,
    compare,
    finish,
    mirror_config,
    tmpfs,
)
from mirror_process import MirrorProcess, running
from netns import MirrorNamespace, available

from kafka_mirror_testing.forms import FULL, MODE, full_form_only
from kafka_mirror_testing.multinode import MultiNodeKafkaCluster
from kafka_mirror_testing.waiting import wait_for

# with the other fault suites on one worker: two 3-node clusters beside the other workers' tests
# slowed the whole run
pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.xdist_group("faults")]


OUTAGE_SECONDS = 15.0
SINK_CLIENT_ID = "kafka-mirror-fsrc_to_fdst"  # the client id of the mirror's producer
# topic configs not synced (the test changes one on the target)
UNSYNCED = "sync.topic.configs.enabled = false\n"

# the network cut: its length and Spark's network timeout (the source consumers' poll timeout).
# A cut from the source can be absorbed by calls in sequence, each within its own timeout: the
# writer's leader-epoch read (5 s, a warning), then the next batch's offsets request (the poll
# timeout) - CI once saw a 30 s cut end 0.6 s before that request would have failed. 45 s leaves
# 20 s over their sum.
CUT_SECONDS = 150.0 if FULL else 45.0
NETWORK_TIMEOUT = "" if FULL else (
    "spark.network.timeout = 20s\nspark.network.timeoutInterval = 10s\n")

Pair = tuple[MultiNodeKafkaCluster, MultiNodeKafkaCluster]
RUNS: list[Run] = []


@pytest.fixture(scope="module")
def links() -> Iterator[MirrorNamespace | None]:
    """A network namespace for the mirror, with a link to each cluster (link 0: source, 1:
    destination); None where namespaces cannot be made (the network cut is then skipped)."""
    if available() is not None:
        yield None
        return
    with MirrorNamespace(links=2) as namespace:
        yield namespace


@pytest.fixture(scope="module")
def three_node_pair(tmp_path_factory: pytest.TempPathFactory,
                    links: MirrorNamespace | None) -> Iterator[Pair]:
    """Every node listens on loopback and, where the mirror can have a namespace, on its
    cluster's link (listener CUT)."""
    home = tmp_path_factory.mktemp("faults3")

    def cluster(name: str, link: int) -> MultiNodeKafkaCluster:
        if links is None:
            return MultiNodeKafkaCluster(name, home, heap="256m")
        return MultiNodeKafkaCluster(name, home, heap="256m",
                                     extra_listeners={"CUT": "PLAINTEXT"},
                                     listener_hosts={"CUT": links.cluster_address(link)})

    pair = (cluster("fsrc3", 0), cluster("fdst3", 1))
    with running(pair):  # type: ignore[arg-type]
        yield pair


@pytest.fixture(autouse=True)
def no_mirror_left() -> Iterator[None]:
    """A test that failed half-way leaves no mirror behind for the next test, which shares the
    clusters and the flow's lease (a mirror left running holds it: the next one stands by)."""
    yield
    while RUNS:
        RUNS.pop().mirror.cleanup()


class Run:
    """A mirror of ``topic`` (3 partitions) under continuous produce on the pair; in the
    namespace ``links``, through the clusters' CUT listeners, when given."""

    def __init__(self, pair: Pair, topic: str, tmp_path: Path, state: Path | None = None,
                 links: MirrorNamespace | None = None, extra: str = "") -> None:
        self.source, self.destination = pair
        self.topic, self.target = topic, f"fsrc.{topic}"
        for cluster in pair:
            cluster.start()  # every node up
        self.source.create_topic(topic, PARTITIONS)
        listener = "PLAINTEXT" if links is None else "CUT"
        config = mirror_config(tmp_path / "mm2.properties", self.source.bootstrap_for(listener),
                               self.destination.bootstrap_for(listener), topic,
                               UNSYNCED + extra, replicas=3)
        self.writer = ContinuousProducer(self.source, topic, rate=1000).start()
        self.args = ["run", str(config), "--state-dir", str(state or tmp_path / "state")]
        self.logs = tmp_path
        self.mirror = MirrorProcess(
            self.args, tmp_path / "mirror.log",
            prefix=() if links is None else links.prefix,
            env=None if links is None else {"SPARK_LOCAL_IP": "127.0.0.1"}).start()
        self.copied = LagGroup(self.source, topic).total
        RUNS.append(self)

    def under_way(self, records: int = 2000) -> None:
        before = max(0, self.copied())
        wait_for(lambda: self.copied() >= before + records, 240, f"{records} more mirrored",
                 self.mirror)

    def end(self, what: str, duplicates_allowed: int = 0) -> int:
        """The producer stops, the mirror catches up and stops; then the records compared (no
        duplicate unless ``duplicates_allowed``); returns the duplicates."""
        try:
            total, resumed = finish(self.mirror, self.writer, self.copied)
        finally:
            self.mirror.cleanup()
            self.writer.stop()
        duplicates = compare(self.source, self.topic, self.destination, total)
        logs = [log.read_text(errors="replace") for log in sorted(self.logs.glob("mirror*.log"))]
        assert_no_duplicates(max(0, duplicates - duplicates_allowed), *logs)
        assert not any("unclean leader election" in log for log in logs)
        print(f"3 nodes each side, {what}: {total} records, 0 lost, order kept, {duplicates} "
              f"duplicates, caught up {resumed:.0f} s after the fault ended")
        return duplicates


def test_leader_moves_on_both_sides_lose_nothing(three_node_pair: Pair, tmp_path: Path) -> None:
    run = Run(three_node_pair, "moves3", tmp_path)
    run.under_way()
    for cluster, topic in ((run.source, run.topic), (run.destination, run.target)):
        rotated = {p: r[1:] + r[:1] for p, r in cluster.replicas(topic).items()}
        cluster.reassign(topic, rotated)
        cluster.elect_leaders(topic, sorted(rotated))
        wait_for(lambda c=cluster, t=topic, r=rotated: all(
            c.leaders(t)[p][0] == r[p][0] for p in r), 60, f"the leaders of {topic} moved")
        run.under_way()
    run.end("every leader moved on the source, then on the target")


@pytest.mark.parametrize("side", ["source", "destination"] if FULL else ["destination"])
def test_a_node_leading_a_partition_killed_and_restarted_loses_nothing(
    three_node_pair: Pair, tmp_path: Path, side: str,
) -> None:
    run = Run(three_node_pair, f"kill3-{side}", tmp_path)
    cluster, topic = ((run.source, run.topic) if side == "source"
                      else (run.destination, run.target))
    run.under_way()
    leader = cluster.node(cluster.leaders(topic)[0][0])
    leader.kill_hard()
    time.sleep(OUTAGE_SECONDS)  # the fault's length, not a wait for a condition
    assert run.mirror.proc is not None and run.mirror.proc.poll() is None, run.mirror.tail()
    cluster.start()
    run.end(f"kill -9 of the {side}'s node {leader.node_id} (a leader), "
            f"{OUTAGE_SECONDS:.0f} s down")


def test_target_in_sync_replicas_below_min_insync_make_the_mirror_wait(
    three_node_pair: Pair, tmp_path: Path,
) -> None:
    run = Run(three_node_pair, "isr3", tmp_path)
    run.under_way()
    # every write to the target now needs all 3 replicas; one node stops
    admin = run.destination.admin()
    resource = ConfigResource(ConfigResource.Type.TOPIC, run.target, incremental_configs=[
        ConfigEntry("min.insync.replicas", "3", incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)
    stopped = run.destination.node(3)
    stopped.stop()
    wait_for(lambda: all(len(isr) == 2 for _, isr in run.destination.leaders(run.target).values()),
             60, "the target's in-sync replicas down to 2")
    stalled_at = run.copied()
    time.sleep(OUTAGE_SECONDS)  # the fault's length
    # nothing acknowledged meanwhile: the mirror's positions do not move past what the target
    # took (a batch may have completed as the node stopped)
    assert run.copied() <= stalled_at + 3 * 1000, (stalled_at, run.copied())
    assert run.mirror.proc is not None and run.mirror.proc.poll() is None, run.mirror.tail()
    run.destination.start()
    run.end(f"the target's ISR below min.insync.replicas for {OUTAGE_SECONDS:.0f} s")


@full_form_only
def test_a_long_quota_throttle_then_kill_9_loses_nothing(three_node_pair: Pair,
                                                          tmp_path: Path) -> None:
    """The target throttles the mirror's producer to 100 bytes/s (a batch takes minutes),
    and the mirror is killed (``kill -9``) in the middle of it; restarted once the quota is
    gone, it loses nothing.

    Known defect (not removed by issue 28's lease, which fences the lease's producer, not the
    Spark sink's idempotent one): a throttling broker mutes the producer's
    connection for the throttle time (Kafka's bandwidth throttle has no upper bound) and reads
    the request the dead producer had sent only then; the restart has already read the
    target's end offsets, so those records (at most one batch) are written a second time. Seen
    here: 15 of a 333-record batch, in one run of three. Asserted: that bound, and that the
    restarted mirror reports them (a warning naming the partition and the count)."""
    run = Run(three_node_pair, "quota3", tmp_path)
    run.under_way()
    run.destination.set_producer_quota(SINK_CLIENT_ID, 100)
    try:
        throttled_at = run.copied()
        time.sleep(OUTAGE_SECONDS)  # the fault's length
        assert run.copied() < throttled_at + 3 * 1000 * 2, "not throttled"
        run.mirror.kill_hard()
    finally:
        run.destination.set_producer_quota(SINK_CLIENT_ID, None)
    run.mirror = MirrorProcess(run.args, tmp_path / "mirror-restarted.log").start()
    duplicates = run.end(f"the mirror's producer throttled to 100 B/s for {OUTAGE_SECONDS:.0f} s, "
                         "then kill -9 of the mirror", duplicates_allowed=1000)
    # never silent: the restarted mirror names what landed behind its back
    reported = sum(int(n) for n in re.findall(r"(?:holds|grew by) (\d+) records more",
                                              run.mirror.output()))
    assert reported >= duplicates, (reported, duplicates)


def test_the_mirrors_state_disk_full_then_space_freed(three_node_pair: Pair,
                                                       tmp_path: Path) -> None:
    """The file system of the mirror's state (its checkpoints, offset ranges, exactly-once
    records) fills up mid-stream: the mirror must not go on as if its state were written, nor
    exit; once space is freed it goes on by itself."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small file system needs root")
    with tmpfs(tmp_path / "state-disk", "48m") as disk:
        run = Run(three_node_pair, "statedisk3", tmp_path, state=disk / "state")
        run.under_way()
        ballast = disk / "ballast"
        with ballast.open("wb") as out:
            try:
                while True:
                    out.write(b"\0" * (1 << 20))
                    out.flush()
            except OSError as full:
                assert full.errno == errno.ENOSPC, full
        wait_for(lambda: "No space left on device" in run.mirror.output(), 120,
                 "the mirror meeting the full disk", run.mirror)
        stalled_at = run.copied()
        time.sleep(OUTAGE_SECONDS)  # the fault's length
        assert run.copied() <= stalled_at + 3 * 1000, (stalled_at, run.copied())
        assert run.mirror.proc is not None and run.mirror.proc.poll() is None, run.mirror.tail()
        ballast.unlink()
        run.end(f"the mirror's state disk full for {OUTAGE_SECONDS:.0f} s, then space freed")


@pytest.mark.parametrize("side", ["source", "destination"] if FULL else ["source"])
def test_a_network_cut_longer_than_the_network_timeout_loses_nothing(
    three_node_pair: Pair, links: MirrorNamespace | None, tmp_path: Path, side: str,
) -> None:
    """Every packet between the mirror and every node of one cluster dropped (no reset) for
    longer than Spark's network timeout: from the source, the consumers reading a batch give up
    mid-fetch, or the driver's request for the source's offsets does, and the query fails; the
    flow restarts it with backoff until the link is back. From the destination, the producer
    waits (its delivery timeout is unbounded)."""
    if links is None:
        pytest.skip(available() or "no network namespace")
    run = Run(three_node_pair, f"cut3-{side}", tmp_path, links=links, extra=NETWORK_TIMEOUT)
    run.under_way()
    link = 0 if side == "source" else 1
    links.cut(link)
    try:
        time.sleep(CUT_SECONDS)  # the fault's length
    finally:
        links.restore(link)
    assert run.mirror.proc is not None and run.mirror.proc.poll() is None, run.mirror.tail()
    if side == "source" and MODE == "micro-batch":  # the cut outlasted the timeout: the query
        # failed (else this proves nothing); the flow notices once its upkeep's calls to the
        # source return. A real-time query's tasks wait out the cut in the consumer's poll (no
        # batch to time out): the records prove that it rode through
        wait_for(lambda: "query failed: " in run.mirror.output(), 120, "the query's failure",
                 run.mirror)
    failures = re.findall(r"query failed: (.*); retrying in", run.mirror.output())
    timeout = "20 s" if NETWORK_TIMEOUT else "120 s (default)"
    run.end(f"every node of the {side} cut off from the mirror for {CUT_SECONDS:.0f} s "
            f"(Spark's network timeout {timeout}; the query failed {len(failures)} times, first: "
            f"{failures[0][:120] if failures else '-'})")
