"""Several flows in one ``kafka-mirror`` process: active/active, a chain, heartbeats, no cycles.

Three real clusters: the session's ``source`` (alias A here) and ``destination`` (B), plus a C
started by the test. Aliases are unique to the run, so other tests sharing the session clusters
(and their shared ``heartbeats`` topics) do not interfere: heartbeats are filtered on our aliases.
"""

from __future__ import annotations

import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from mirror_client_probe import probe
from mirror_process import CLI, MirrorProcess, end_offsets, first_occurrences, read_partitions

from kafka_mirror.mm2.records import Heartbeat, RecordFormatError
from kafka_mirror_testing.localcluster import LocalKafkaCluster
from kafka_mirror_testing.records import Message, produce
from kafka_mirror_testing.waiting import wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

PER_TOPIC = 3000  # records produced on each side
FIRST_CHUNK = 100  # produced before the mirror starts
CHUNK = 100
CHUNK_PAUSE = 0.7  # (3000 - 100) / 100 chunks * 0.7 s ~ 20 s of producing while mirroring
PARTITIONS = {"a": 3, "b": 2}


def _numbered(topic: str, partitions: int, start: int, stop: int) -> Iterator[Message]:
    for i in range(start, stop):
        yield Message(key=f"k{i % 17}".encode(), value=f"{topic}-{i}".encode(),
                      partition=i % partitions, headers=[("n", str(i).encode())],
                      timestamp=1_700_000_000_000 + i)


def _has(cluster: LocalKafkaCluster, topic: str, expected: dict[int, int]) -> bool:
    ends = end_offsets(cluster, topic)
    return bool(ends) and all(ends.get(p, -1) >= n for p, n in expected.items())


def _same_dedup(source: LocalKafkaCluster, topic: str, target: LocalKafkaCluster,
                copy: str) -> None:
    """``copy`` holds ``topic``'s records per partition, in order; at-least-once: a replayed
    record may appear twice, but never out of order and nothing may be missing."""
    src = read_partitions(source, topic)
    dst = read_partitions(target, copy)
    assert set(dst) == set(src), f"{copy}: partitions {sorted(dst)} != {sorted(src)}"
    for partition, records in src.items():
        assert len(dst[partition]) >= len(records), f"{copy}[{partition}] lost records"
        assert first_occurrences(dst[partition]) == records, (
            f"{copy}[{partition}] differs from {topic}[{partition}]"
        )


def _pairs(cluster: LocalKafkaCluster, topic: str, aliases: set[str]) -> set[tuple[str, str]]:
    """(source, target) of the heartbeats in ``topic`` that involve only our aliases."""
    out = set()
    for records in read_partitions(cluster, topic).values():
        for key, value, _, _ in records:
            try:
                beat = Heartbeat.decode(key, value)
            except RecordFormatError:
                continue  # not ours
            if {beat.source, beat.target} <= aliases:
                out.add((beat.source, beat.target))
    return out


def _topics(cluster: LocalKafkaCluster) -> set[str]:
    return set(cluster.admin().list_topics(timeout=30).topics)


