"""Latency mode: all mirrors run at the same time, each into a destination cluster of its own,
while one producer writes the source topic at fixed rates; a probe consumer per destination
(and one on the source: "no mirror") measures each record's latency (see ``latency_probe``).

Steps of one run:

1. warm-up: the mirrors are started together while records flow at the lowest rate; the time
   from each mirror's process start to its first record on the destination is kept;
2. one phase per rate (``--rates``, ``--duration`` seconds each); after each, the producer
   pauses until every probe has received every record of the phase (or ``--drain-timeout``);
3. topic changes (unless ``--no-topic-change``), at ``--change-rate`` on the running topic:
   a new source topic (``bench-added``) gets records at 100/s, then the running topic grows by
   ``--add-partitions`` partitions that get records at 100/s; for each, the time from the admin
   call until its first record is on each destination (end offsets polled every 50 ms), and the
   latency and largest receive gap of the running partitions meanwhile.
"""

from __future__ import annotations

import argparse
import gc
import multiprocessing
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from confluent_kafka.admin import NewPartitions

from kafka_mirror_testing.localcluster import LocalKafkaCluster, tail

from . import km_driver
from .clusters import (
    SourceLedger,
    admin_client,
    present_end_offsets,
)
from .common import (
    CONSUMER_TUNING,
    LATENCY_CONSUMER_TUNING,
    LATENCY_PRODUCER_TUNING,
    PRODUCER_TUNING,
    SOURCE_ALIAS,
    SOURCE_TOPIC,
    MirrorFailed,
)
from .measures import TreeSampler, log_time
from .mirrors import (
    Mirror,
    Probe,
    make_mirrors,
    mirror_cpu,
    start_source_and_destinations,
    stop_everything,
)
from .rate_producer import RateProducer
from .report import machine_info, render_latency_tables
from .workload import Workload

ADDED_TOPIC = f"{SOURCE_TOPIC}-added"
TOPICS_REGEX = f"{SOURCE_TOPIC}.*"
NO_MIRROR = "no mirror (source)"
WARMUP_PHASE = 0
CHANGE_TOPIC_MAIN, CHANGE_TOPIC_NEW, CHANGE_PARTS_MAIN, CHANGE_PARTS_NEW = 101, 102, 103, 104
EXTRA_RATE = 100.0  # records/s into the added topic or partitions
OFFSET_POLL = 0.05


def target(topic: str) -> str:
    return f"{SOURCE_ALIAS}.{topic}"


def _wait_for_records(admin: Any, topic: str, partitions: Sequence[int], timeout: float,
                      *, least: int = 1) -> None:
    """Wait until each of ``partitions`` of ``topic`` holds ``least`` records (the cluster of
    ``admin``); ``least=0``: until the leader of each answers for it."""
    deadline = time.monotonic() + timeout
    while True:
        offsets = present_end_offsets(admin, topic, partitions)
        if len(offsets) == len(partitions) and all(v >= least for v in offsets.values()):
            return
        if time.monotonic() > deadline:
            raise MirrorFailed(f"not {least} records in each of {topic} {list(partitions)} "
                               f"after {timeout:.0f} s")
        time.sleep(OFFSET_POLL)


def wait_first_records(
    mirrors: Sequence[Mirror],
    admins: dict[str, Any],
    topic: str,
    partitions: Sequence[int],
    since: float,
    timeout: float,
) -> dict[str, float | None]:
    """Seconds from ``since`` (monotonic) until each of ``partitions`` of ``topic`` holds a
    record on each mirror's destination (None: not within ``timeout``)."""
    waiting = {m.label: m for m in mirrors}
    found: dict[str, float | None] = {m.label: None for m in mirrors}
    while waiting and time.monotonic() - since < timeout:
        for label, mirror in list(waiting.items()):
            offsets = present_end_offsets(admins[label], topic, partitions)
            if len(offsets) == len(partitions) and all(v > 0 for v in offsets.values()):
                found[label] = time.monotonic() - since
                del waiting[label]
                print(
                    f"  [{label}] {topic} {list(partitions)}: first records after "
                    f"{found[label]:.2f} s",
                    flush=True,
                )
            elif not mirror.alive():
                raise MirrorFailed(
                    f"{label} exited; last lines of {mirror.log_path}:\n{tail(mirror.log_path)}"
                )
        time.sleep(OFFSET_POLL)
    return found


