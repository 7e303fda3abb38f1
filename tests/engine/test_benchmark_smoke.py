"""The benchmark (bench/mirror_benchmark.py) must keep working: not a performance test.

A ``--smoke`` run (a tiny latency-mode run: both mirrors, one low rate for 5 s, a topic and two
partitions added) must finish and write a well-formed report in which every mirror is present
and every probe received exactly the records produced. No timing figure is asserted: figures on
a shared machine are not test results. Every benchmark command quoted in the docs must parse.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from mirror_process import CLASS_DATA_DIR

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench"
ENTRY = BENCH / "mirror_benchmark.py"
DOCS = [REPO / "README.md", REPO / "docs" / "benchmarks.md"]


def documented_commands() -> list[list[str]]:
    """The arguments of every ``bench/mirror_benchmark.py ...`` command quoted in the docs."""
    commands = []
    for doc in DOCS:
        for match in re.finditer(r"bench/mirror_benchmark\.py([^`\n]*)", doc.read_text()):
            args = shlex.split(match.group(1).replace("FILE", "out.json"))
            commands.append(args)
    return commands


def test_documented_commands_parse() -> None:
    sys.path.insert(0, str(BENCH))
    try:
        from mirror_bench.cli import build_parser
    finally:
        sys.path.remove(str(BENCH))
    commands = documented_commands()
    assert any("--latency" in c for c in commands), "docs/benchmarks.md lost the latency command"
    assert any("--scale" in c for c in commands), "docs/benchmarks.md lost the scale command"
    parser = build_parser()
    for args in commands:
        parser.parse_args(args)


def test_realtime_settings_are_keys_kafka_mirror_knows() -> None:
    """``--km-realtime``'s default settings pass the check against kafka-mirror's keys (a renamed
    key would make every ``--km-realtime`` run refuse to start)."""
    sys.path.insert(0, str(BENCH))
    try:
        from mirror_bench.cli import build_parser
        from mirror_bench.km_driver import realtime_settings
    finally:
        sys.path.remove(str(BENCH))
    ns = build_parser().parse_args(["--latency", "--km-realtime"])
    assert ns.km_realtime_setting is None  # main() fills in the default below
    assert realtime_settings([("mirror.mode", "realtime")]) == {"mirror.mode": "realtime"}
    assert realtime_settings([("A->B.mirror.realtime.batch.duration.ms", "30000")])
    with pytest.raises(SystemExit, match=r"mirror\.nope"):
        realtime_settings([("mirror.nope", "1")])


def test_a_second_kafka_mirror_s_setting_without_the_second_mirror_is_refused(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Alone, ``--km-realtime-setting`` would change nothing (the second kafka-mirror is not
    run): refused, naming the option."""
    sys.path.insert(0, str(BENCH))
    try:
        from mirror_bench.cli import main
    finally:
        sys.path.remove(str(BENCH))
    with pytest.raises(SystemExit) as refused:
        main(["--scale", "200x10", "--km-realtime-setting", "mirror.realtime.groups=2"])
    assert refused.value.code == 2
    assert "--km-realtime-setting sets the second kafka-mirror's settings" in \
        capsys.readouterr().err


def test_failover_stall_counts_only_while_the_source_is_ahead() -> None:
    """The failover mode's stall (``longest_stall``): time the target stood still while the
    source held records it lacked, from the kill on; a partition the producer left alone is not
    stalled."""
    sys.path.insert(0, str(BENCH))
    try:
        from mirror_bench.failover import longest_stall
    finally:
        sys.path.remove(str(BENCH))
    # kill at 10 s: the source grows all along, the target stands at 10 from 10 s to 15 s
    samples = [(t / 2, t / 2 if t / 2 < 10 or t / 2 >= 15 else 10, t / 2 + 0.5)
               for t in range(60)]
    assert longest_stall(samples, 10.0) == 5.0
    # nothing to copy: the target equals the source, never stalled
    assert longest_stall([(float(t), 5, 5) for t in range(20)], 3.0) == 0.0
    # behind at the kill and never growing: stalled from the kill to the last sample
    assert longest_stall([(float(t), 1, 5) for t in range(20)], 3.0) == 16.0


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.xdist_group("class-data")  # see test_class_data: one archive build at a time
def test_benchmark_smoke_run(tmp_path: Path) -> None:
    report_path = tmp_path / "smoke.json"
    proc = subprocess.run(
        # the Spark driver's class data of the test mirrors (built once, mapped by every start)
        [sys.executable, str(ENTRY), "--smoke", "--json", str(report_path),
         "--km-class-data-dir", str(CLASS_DATA_DIR)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=840,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads(report_path.read_text())
    assert report["mode"] == "latency"
    mirrors = set(report["mirrors"])
    assert mirrors == {"MirrorMaker 2", "kafka-mirror"}
    assert set(report["probes"]) == mirrors | {"no mirror (source)"}
    phases = report["phases"]
    # warm-up, one rate, the new topic and the partitions added
    assert set(phases) == {"0", "1", "101,102", "103,104"}
    for phase in phases.values():
        for probe, received in phase["received"].items():
            assert received == phase["produced"], (probe, phase["name"])
            assert all(count > 0 for count in phase["produced"].values()), phase["name"]
    for name in ("101,102", "103,104"):
        assert set(phases[name]["first_record_s"]) == mirrors
        assert all(v is not None for v in phases[name]["first_record_s"].values())
    for label, summary in report["probes"].items():
        stats = summary["1"]
        assert stats["records"] == phases["1"]["produced"]["1"], label
        assert set(stats["latency_ms"]) >= {"p50", "p99", "max"}, label
    for label in report["probes"]:
        assert label in report["tables"]


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.xdist_group("class-data")
def test_scale_mode_smoke_run(tmp_path: Path) -> None:
    """A tiny ``--scale`` run: every partition across on both destinations, every steady record
    received by both, every figure of the table there."""
    report_path = tmp_path / "scale.json"
    proc = subprocess.run(
        [sys.executable, str(ENTRY), "--scale", "3x2", "--scale-rate", "60", "--duration", "5",
         "--scale-warmup", "2", "--scale-idle", "5", "--broker-heap", "384m", "--mm2-heap", "384m",
         "--driver-memory", "768m", "--timeout", "300", "--json", str(report_path),
         "--km-class-data-dir", str(CLASS_DATA_DIR)],
        cwd=REPO, capture_output=True, text=True, timeout=840, check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads(report_path.read_text())
    assert report["mode"] == "scale" and report["seeded"] == 3 * 2 * 3
    assert set(report["mirrors"]) == {"MirrorMaker 2", "kafka-mirror"}
    for label, result in report["mirrors"].items():
        assert result["across_partitions"] == 6 and result["all_across_s"] is not None, label
        assert result["steady_received"] == report["steady_produced"] > 0, label
        assert result["latency_ms"]["p99"] is not None, label
        assert result["broker_connections_peak"] > 0, label
        assert result["idle_cpu_s_per_minute"] >= 0, label
    assert report["no_mirror_latency_ms"]["p99"] is not None
    assert "every partition across" in report["table"]
    assert "p99, no mirror (source probe)" in report["table"]
    for result in report["mirrors"].values():
        assert result["no_mirror_latency_ms"] == report["no_mirror_latency_ms"]