def test_active_active_and_chain_with_heartbeats(
    source_cluster: LocalKafkaCluster, destination_cluster: LocalKafkaCluster,
    unique_topic: str, tmp_path: Path,
) -> None:
    tag = uuid.uuid4().hex[:6]
    a, b, c = f"a{tag}", f"b{tag}", f"c{tag}"
    aliases = {a, b, c}
    prefix = unique_topic
    topic_a, topic_b = f"{prefix}-a", f"{prefix}-b"
    began = time.monotonic()
    third = LocalKafkaCluster(f"c-{tag}", tmp_path, heap="384m")
    third.start(180.0)
    mirror: MirrorProcess | None = None
    writer: threading.Thread | None = None
    try:
        source_cluster.create_topic(topic_a, PARTITIONS["a"])
        destination_cluster.create_topic(topic_b, PARTITIONS["b"])
        produce(source_cluster, topic_a, _numbered(topic_a, PARTITIONS["a"], 0, FIRST_CHUNK))
        produce(destination_cluster, topic_b, _numbered(topic_b, PARTITIONS["b"], 0, FIRST_CHUNK))

        config = tmp_path / "mm2.properties"
        config.write_text(
            f"clusters = {a}, {b}, {c}\n"
            f"{a}.bootstrap.servers = {source_cluster.bootstrap}\n"
            f"{b}.bootstrap.servers = {destination_cluster.bootstrap}\n"
            f"{c}.bootstrap.servers = {third.bootstrap}\n"
            f"{a}->{b}.enabled = true\n"
            f"{b}->{a}.enabled = true\n"
            f"{b}->{c}.enabled = true\n"
            # our topics and their remote copies (A.t on B goes on to C); heartbeats anyway
            f"topics = .*{prefix}-[ab]\n"
            "emit.heartbeats.interval.seconds = 1\n"
            "refresh.topics.interval.seconds = 3\n"
            "replication.factor = 1\n"
            "heartbeats.topic.replication.factor = 1\n"
            "checkpoints.topic.replication.factor = 1\n"
            "offset-syncs.topic.replication.factor = 1\n"
            "spark.driver.memory = 768m\n"
            "spark.master = local[2]\n"
        )
        mirror = MirrorProcess(["run", str(config), "--state-dir", str(tmp_path / "state")],
                               tmp_path / "mirror.log").start()
        started = mirror
        # both directions are running before the bulk of the records is produced
        wait_for(lambda: _has(destination_cluster, f"{a}.{topic_a}", {0: 1}), 240,
                 f"{a}->{b} under way", started)
        wait_for(lambda: _has(source_cluster, f"{b}.{topic_b}", {0: 1}), 120,
                 f"{b}->{a} under way", started)
        mirror_up = time.monotonic()

        def produce_while_mirroring() -> None:
            for start in range(FIRST_CHUNK, PER_TOPIC, CHUNK):
                stop = start + CHUNK
                produce(source_cluster, topic_a, _numbered(topic_a, PARTITIONS["a"], start, stop))
                produce(destination_cluster, topic_b,
                        _numbered(topic_b, PARTITIONS["b"], start, stop))
                time.sleep(CHUNK_PAUSE)

        writer = threading.Thread(target=produce_while_mirroring, daemon=True)
        writer.start()
        writer.join(180)
        assert not writer.is_alive(), "producing took more than 180 s"
        produced = time.monotonic()

        def full(part: str) -> dict[int, int]:
            n = PARTITIONS[part]
            return {p: len(range(p, PER_TOPIC, n)) for p in range(n)}

        targets = [
            (destination_cluster, f"{a}.{topic_a}", "a"),
            (source_cluster, f"{b}.{topic_b}", "b"),
            (third, f"{b}.{a}.{topic_a}", "a"),
            (third, f"{b}.{topic_b}", "b"),
        ]
        for cluster, copy, part in targets:
            wait_for(lambda cl=cluster, t=copy, p=part: _has(cl, t, full(p)), 240,
                     f"{copy} complete", started)
        complete = time.monotonic()

        # every ordered pair of the three aliases emits (MM2 emits for disabled pairs too),
        # into `heartbeats` on the pair's target; the copies follow the enabled flows
        beats_at = {x: {(y, x) for y in aliases if y != x} for x in aliases}
        expected_beats = [
            (source_cluster, "heartbeats", beats_at[a]),
            (destination_cluster, "heartbeats", beats_at[b]),
            (third, "heartbeats", beats_at[c]),
            (destination_cluster, f"{a}.heartbeats", beats_at[a]),
            (source_cluster, f"{b}.heartbeats", beats_at[b]),
            (third, f"{b}.heartbeats", beats_at[b]),
            (third, f"{b}.{a}.heartbeats", beats_at[a]),
        ]
        for cluster, topic, pairs in expected_beats:
            wait_for(lambda cl=cluster, t=topic, want=pairs: _pairs(cl, t, aliases) >= want,
                     120, f"heartbeats {sorted(pairs)} in {topic}", started)
        beats = time.monotonic()

        code, stop_seconds = mirror.terminate(timeout=120)
        assert code == 0, mirror.output()[-4000:]
        # within systemd's default TimeoutStopSec. Flows stop one after another, each waiting
        # up to runner.STOP_GRACE_SECONDS (15 s) for a gap between batches; with heartbeats
        # arriving every second there rarely is one, so expect ~15 s per flow (31 and 46 s seen)
        assert stop_seconds < 30, mirror.output()[-4000:]
        _check_after_stop(source_cluster, destination_cluster, third, a, b, c, prefix)
    finally:
        if mirror is not None:
            mirror.cleanup()
        if writer is not None:
            writer.join(60)
        third.stop()
    print(f"mirror up after {mirror_up - began:.0f}s (incl. cluster C start), produced in "
          f"{produced - mirror_up:.0f}s, complete {complete - produced:.0f}s later, heartbeats "
          f"{beats - complete:.0f}s later, SIGTERM took {stop_seconds:.1f}s")