def drain(
    probes: Sequence[Probe], expected: dict[int, int], timeout: float
) -> dict[str, dict[int, int]]:
    """Wait until every probe received ``expected`` records of each phase; the counts seen."""
    deadline = time.monotonic() + timeout
    seen: dict[str, dict[int, int]] = {}
    while True:
        seen = {p.name: p.ask("counts") for p in probes}
        done = all(
            seen[p.name].get(phase, 0) >= count for p in probes for phase, count in expected.items()
        )
        if done or time.monotonic() > deadline:
            return seen
        time.sleep(0.5)


def _phase_total(counts: dict[tuple[int, str, int], int], phase: int) -> int:
    return sum(v for (ph, _t, _p), v in counts.items() if ph == phase)


def run_latency(ns: argparse.Namespace, command: str) -> dict[str, Any]:
    rates: list[float] = ns.rates
    partitions: int = ns.partitions
    realtime = km_driver.realtime_settings(ns.km_realtime_setting) if ns.km_realtime else None
    workdir: Path = (
        ns.workdir.resolve() if ns.workdir else Path(tempfile.mkdtemp(prefix="mirror-bench-"))
    )
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"work directory {workdir}", flush=True)
    consumer_tuning = LATENCY_CONSUMER_TUNING if ns.tuning == "latency" else CONSUMER_TUNING
    producer_tuning = LATENCY_PRODUCER_TUNING if ns.tuning == "latency" else PRODUCER_TUNING
    report: dict[str, Any] = {
        "command": command,
        "mode": "latency",
        "settings": {
            "rates": rates,
            "duration_s": ns.duration,
            "partitions": partitions,
            "record_size": ns.record_size,
            "change_rate": ns.change_rate,
            "add_partitions": ns.add_partitions,
            "refresh_topics_interval_s": ns.refresh_seconds,
            "tuning": ns.tuning,
            "consumer_tuning": consumer_tuning,
            "producer_tuning": producer_tuning,
            "topic_change": not ns.no_topic_change,
        },
        "machine": machine_info(),
        "loadavg": {"start": os.getloadavg()},
    }
    ctx = multiprocessing.get_context("spawn")
    clusters: list[LocalKafkaCluster] = []
    mirrors: list[Mirror] = []
    probes: list[Probe] = []
    producer: RateProducer | None = None
    workload = Workload(0, ns.record_size, partitions, ns.compression)
    try:
        kinds = ["mm2", "kafka-mirror"] if ns.only == "both" else [ns.only]
        if realtime is not None:
            kinds.append("kafka-mirror-rt")
        source, destinations = start_source_and_destinations(ns, workdir, kinds, clusters)
        mirrors.extend(make_mirrors(ns, workdir, source, destinations, workload, TOPICS_REGEX,
                                    consumer_tuning, producer_tuning, realtime))
        source.create_topic(SOURCE_TOPIC, partitions=partitions)
        gc.collect()

        source_probe = Probe(ctx, source.bootstrap, NO_MIRROR)
        probes.append(source_probe)
        source_probe.commands.put(("gap_topic", SOURCE_TOPIC))
        source_probe.assign(SOURCE_TOPIC, range(partitions))
        for mirror in mirrors:
            mirror.probe = Probe(ctx, mirror.destination.bootstrap, mirror.label)
            mirror.probe.commands.put(("gap_topic", target(SOURCE_TOPIC)))
            probes.append(mirror.probe)
        producer = RateProducer(source.bootstrap, ns.record_size, ns.compression, workdir)
        return _measure(
            ns, report, source, mirrors, probes, source_probe, producer, rates, partitions
        )
    finally:
        stop_everything(mirrors, producer, probes, clusters, workdir, ns.keep)


