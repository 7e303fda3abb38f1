"""Side-by-side tables (text) and the machine description that goes into the JSON report."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import statistics
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from confluent_kafka import libversion

from .common import (
    KM_AT_LEAST_ONCE,
    KM_COLD,
    KM_METRICS,
    KM_MICRO_BATCH,
    KM_REALTIME,
    KM_STANDALONE,
    MB,
)
from .measures import MirrorResult
from .workload import ProduceResult, Workload

ROWS: list[tuple[str, Callable[[MirrorResult], float | None], str]] = [
    ("records/s (start to done)", lambda r: r.records_per_s, "{:,.0f}"),
    ("MB/s (start to done)", lambda r: r.mb_per_s, "{:.1f}"),
    ("records/s (first to last record)", lambda r: r.steady_records_per_s, "{:,.0f}"),
    ("MB/s (first to last record)", lambda r: r.steady_mb_per_s, "{:.1f}"),
    ("wall time s (start to done)", lambda r: r.wall_seconds, "{:.1f}"),
    ("  of which: until it logs 'running' s", lambda r: r.ready_seconds, "{:.1f}"),
    ("  of which: until first record s", lambda r: r.first_record_seconds, "{:.1f}"),
    ("CPU s (process tree, start to done)", lambda r: r.cpu_seconds, "{:.1f}"),
    ("  of which: until first record", lambda r: r.cpu_seconds_at_first_record, "{:.1f}"),
    ("CPU s per GB, start to done", lambda r: r.cpu_seconds / (r.payload_bytes / 1e9), "{:.1f}"),
    ("CPU s per GB, first to last record", lambda r: r.steady_cpu_per_gb, "{:.1f}"),
    ("  of which: JIT compiler threads",
     lambda r: r.jit_cpu_seconds_steady / (r.payload_bytes / 1e9), "{:.1f}"),
    ("  of which: GC threads",
     lambda r: r.gc_cpu_seconds_steady / (r.payload_bytes / 1e9), "{:.1f}"),
    ("peak RSS MB (tree, sampled)", lambda r: r.peak_rss_mb, "{:,.0f}"),
    ("sum of per-process VmHWM MB", lambda r: r.sum_vmhwm_mb, "{:,.0f}"),
    ("both brokers' CPU s (same interval)", lambda r: r.brokers_cpu_seconds, "{:.1f}"),
    ("other work's CPU s (same interval)", lambda r: r.other_cpu_seconds, "{:.1f}"),
]


def _median(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def _ratio(a: float | None, b: float | None) -> str:
    return f"{b / a:.2f}x" if a and b is not None else "-"


def render_table(
    workload: Workload,
    produce_source: ProduceResult,
    produce_ceiling: ProduceResult | None,
    results: Sequence[MirrorResult],
) -> str:
    mm2 = [r for r in results if r.name == "MirrorMaker 2"]
    km = [r for r in results if r.name == "kafka-mirror"]
    # kafka-mirror variants, each with its ratio to the default run
    variants = [
        (label, ratio, runs)
        for name, label, ratio in (
            (KM_METRICS, "metrics on", "on/off"),
            (KM_AT_LEAST_ONCE, "EO off", "off/on"),
            (KM_STANDALONE, "standalone", "st/local"),
            (KM_REALTIME, "real-time", "rt/rt"),
            (KM_MICRO_BATCH, "micro-batch", "mb/rt"),
            (KM_COLD, "cold start", "cold/warm"),
        )
        if (runs := [r for r in results if r.name == name])
    ]
    rounds = max([len(mm2), len(km)] + [len(runs) for _, _, runs in variants])
    width = 38
    header = f"{'':{width}} {'MirrorMaker 2':>14} {'kafka-mirror':>14} {'kafka-mirror/MM2':>17}"
    for label, ratio, _ in variants:
        header += f" {label:>14} {ratio:>8}"
    lines = [
        f"workload: {workload.records:,} records, {workload.record_size} B values + keys + "
        f"2 headers, {workload.partitions} partitions, {produce_source.payload_bytes / MB:,.0f} "
        f"MB key+value; benchmark producer compression {workload.compression}"
        + (f"; median of {rounds} rounds" if rounds > 1 else ""),
        header,
        "-" * len(header),
    ]
    for label, get, fmt in ROWS:
        a = _median([get(r) for r in mm2])
        b = _median([get(r) for r in km])
        line = (
            f"{label:{width}} {fmt.format(a) if a is not None else '-':>14} "
            f"{fmt.format(b) if b is not None else '-':>14} {_ratio(a, b):>17}"
        )
        for _, _, runs in variants:
            c = _median([get(r) for r in runs])
            line += f" {fmt.format(c) if c is not None else '-':>14} {_ratio(b, c):>8}"
        lines.append(line)
    lines.append("-" * len(header))
    produces = [("raw produce into the source", produce_source)]
    if produce_ceiling is not None:
        produces.append(("raw produce into dest. (ceiling)", produce_ceiling))
    for label, p in produces:
        lines.append(
            f"{label:{width}} {p.records_per_s:>14,.0f} rec/s {p.mb_per_s:>6.1f} MB/s "
            f"({p.seconds:.1f} s; {p.producers} confluent-kafka producers, {p.compression}, "
            f"{p.producer_cpu_seconds:.0f} CPU s)"
        )
    if rounds > 1:
        by_name = [("MirrorMaker 2", mm2), ("kafka-mirror", km)]
        by_name += [(runs[0].name, runs) for _, _, runs in variants]
        for name, runs in by_name:
            if not runs:
                continue
            lines.append(
                f"{name} per round (rec/s start-to-done / first-to-last): "
                + ", ".join(f"{r.records_per_s:,.0f}/{r.steady_records_per_s:,.0f}" for r in runs)
            )
    for r in results:
        if r.destination_records != r.records:
            lines.append(
                f"NOTE: {r.name} (round {r.round}) left {r.destination_records:,} records on "
                f"the destination (expected {r.records:,})"
            )
    return "\n".join(lines)


def machine_info() -> dict[str, Any]:
    mem_kb = 0
    with open("/proc/meminfo", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("MemTotal:"):
                mem_kb = int(line.split()[1])
    java = subprocess.run(
        ["java", "-version"], capture_output=True, text=True, check=False
    ).stderr.splitlines()
    return {
        "cpus": os.cpu_count(),
        "memory_gib": round(mem_kb / 1024 / 1024, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "java": java[0] if java else "?",
        "confluent_kafka": importlib.metadata.version("confluent-kafka"),
        "librdkafka": libversion()[0],
        "loadavg_at_start": os.getloadavg(),
        "git": git_state(),
    }


def git_state() -> dict[str, Any]:
    """The commit measured, and the uncommitted files of the product code (src/) if any."""
    root = Path(__file__).resolve().parents[2]

    def git(*args: str) -> str:
        proc = subprocess.run(
            ["git", "-C", str(root), *args], capture_output=True, text=True, check=False
        )
        return proc.stdout.strip()

    return {
        "head": git("rev-parse", "--short", "HEAD"),
        "uncommitted_in_src": git("status", "--porcelain", "--", "src").splitlines(),
    }


# --------------------------------------------------------------------------- latency mode
def _fmt(value: float | None, spec: str = "{:,.1f}") -> str:
    return "-" if value is None else spec.format(value)


def render_latency_tables(report: dict[str, Any], labels: Sequence[str]) -> str:
    """Latency mode's side-by-side tables: per rate, start-up, topic changes, load."""
    probes: dict[str, dict[int, dict[str, Any]]] = report["probes"]
    phases: dict[str, dict[str, Any]] = report["phases"]
    mirrors: dict[str, dict[str, Any]] = report["mirrors"]
    settings = report["settings"]
    width = 34
    header = f"{'':{width}}" + "".join(f" {label:>22}" for label in labels)
    rule = "-" * len(header)

    def row(label: str, values: Sequence[str]) -> str:
        return f"{label:{width}}" + "".join(f" {v:>22}" for v in values)

    lines = [
        "Replication latency: produce() on the source until a probe consumer fetched the record "
        "from the destination, ms",
        f"({settings['partitions']} partitions, {settings['record_size']} B values, client "
        f"tuning '{settings['tuning']}', all mirrors running at once, each into its own "
        "destination cluster)",
        header,
        rule,
    ]
    for key, phase in phases.items():
        numbers = [int(n) for n in key.split(",")]
        if numbers[0] == 0 or numbers[0] >= 100:
            continue
        number = numbers[0]
        lines.append(f"{phase['rate']:,.0f} records/s, {settings['duration_s']:g} s")
        stats = [probes[label].get(number, {}) for label in labels]
        for name in ("p50", "p99", "p99.9", "max"):
            lines.append(row(f"  {name}", [_fmt(s.get("latency_ms", {}).get(name)) for s in stats]))
        lines.append(
            row("  max gap in a partition", [_fmt(s.get("max_partition_gap_ms")) for s in stats])
        )
        lines.append(
            row(
                "  records received/produced",
                [f"{s.get('records', 0):,}/{phase['produced'].get(number, 0):,}" for s in stats],
            )
        )
        produced = phase["produced"].get(number, 0)
        lines.append(
            row("  produce rate reached, records/s", [f"{produced / settings['duration_s']:,.0f}"])
        )
        cpu = phase.get("mirror_cpu_seconds", {})
        lines.append(row("  mirror CPU s (phase + drain)", [_fmt(cpu.get(lb)) for lb in labels]))
        lines.append(f"  load average (1 min) at the end: {phase['loadavg_end'][0]:.1f}")
    lines.append(rule)
    mirror_labels = [lb for lb in labels if lb in mirrors]
    lines.append(
        row(
            "first record after process start s",
            [_fmt(mirrors[lb].get("first_record_s")) for lb in mirror_labels],
        )
    )
    lines.append(
        row("process logs it runs, s", [_fmt(mirrors[lb].get("ready_s")) for lb in mirror_labels])
    )
    lines.append(
        row(
            "CPU s (process tree, whole run)",
            [_fmt(mirrors[lb].get("cpu_seconds")) for lb in mirror_labels],
        )
    )
    lines.append(
        row(
            "peak RSS MB (tree, sampled)",
            [_fmt(mirrors[lb].get("peak_rss_mb"), "{:,.0f}") for lb in mirror_labels],
        )
    )
    changes = [(k, p) for k, p in phases.items() if "change" in p]
    if changes:
        lines += [
            rule,
            f"Topic changes while {settings['change_rate']:,.0f} records/s flow into the running "
            f"topic; refresh.topics.interval.seconds = {settings['refresh_topics_interval_s']}",
            header,
            rule,
        ]
        for key, phase in changes:
            main, new = (int(n) for n in key.split(","))
            change = phase["change"]
            lines.append(f"{phase['name']}: {change['topic']} {change['partitions']}")
            lines.append(
                row(
                    "  first record on dest. s (after add)",
                    [_fmt(phase["first_record_s"].get(lb), "{:,.2f}") for lb in mirror_labels],
                )
            )
            stats = [probes[label].get(main, {}) for label in labels]
            for name in ("p50", "p99", "max"):
                lines.append(
                    row(
                        f"  running partitions {name} ms",
                        [_fmt(s.get("latency_ms", {}).get(name)) for s in stats],
                    )
                )
            lines.append(
                row(
                    "  running partitions max gap ms",
                    [_fmt(s.get("max_partition_gap_ms")) for s in stats],
                )
            )
            added = [probes[label].get(new, {}).get("records", 0) for label in labels]
            produced = phase["produced"].get(new, 0)
            lines.append(
                row("  added records received/produced", [f"{n:,}/{produced:,}" for n in added])
            )
    load = report["loadavg"]
    lines.append(rule)
    lines.append(
        f"load average (1/5/15 min) at start {'/'.join(f'{v:.1f}' for v in load['start'])}, at "
        f"end {'/'.join(f'{v:.1f}' for v in load.get('end', load['start']))} "
        f"({report['machine']['cpus']} CPUs, shared with other work)"
    )
    return "\n".join(lines)
