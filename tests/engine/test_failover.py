"""Consumer-group failover on real clusters: a group committed part-way through topics on the
source, the mirror translated its offsets, the source "fails" (mirror stopped), the group resumes
on the target. Checked record by record: nothing skipped, nothing re-read where offsets map one
to one, at most one batch re-read where they do not (a transactional source: offset gaps).
Kafka's own connect-mirror-client reads our checkpoints and must agree with our CLI; stock
MirrorMaker 2 runs the same scenario side by side for the re-read figures.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from mirror_client_probe import probe
from mirror_process import CLI, MirrorProcess, committed_offsets, end_offsets, stop_compaction

from kafka_mirror.config.mm2 import load_mm2
from kafka_mirror.control.failover import translate
from kafka_mirror_testing.localcluster import LocalKafkaCluster
from kafka_mirror_testing.records import Message, produce
from kafka_mirror_testing.stock_mm2 import StockMirrorMaker2, mm2_properties
from kafka_mirror_testing.waiting import wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

BATCH = 250  # mirror.max.records.per.batch: the re-read bound where offsets have gaps
PLAIN_COMMITS = {0: 600, 1: 0, 2: 1000, 3: 137}
TXN_COMMITS = {0: 333, 1: 517}
COMPACT_COMMIT = 250


def _letters() -> str:
    return "".join(chr(ord("a") + int(c, 16) % 26) for c in uuid.uuid4().hex[:6])


def _produce_plain(cluster: LocalKafkaCluster, topic: str) -> None:
    produce(cluster, topic, (Message(key=f"{topic}-{p}-{i}".encode(), value=b"v" * 20, partition=p)
                             for p in range(4) for i in range(1000)))


def _produce_transactions(cluster: LocalKafkaCluster, topic: str) -> None:
    """Transactions of 40 records per partition; every fourth one aborted (offset gaps:
    markers and aborted records)."""
    producer = Producer(cluster.client_config(**{"transactional.id": f"tx-{topic}"}))
    producer.init_transactions(30)
    for n in range(20):
        producer.begin_transaction()
        for p in range(2):
            for i in range(40):
                producer.produce(topic, key=f"{topic}-{p}-{n}-{i}".encode(), value=b"t",
                                 partition=p)
        if n % 4 == 3:
            producer.flush(30)  # as in test_exactly_once: the abort does not race the produce
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)
    producer.flush(30)


def _produce_compacted(cluster: LocalKafkaCluster, topic: str) -> None:
    """Keys written over and over in several segments, so the log cleaner leaves offset holes."""
    for round_ in range(4):
        produce(cluster, topic, (Message(key=f"{topic}-k{i % 60}".encode(),
                                         value=f"{round_}-{i}".encode(), partition=0)
                                 for i in range(150)), timeout=30)
        time.sleep(0.3)  # segment.ms=100: the next record rolls a new segment


def _compacted(cluster: LocalKafkaCluster, topic: str) -> bool:
    # rolls the active segment
    produce(cluster, topic, [Message(key=b"roll", value=b"r", partition=0)], timeout=30)
    records = _records(cluster, topic, 0)
    return len(records) < end_offsets(cluster, topic)[0]


def _commit(cluster: LocalKafkaCluster, group: str, offsets: dict[tuple[str, int], int]) -> None:
    consumer = Consumer(cluster.client_config(**{"group.id": group}))
    consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()],
                    asynchronous=False)
    consumer.close()


def _records(cluster: LocalKafkaCluster, topic: str, partition: int) -> list[tuple[int, bytes]]:
    """(offset, key=value) of every committed record of one partition (unique per record)."""
    end = end_offsets(cluster, topic).get(partition, 0)
    consumer = Consumer(cluster.client_config(**{
        "group.id": "failover-reader", "enable.auto.commit": "false",
        "isolation.level": "read_committed", "enable.partition.eof": "true"}))
    out: list[tuple[int, bytes]] = []
    try:
        consumer.assign([TopicPartition(topic, partition, 0)])
        deadline = time.monotonic() + 60
        done = end == 0
        while not done and time.monotonic() < deadline:
            for msg in consumer.consume(1000, timeout=1.0):
                if msg.error():
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        done = True
                    continue
                out.append((msg.offset(), (msg.key() or b"") + b"=" + (msg.value() or b"")))
    finally:
        consumer.close()
    return out


def _resume_check(
    source: list[tuple[int, bytes]], target: list[tuple[int, bytes]], group_offset: int,
    translated: int,
) -> tuple[int, int]:
    """(records skipped, records re-read) for a consumer that read the source up to
    ``group_offset`` and resumes on the target at ``translated``."""
    wanted = [key for offset, key in source if offset >= group_offset]
    already = {key for offset, key in source if offset < group_offset}
    resumed = [key for offset, key in target if offset >= translated]
    present = set(resumed)
    skipped = sum(1 for key in wanted if key not in present)
    first_wanted = next((i for i, key in enumerate(resumed) if key not in already), len(resumed))
    return skipped, sum(1 for key in resumed[:first_wanted] if key in already)


# real-time mode has no per-batch limit and holds a task slot per partition (7 here, plus
# heartbeats)
REALTIME = "mirror.mode = realtime\nmirror.realtime.batch.duration.ms = 5000\n" \
    "spark.master = local[12]\n"


def _synced_as_checkpointed(config: Path, destination: LocalKafkaCluster, group: str,
                            partitions: list[tuple[str, int]]) -> bool:
    """The group's offsets on the target are at or past its last checkpoint on every partition:
    what ``offsets failover`` leaves as they are."""
    checkpointed = {tp: c.offset for t in translate(load_mm2(config), group)
                    for tp, c in t.offsets.items()}
    try:
        committed = committed_offsets(destination, group, partitions)
    except Exception:
        return False
    return len(checkpointed) == len(partitions) and all(
        committed.get(tp, -1) >= offset for tp, offset in checkpointed.items())


def _config(path: Path, source_alias: str, target_alias: str, source: LocalKafkaCluster,
            target: LocalKafkaCluster, prefix: str, groups: str, realtime: bool = False
            ) -> Path:
    path.write_text(
        f"clusters = {source_alias}, {target_alias}\n"
        f"{source_alias}.bootstrap.servers = {source.bootstrap}\n"
        f"{target_alias}.bootstrap.servers = {target.bootstrap}\n"
        f"{source_alias}->{target_alias}.enabled = true\n"
        f"topics = {prefix}-.*\n"
        f"groups = {groups}\n"
        "replication.factor = 1\n"
        "offset-syncs.topic.replication.factor = 1\n"
        "checkpoints.topic.replication.factor = 1\n"
        "heartbeats.topic.replication.factor = 1\n"
        "emit.checkpoints.interval.seconds = 1\n"
        "refresh.groups.interval.seconds = 2\n"
        "sync.group.offsets.enabled = true\n"
        "sync.group.offsets.interval.seconds = 2\n"
        "sync.topic.acls.enabled = false\n"
        # the target must not compact on its own: the check compares record by record
        "config.properties.exclude = cleanup\\.policy, segment\\.ms, "
        "min\\.cleanable\\.dirty\\.ratio, delete\\.retention\\.ms\n"
        "refresh.topics.interval.seconds = 3\n"
        "spark.driver.memory = 768m\n"
        + (REALTIME if realtime else
           f"mirror.max.records.per.batch = {BATCH}\nspark.master = local[2]\n"),
        encoding="utf-8",
    )
    return path


@pytest.mark.parametrize("mode", ["micro-batch", "realtime"])
def test_group_fails_over_without_skipping_and_exact_where_offsets_map(
    source_cluster: LocalKafkaCluster, destination_cluster: LocalKafkaCluster, tmp_path: Path,
    mode: str,
) -> None:
    """Real-time mode (no batch boundaries) pairs offsets record by record in the producer
    interceptor: the same failover, without the side-by-side MirrorMaker 2 part."""
    tag = _letters()
    src, dst = f"fs{tag}", f"fd{tag}"
    prefix = f"fo-{tag}"
    plain, txn, compact = f"{prefix}-plain", f"{prefix}-txn", f"{prefix}-compact"
    group, busy = f"app-{tag}", f"busy-{tag}"
    source_cluster.create_topic(compact, 1, config={
        "cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01",
        "delete.retention.ms": "100"})
    _produce_compacted(source_cluster, compact)  # first: the cleaner works while we go on
    source_cluster.create_topic(plain, 4)
    source_cluster.create_topic(txn, 2)
    _produce_plain(source_cluster, plain)
    _produce_transactions(source_cluster, txn)
    wait_for(lambda: _compacted(source_cluster, compact), 90, "the log cleaner left holes")
    stop_compaction(source_cluster, compact)  # the snapshot below must stay what the log holds
    source = {(plain, p): _records(source_cluster, plain, p) for p in range(4)}
    source |= {(txn, p): _records(source_cluster, txn, p) for p in range(2)}
    source[(compact, 0)] = _records(source_cluster, compact, 0)
    txn_ends = end_offsets(source_cluster, txn)
    assert all(len(source[(txn, p)]) < txn_ends[p] for p in range(2)), "no offset gaps?"
    commits = {(plain, p): o for p, o in PLAIN_COMMITS.items()}
    commits |= {(txn, p): o for p, o in TXN_COMMITS.items()}
    # a committed offset inside the compacted range, where the log has holes
    commits[(compact, 0)] = source[(compact, 0)][len(source[(compact, 0)]) // 2][0] + 1
    _commit(source_cluster, group, commits)
    _commit(source_cluster, busy, {(plain, 0): 100})

    # the busy group is alive on the target: the mirror must leave it alone
    stop_busy = threading.Event()
    busy_consumer = Consumer(destination_cluster.client_config(**{
        "group.id": busy, "enable.auto.commit": "false", "auto.offset.reset": "latest"}))

    def keep_busy() -> None:
        busy_consumer.subscribe([f"{src}.{plain}"])
        while not stop_busy.is_set():
            busy_consumer.poll(0.5)
        busy_consumer.close()

    busy_thread = threading.Thread(target=keep_busy, daemon=True)
    busy_thread.start()

    config = _config(tmp_path / "mm2.properties", src, dst, source_cluster, destination_cluster,
                     prefix, f"app-{tag}, busy-{tag}", realtime=mode == "realtime")
    # DEBUG: each group offset sync round is logged
    mirror = MirrorProcess(["--log-level", "DEBUG", "run", str(config), "--state-dir",
                            str(tmp_path / "state")], tmp_path / "mirror.log").start()
    sync_round = f"flow {src}->{dst}: group offsets sync round: "
    target_partitions = [(f"{src}.{plain}", p) for p in range(4)]
    target_partitions += [(f"{src}.{txn}", p) for p in range(2)] + [(f"{src}.{compact}", 0)]

    def group_synced() -> bool:
        try:
            offsets = committed_offsets(destination_cluster, group, target_partitions)
        except Exception:
            return False
        return len([o for o in offsets.values() if o >= 0]) == 7

    try:
        wait_for(lambda: sum(end_offsets(destination_cluster, f"{src}.{plain}").values())
                 == 4000 and sum(end_offsets(destination_cluster, f"{src}.{txn}").values())
                 == sum(len(source[(txn, p)]) for p in range(2))
                 and end_offsets(destination_cluster, f"{src}.{compact}").get(0, 0)
                 >= len(source[(compact, 0)]), 240, "topics mirrored", mirror)
        wait_for(group_synced, 120, "group offsets committed on the target", mirror)
        # the sync runs every 2 s from the checkpoints of that moment; a checkpoint refined
        # later (an offset sync that came after) is synced a round later, which under load can
        # take more than 3 s: wait until every last checkpoint is synced, twice in a row
        for _ in range(2):
            # one more sync round: the active group must still be untouched
            rounds = mirror.output().count(sync_round)
            wait_for(lambda r=rounds: mirror.output().count(sync_round) > r, 60,
                     "one more group offset sync round", mirror)
            wait_for(lambda: _synced_as_checkpointed(config, destination_cluster, group,
                                                     target_partitions),
                     120, "group offsets synced up to the last checkpoints", mirror)
        code, _ = mirror.terminate()
        assert code == 0, mirror.output()[-3000:]
        assert f"group {busy} is active on cluster {dst}" in mirror.output()
        # failing over a group that is active on the target is refused
        run = subprocess.run([*CLI, "offsets", "failover", str(config), "--group", busy],
                             capture_output=True, text=True, timeout=120)
        assert run.returncode == 1, run.stdout + run.stderr
        assert f"group '{busy}' is active on cluster '{dst}'" in run.stderr
    finally:
        stop_busy.set()
        busy_thread.join(30)
        mirror.cleanup()
    # the group's offsets were synced already: failover keeps them (never moves back)
    run = subprocess.run([*CLI, "offsets", "failover", str(config), "--group", group],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "committed 0 offsets, kept 7" in run.stdout

    # the source "failed": the group resumes on the target at the translated offsets
    run = subprocess.run([*CLI, "offsets", "translate", str(config), "--group", group, "--json"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    ours = {(o["topic"], o["partition"]): o["offset"] for o in json.loads(run.stdout)["offsets"]}
    assert len(ours) == 7, run.stdout
    kafka = probe("translate", {"bootstrap.servers": destination_cluster.bootstrap}, src, group)
    assert {(o["topic"], o["partition"]): o["offset"] for o in kafka["offsets"]} == ours

    # the group's offsets were committed on the target (it is absent there), exactly these
    consumer = Consumer(destination_cluster.client_config(**{"group.id": group}))
    committed = consumer.committed(
        [TopicPartition(t, p) for t, p in ours], timeout=30)
    consumer.close()
    assert {(tp.topic, tp.partition): tp.offset for tp in committed} == ours
    consumer = Consumer(destination_cluster.client_config(**{"group.id": busy}))
    (busy_committed,) = consumer.committed([TopicPartition(f"{src}.{plain}", 0)], timeout=30)
    consumer.close()
    assert busy_committed.offset < 0, "the active group's offsets were changed"

    rereads: dict[tuple[str, int], int] = {}
    for (topic, partition), group_offset in sorted(commits.items()):
        target = _records(destination_cluster, f"{src}.{topic}", partition)
        translated = ours[(f"{src}.{topic}", partition)]
        skipped, reread = _resume_check(source[(topic, partition)], target, group_offset,
                                        translated)
        assert skipped == 0, f"{topic}[{partition}] at {group_offset} -> {translated} skips"
        rereads[(topic, partition)] = reread
        if topic == plain:
            assert reread == 0, f"{topic}[{partition}]: offsets map one to one, yet re-reads"
        else:  # offset gaps: transaction markers, aborted records, compaction holes
            assert reread <= BATCH, f"{topic}[{partition}] re-reads more than one batch"
    print(f"re-reads after failover: {rereads}")

    # offset syncs in MM2's format on the source, each a true pair of one record
    syncs = probe("decode-offset-syncs", {"bootstrap.servers": source_cluster.bootstrap},
                  f"mm2-offset-syncs.{dst}.internal")["syncs"]
    mine = [s for s in syncs if s["topic"] == plain]
    assert mine
    targets = {p: dict(_records(destination_cluster, f"{src}.{plain}", p))
               for p in sorted({sync["partition"] for sync in mine})}
    for sync in mine:
        src_key = dict(source[(plain, sync["partition"])])[sync["upstreamOffset"]]
        assert targets[sync["partition"]][sync["offset"]] == src_key
    if mode == "realtime":
        return

    # stock MirrorMaker 2 on the same topic and group, side by side
    mm_alias = f"mm{tag}"
    props = mm2_properties(source_cluster.bootstrap, destination_cluster.bootstrap,
                           topics=plain, source_alias=mm_alias, target_alias=f"mt{tag}",
                           extra={"groups": group, "emit.checkpoints.interval.seconds": "1",
                                  "emit.heartbeats.enabled": "false",
                                  "sync.topic.acls.enabled": "false",
                                  "heartbeats.replication.enabled": "false"})
    mm2 = StockMirrorMaker2(props, tmp_path / "mm2", heap="384m")
    with mm2:
        wait_for(lambda: sum(end_offsets(destination_cluster, f"{mm_alias}.{plain}").values())
                 == 4000, 180, "MM2 mirrored the topic")

        def mm2_translated() -> dict[tuple[str, int], int]:
            try:
                out = probe("translate", {"bootstrap.servers": destination_cluster.bootstrap},
                            mm_alias, group)
            except AssertionError:
                return {}
            return {(o["topic"], o["partition"]): o["offset"] for o in out["offsets"]}

        # MM2 translates a partition only from an offset sync at or below the group's offset
        # that its checkpoint task still holds: which it holds depends on how the syncs and the
        # task's first read of them interleaved (OffsetSyncStore keeps only the last sync per
        # partition seen before that read ends), so now and then a partition gets none. That
        # is MM2's result, reported side by side, not a failure of this test.
        with contextlib.suppress(AssertionError):
            wait_for(lambda: len(mm2_translated()) == 4, 120, "MM2 checkpoints")
        theirs = mm2_translated()
        assert theirs, "MM2 emitted no checkpoint at all"
    report = []
    for p, group_offset in sorted(PLAIN_COMMITS.items()):
        mine_text = (f"{plain}[{p}] at {group_offset}: kafka-mirror re-reads "
                     f"{rereads[(plain, p)]}, MirrorMaker 2 ")
        if (f"{mm_alias}.{plain}", p) not in theirs:
            report.append(mine_text + "has no checkpoint (its consumer would start from "
                          "auto.offset.reset)")
            continue
        target = _records(destination_cluster, f"{mm_alias}.{plain}", p)
        skipped, reread = _resume_check(source[(plain, p)], target, group_offset,
                                        theirs[(f"{mm_alias}.{plain}", p)])
        assert skipped == 0
        report.append(mine_text + f"re-reads {reread}")
    print("\n".join(report))


def test_checkpoint_topic_that_cannot_be_created_is_a_clear_error(
    source_cluster: LocalKafkaCluster, destination_cluster: LocalKafkaCluster, tmp_path: Path,
) -> None:
    tag = _letters()
    src, dst = f"cs{tag}", f"cd{tag}"
    config = _config(tmp_path / "mm2.properties", src, dst, source_cluster, destination_cluster,
                     f"cc-{tag}", ".*")
    # three replicas on a one-broker cluster: the broker refuses the topic
    with config.open("a", encoding="utf-8") as out:
        out.write("checkpoints.topic.replication.factor = 3\n")
    run = subprocess.run([*CLI, "run", str(config), "--state-dir", str(tmp_path / "state")],
                         capture_output=True, text=True, timeout=180)
    assert run.returncode == 1, run.stdout[-2000:] + run.stderr[-2000:]
    assert f"cannot create topic '{src}.checkpoints.internal' on cluster '{dst}'" in run.stderr