def _check_after_stop(source_cluster: LocalKafkaCluster, destination_cluster: LocalKafkaCluster,
                      third: LocalKafkaCluster, a: str, b: str, c: str, prefix: str) -> None:
    aliases = {a, b, c}
    topic_a, topic_b = f"{prefix}-a", f"{prefix}-b"
    # both directions complete, and the chain B->C carries A's records on
    _same_dedup(source_cluster, topic_a, destination_cluster, f"{a}.{topic_a}")
    _same_dedup(destination_cluster, topic_b, source_cluster, f"{b}.{topic_b}")
    _same_dedup(source_cluster, topic_a, third, f"{b}.{a}.{topic_a}")
    _same_dedup(destination_cluster, topic_b, third, f"{b}.{topic_b}")

    # no cycles: nothing comes home, no alias twice in a name, nothing from C (no C->X flow);
    # internal topics (offset syncs, checkpoints) aside
    on = {a: _topics(source_cluster), b: _topics(destination_cluster), c: _topics(third)}
    for alias, names in on.items():
        twice = {t for t in names if any(t.split(".").count(x) > 1 for x in aliases)}
        assert not twice, twice
        ours = {t for t in names
                if set(t.split(".")) & aliases and not t.endswith(".internal")}
        assert not {t for t in ours if alias in t.split(".")}, (alias, sorted(ours))
        assert not {t for t in ours if t.startswith(f"{c}.")}, (alias, sorted(ours))
    assert not {t for t in on[a] if t.startswith(f"{b}.{a}.")}
    assert not {t for t in on[b] if t.startswith(f"{a}.{b}.")}
    # other tests' mirrors share these clusters and their heartbeats topics (which replicate
    # whatever `topics` says, as in MM2): count only names whose whole chain is ours
    def mine(t: str) -> bool:
        hops = t.split(".")[:-1]
        return bool(hops) and set(hops) <= aliases and not t.endswith(".internal")

    assert {t for t in on[a] if t.startswith(f"{b}.") and mine(t)} == {
        f"{b}.{topic_b}", f"{b}.heartbeats"}
    assert {t for t in on[b] if t.startswith(f"{a}.") and mine(t)} == {
        f"{a}.{topic_a}", f"{a}.heartbeats"}
    assert {t for t in on[c] if mine(t)} == {
        f"{b}.{a}.{topic_a}", f"{b}.{topic_b}", f"{b}.heartbeats", f"{b}.{a}.heartbeats"}

    # heartbeats as Kafka's own MirrorClient decodes them: on B, exactly the pairs into B
    decoded = probe("decode-heartbeats", destination_cluster.client_config(), "heartbeats")
    pairs = {(h["source"], h["target"]) for h in decoded["heartbeats"]
             if {h["source"], h["target"]} <= aliases}
    assert pairs == {(a, b), (c, b)}, pairs
    decoded = probe("decode-heartbeats", third.client_config(), f"{b}.{a}.heartbeats")
    pairs = {(h["source"], h["target"]) for h in decoded["heartbeats"]
             if {h["source"], h["target"]} <= aliases}
    assert pairs == {(b, a), (c, a)}, pairs
    # ... and the exact sets everywhere (our decoder)
    for cluster, topic, want in [
        (source_cluster, "heartbeats", {(b, a), (c, a)}),
        (third, "heartbeats", {(a, c), (b, c)}),
        (destination_cluster, f"{a}.heartbeats", {(b, a), (c, a)}),
        (source_cluster, f"{b}.heartbeats", {(a, b), (c, b)}),
        (third, f"{b}.heartbeats", {(a, b), (c, b)}),
    ]:
        assert _pairs(cluster, topic, aliases) == want, topic

    # the replication path, as MirrorClient sees it from the heartbeats topics' names
    b_props = {"bootstrap.servers": destination_cluster.bootstrap}
    c_props = {"bootstrap.servers": third.bootstrap}
    assert probe("hops", b_props, a) == {"hops": 1}
    assert probe("hops", c_props, a) == {"hops": 2}  # via B.A.heartbeats
    assert probe("hops", c_props, b) == {"hops": 1}
    assert {a, b} <= set(probe("upstream", c_props)["upstream"])


IDENTITY = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"


def _identity_config(path: Path, topics: str) -> Path:
    path.write_text(
        "clusters = A, B\n"
        "A.bootstrap.servers = 127.0.0.1:1\n"
        "B.bootstrap.servers = 127.0.0.1:2\n"
        "A->B.enabled = true\n"
        "B->A.enabled = true\n"
        f"replication.policy.class = {IDENTITY}\n" + topics
    )
    return path


def test_identity_both_ways_is_refused(tmp_path: Path) -> None:
    looping = _identity_config(tmp_path / "loop.properties",
                               "A->B.topics = orders.*\nB->A.topics = orders.*\n")
    for args in (["check-config", str(looping)],
                 ["run", str(looping), "--state-dir", str(tmp_path / "state")]):
        run = subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=180)
        assert run.returncode == 2, (args, run.stdout, run.stderr)
        assert "key 'A->B.topics'" in run.stderr, run.stderr
        assert "A->B and B->A both use IdentityReplicationPolicy" in run.stderr, run.stderr
        assert "back and forth" in run.stderr, run.stderr
        assert "'orders" in run.stderr, run.stderr  # an example topic both flows would pass
        assert str(looping) in run.stderr

    # one `topics` for both directions is the same loop
    shared = _identity_config(tmp_path / "shared.properties", "topics = orders.*\n")
    run = subprocess.run([*CLI, "check-config", str(shared)], capture_output=True, text=True,
                         timeout=180)
    assert run.returncode == 2, (run.stdout, run.stderr)
    assert "topics'" in run.stderr and "back and forth" in run.stderr, run.stderr

    disjoint = _identity_config(tmp_path / "disjoint.properties",
                                "A->B.topics = a\\\\..*\nB->A.topics = b\\\\..*\n")
    run = subprocess.run([*CLI, "check-config", str(disjoint)], capture_output=True, text=True,
                         timeout=180)
    assert run.returncode == 0, (run.stdout, run.stderr)
    assert "flow A->B: topics a\\..*" in run.stdout, run.stdout
    assert "flow B->A: topics b\\..*" in run.stdout, run.stdout