def _measure(
    ns: argparse.Namespace,
    report: dict[str, Any],
    source: LocalKafkaCluster,
    mirrors: list[Mirror],
    probes: list[Probe],
    source_probe: Probe,
    producer: RateProducer,
    rates: list[float],
    partitions: int,
) -> dict[str, Any]:
    all_parts = list(range(partitions))
    phases: dict[str, Any] = {}
    admins = {m.label: m.destination.admin() for m in mirrors}
    ledger = SourceLedger(source.admin())
    try:
        # 1. warm-up: records flow, the mirrors start together.
        warm_rate = min(min(rates), 1000.0)
        producer.stream("main", SOURCE_TOPIC, all_parts, warm_rate, WARMUP_PHASE)
        print(
            f"starting {', '.join(m.label for m in mirrors)} (records at {warm_rate:,.0f}/s)",
            flush=True,
        )
        for mirror in mirrors:
            mirror.started = time.monotonic()
            mirror.started_wall = time.time()
            mirror.sampler = TreeSampler(mirror.start()).start()
        since = min(m.started for m in mirrors)
        first = wait_first_records(
            mirrors, admins, target(SOURCE_TOPIC), all_parts, since, ns.timeout
        )
        for mirror in mirrors:
            seconds = first[mirror.label]
            if seconds is None:
                raise MirrorFailed(f"{mirror.label}: no records after {ns.timeout:.0f} s")
            mirror.first_record_s = seconds - (mirror.started - since)
            assert mirror.probe is not None
            mirror.probe.assign(target(SOURCE_TOPIC), all_parts)
        time.sleep(ns.warmup)
        _run_phase_end(
            producer,
            ledger,
            probes,
            [WARMUP_PHASE],
            ns.drain_timeout,
            phases,
            "warm-up",
            mirrors,
            0.0,
            warm_rate,
        )

        # 2. one phase per rate
        for number, rate in enumerate(rates, start=1):
            print(f"phase {number}: {rate:,.0f} records/s for {ns.duration:.0f} s", flush=True)
            cpu_before = {m.label: mirror_cpu(m) for m in mirrors}
            began = time.monotonic()
            producer.stream("main", SOURCE_TOPIC, all_parts, rate, number)
            time.sleep(ns.duration)
            _run_phase_end(
                producer,
                ledger,
                probes,
                [number],
                ns.drain_timeout,
                phases,
                f"{rate:g}/s",
                mirrors,
                began,
                rate,
                cpu_before,
            )

        # 3. topic changes
        if not ns.no_topic_change:
            _topic_change(
                ns,
                source,
                mirrors,
                probes,
                source_probe,
                producer,
                ledger,
                admins,
                phases,
                partitions,
            )
    finally:
        for admin in admins.values():
            del admin
        admins.clear()
        del ledger
        gc.collect()

    report["loadavg"]["end"] = os.getloadavg()
    report["phases"] = phases
    for mirror in mirrors:
        assert mirror.sampler is not None
        mirror.sampler.sample()
        snap = mirror.sampler.snapshot()
        mirror.results.update(
            first_record_s=mirror.first_record_s,
            ready_s=log_time(mirror.log_path, mirror.ready_marker, mirror.started_wall),
            cpu_seconds=snap["cpu_seconds"],
            peak_rss_mb=snap["peak_rss_mb"],
            config=mirror.config,
        )
    summaries = {p.name: p.ask("report", timeout=300) for p in probes}
    report["mirrors"] = {m.label: m.results for m in mirrors}
    report["probes"] = {name: s["phases"] for name, s in summaries.items()}
    labels = [m.label for m in mirrors] + [NO_MIRROR]
    report["tables"] = render_latency_tables(report, labels)
    print()
    print(report["tables"], flush=True)
    return report


def _run_phase_end(
    producer: RateProducer,
    ledger: SourceLedger,
    probes: Sequence[Probe],
    numbers: Sequence[int],
    drain_timeout: float,
    phases: dict[str, Any],
    name: str,
    mirrors: Sequence[Mirror],
    began: float,
    rate: float,
    cpu_before: dict[str, float] | None = None,
) -> None:
    """Stop producing, wait for the probes to drain, and note what the phase produced."""
    producer.stop_stream("main")
    produced = producer.counts()
    acknowledged = {n: _phase_total(produced["counts"], n) for n in numbers}
    # What a probe can receive is what the source holds: normally what its producer had
    # acknowledged; where the two differ, both are reported.
    held = ledger.held(produced["counts"], numbers)
    expected = acknowledged if held is None else held
    if expected != acknowledged:
        print(
            f"  note: the source holds {expected} records of the phase, its producer had "
            f"acknowledged {acknowledged}; the probes are held to what the source holds",
            flush=True,
        )
    seen = drain(probes, expected, drain_timeout)
    ended = time.monotonic()
    entry: dict[str, Any] = {
        "name": name,
        "rate": rate,
        "produced": expected,
        "acknowledged": acknowledged,
        "received": {p: {n: c.get(n, 0) for n in numbers} for p, c in seen.items()},
        "loadavg_end": os.getloadavg(),
    }
    if cpu_before is not None:
        cpu = {m.label: mirror_cpu(m) - cpu_before[m.label] for m in mirrors}
        entry["seconds"] = ended - began  # producing and draining
        entry["mirror_cpu_seconds"] = cpu
        entry["mirror_cpu_cores"] = {k: v / max(ended - began, 1e-9) for k, v in cpu.items()}
    phases[",".join(str(n) for n in numbers)] = entry
    short = [
        f"{p}: {entry['received'][p]}"
        for p in entry["received"]
        if entry["received"][p] != expected
    ]
    print(
        f"  produced {expected}" + (f"; short: {short}" if short else "; all received"), flush=True
    )


def _topic_change(
    ns: argparse.Namespace,
    source: LocalKafkaCluster,
    mirrors: list[Mirror],
    probes: list[Probe],
    source_probe: Probe,
    producer: RateProducer,
    ledger: SourceLedger,
    admins: dict[str, Any],
    phases: dict[str, Any],
    partitions: int,
) -> None:
    all_parts = list(range(partitions))
    limit = ns.refresh_seconds * 4 + 60.0
    steps = [
        ("new topic", CHANGE_TOPIC_MAIN, CHANGE_TOPIC_NEW, ADDED_TOPIC, all_parts),
        (
            "partitions added",
            CHANGE_PARTS_MAIN,
            CHANGE_PARTS_NEW,
            SOURCE_TOPIC,
            list(range(partitions, partitions + ns.add_partitions)),
        ),
    ]
    for name, main_phase, new_phase, topic, new_parts in steps:
        if not new_parts:
            continue
        print(f"topic change: {name} while {ns.change_rate:,.0f} records/s flow", flush=True)
        cpu_before = {m.label: mirror_cpu(m) for m in mirrors}
        began = time.monotonic()
        producer.stream("main", SOURCE_TOPIC, all_parts, ns.change_rate, main_phase)
        time.sleep(ns.change_lead)
        with admin_client(source) as admin:
            if topic == SOURCE_TOPIC:
                futures = admin.create_partitions(
                    [NewPartitions(topic, partitions + len(new_parts))]
                )
            else:
                from confluent_kafka.admin import NewTopic

                futures = admin.create_topics([NewTopic(topic, partitions, 1)])
            for future in futures.values():
                future.result(timeout=30)
            del futures
            changed = time.monotonic()
            # The stream starts once the new partitions' leader serves them. Twice on a loaded
            # box (CI, stop 57) a batch of the Java producer to a new partition was not sent
            # within delivery.timeout.ms (120 s) and the smoke run failed; a batch sent before
            # the broker had taken the partition up is the likely cause (not proven).
            _wait_for_records(admin, topic, new_parts, limit, least=0)
            producer.stream("extra", topic, new_parts, EXTRA_RATE, new_phase)
            # The source probe reads the new partitions once they hold records, as the probes
            # of the destinations do: assigned (from the beginning) in the instant of their
            # creation, a probe once received one record less than was produced (CI, stop 34).
            _wait_for_records(admin, topic, new_parts, limit)
        source_probe.assign(topic, new_parts)
        first = wait_first_records(mirrors, admins, target(topic), new_parts, changed, limit)
        for mirror in mirrors:
            if first[mirror.label] is not None:
                assert mirror.probe is not None
                mirror.probe.assign(target(topic), new_parts)
        time.sleep(ns.change_tail)
        producer.stop_stream("extra")
        _run_phase_end(
            producer,
            ledger,
            probes,
            [main_phase, new_phase],
            ns.drain_timeout,
            phases,
            name,
            mirrors,
            began,
            ns.change_rate,
            cpu_before,
        )
        phases[f"{main_phase},{new_phase}"]["first_record_s"] = first
        phases[f"{main_phase},{new_phase}"]["change"] = {
            "topic": topic,
            "partitions": new_parts,
            "seconds_after_phase_start": changed - began,
        }
