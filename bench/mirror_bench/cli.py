"""The command line: throughput mode (default), ``--latency``, ``--scale``, ``--failover`` and
``--smoke``.

Usage::

    .venv/bin/python bench/mirror_benchmark.py [--records N] [--record-size 1024] \\
        [--partitions 8] [--rounds 1] [--json FILE] [--keep]
    .venv/bin/python bench/mirror_benchmark.py --latency [--rates 1000,5000,20000] \\
        [--duration 60] [--json FILE]
    .venv/bin/python bench/mirror_benchmark.py --scale 200x10 [--scale-rate 2000] \\
        [--duration 60] [--scale-idle 60] [--timeout 900] [--json FILE]
    .venv/bin/python bench/mirror_benchmark.py --smoke --json FILE
    .venv/bin/python bench/mirror_benchmark.py --failover [--failover-rate 5000] \\
        [--partitions 4] [--duration 60] [--mm2-setting KEY=VALUE] [--json FILE]

kafka-mirror knobs: ``--max-records-per-batch`` (``mirror.max.records.per.batch``, i.e. Spark's
``maxOffsetsPerTrigger``), ``--spark-conf KEY=VALUE``, ``--km-producer KEY=VALUE``
(``destination.producer.*``), ``--km-consumer KEY=VALUE`` (``source.consumer.*``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import FrameType

from . import class_data
from .common import MirrorFailed
from .failover import add_failover_arguments, failover_defaults, run_failover
from .latency import run_latency
from .scale import add_scale_arguments, run_scale, scale_defaults
from .throughput import command_line, run_throughput

# What --smoke sets (unless given explicitly): a run of well under 2 minutes on 2 cores.
SMOKE: dict[str, object] = {
    "rates": [200.0],
    "duration": 5.0,
    "warmup": 1.0,
    "record_size": 256,
    "change_rate": 200.0,
    "change_lead": 1.0,
    "change_tail": 1.0,
    "refresh_seconds": 2,
    "broker_heap": "512m",
    "mm2_heap": "512m",
    "driver_memory": "768m",
    # a probe that falls behind on a loaded machine gets time to read every record
    "drain_timeout": 240.0,
    "timeout": 360.0,
}


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="Mirror benchmark: stock MirrorMaker 2 against kafka-mirror "
        "(throughput, or --latency)."
    )
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--record-size", type=int, default=1024, help="value bytes")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument(
        "--compression",
        default="lz4",
        choices=("lz4", "none", "zstd"),
        help="compression of the benchmark's own producer (default lz4)",
    )
    parser.add_argument(
        "--producers",
        type=int,
        default=os.cpu_count() or 2,
        help="producer processes for the raw produce (default: CPU count)",
    )
    parser.add_argument("--broker-heap", default="1g")
    parser.add_argument("--mm2-heap", default="1g")
    parser.add_argument("--driver-memory", default="1g", help="kafka-mirror spark.driver.memory")
    parser.add_argument(
        "--max-records-per-batch",
        type=int,
        default=None,
        help="kafka-mirror mirror.max.records.per.batch (default: its own)",
    )
    parser.add_argument(
        "--spark-conf",
        type=_key_value,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra Spark setting for kafka-mirror",
    )
    parser.add_argument(
        "--km-producer",
        type=_key_value,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra destination.producer.* setting for kafka-mirror only",
    )
    parser.add_argument(
        "--km-consumer",
        type=_key_value,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra source.consumer.* setting for kafka-mirror only",
    )
    parser.add_argument("--only", choices=("both", "mm2", "kafka-mirror"), default="both")
    parser.add_argument(
        "--km-metrics",
        action="store_true",
        help="also run kafka-mirror with its metrics endpoint on (scraped every 5 s) and "
        "report the ratio to metrics off",
    )
    parser.add_argument(
        "--km-at-least-once",
        action="store_true",
        help="also run kafka-mirror with mirror.exactly.once.target = false and report the "
        "ratio to the default (exactly once on the target)",
    )
    parser.add_argument(
        "--km-class-data-dir",
        type=Path,
        default=class_data.DIRECTORY,
        metavar="DIR",
        help="kafka-mirror's mirror.class.data.dir: the Spark driver's class data archive, built "
        "there before anything is measured unless one that matches is there (default %(default)s)",
    )
    parser.add_argument(
        "--km-cold-start",
        action="store_true",
        help="also run kafka-mirror without the class data archive (mirror.class.data.sharing = "
        "false: a first start) and report the ratio to the default",
    )
    parser.add_argument(
        "--km-standalone",
        type=int,
        default=0,
        metavar="WORKERS",
        help="also run kafka-mirror on a throw-away Spark standalone cluster of WORKERS workers "
        "(1 core, 1g each) on this machine; their CPU and memory count as kafka-mirror's",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="run each mirror this many times (fresh destination each time, "
        "order alternating); the table shows medians",
    )
    parser.add_argument(
        "--skip-ceiling",
        action="store_true",
        help="do not measure the raw produce rate into the destination",
    )
    parser.add_argument(
        "--timeout", type=float, default=1800.0, help="per-mirror limit in seconds (default 1800)"
    )
    parser.add_argument(
        "--workdir",
        type=Path,
        default=None,
        help="work directory (default: a new temporary directory)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument("--json", type=Path, default=None, metavar="FILE")
    add_latency_arguments(parser)
    add_scale_arguments(parser)
    add_failover_arguments(parser)
    return parser


def _rates(text: str) -> list[float]:
    try:
        rates = [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected rates like 1000,5000, got {text!r}") from None
    if not rates or min(rates) <= 0:
        raise argparse.ArgumentTypeError("rates must be positive")
    return rates


def add_latency_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "latency mode",
        "all mirrors at once, fixed-rate produce, per-record replication latency; then a topic "
        "and partitions added under the running mirrors",
    )
    group.add_argument("--latency", action="store_true", help="run the latency mode")
    group.add_argument(
        "--smoke",
        action="store_true",
        help="a tiny latency-mode run (1 rate of 200/s for 5 s, small heaps) that checks that the "
        "benchmark works, not how fast anything is",
    )
    group.add_argument(
        "--rates",
        type=_rates,
        default=[1000.0, 5000.0, 20000.0],
        metavar="R1,R2,...",
        help="records/s of each phase (default 1000,5000,20000)",
    )
    group.add_argument("--duration", type=float, default=60.0, help="seconds per rate (60)")
    group.add_argument(
        "--warmup",
        type=float,
        default=5.0,
        help="seconds of records after every mirror delivered its first (default 5)",
    )
    group.add_argument(
        "--drain-timeout",
        type=float,
        default=120.0,
        help="seconds to wait after a phase for every record to arrive (default 120)",
    )
    group.add_argument(
        "--tuning",
        choices=("latency", "throughput"),
        default="latency",
        help="client settings given to both mirrors (default latency: fetch.min.bytes=1, "
        "linger.ms=5; throughput: the throughput mode's)",
    )
    group.add_argument(
        "--refresh-seconds",
        type=int,
        default=5,
        help="refresh.topics.interval.seconds of both mirrors (default 5)",
    )
    group.add_argument("--no-topic-change", action="store_true", help="skip the topic changes")
    group.add_argument(
        "--change-rate",
        type=float,
        default=5000.0,
        help="records/s into the running topic during the topic changes (default 5000)",
    )
    group.add_argument(
        "--change-lead", type=float, default=5.0, help="seconds before each change (default 5)"
    )
    group.add_argument(
        "--change-tail",
        type=float,
        default=5.0,
        help="seconds after the change reached every mirror (default 5)",
    )
    group.add_argument(
        "--add-partitions",
        type=int,
        default=2,
        help="partitions added to the running topic (default 2)",
    )
    group.add_argument(
        "--km-realtime",
        action="store_true",
        help="also run a second kafka-mirror, in real-time mode (with --latency or --scale: at "
        "the same time, into a destination of its own; otherwise: one more mirror run of each "
        "round); refused when kafka-mirror does not know a --km-realtime-setting key",
    )
    group.add_argument(
        "--km-micro-batch",
        action="store_true",
        help="as --km-realtime, with kafka-mirror in micro-batch mode (its default mode is "
        "real-time since stop 68: the kafka-mirror rows are real-time)",
    )
    group.add_argument(
        "--km-realtime-setting",
        type=_key_value,
        action="append",
        default=None,
        metavar="KEY=VALUE",
        help="the second kafka-mirror's settings (default mirror.mode=realtime, with "
        "--km-micro-batch mirror.mode=micro-batch)",
    )


def _apply_smoke(ns: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    for key, value in SMOKE.items():
        if getattr(ns, key) == parser.get_default(key):
            setattr(ns, key, value)
    ns.latency = True


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    def on_term(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    ns = parser.parse_args(argv)
    if ns.smoke:
        _apply_smoke(ns, parser)
    if ns.km_realtime_setting is not None and not (
            ns.km_realtime or ns.km_micro_batch or ns.failover):
        # stops 80 and 81 measured "two groups" that were one: the setting went nowhere
        parser.error("--km-realtime-setting sets the second kafka-mirror's settings: it needs "
                     "--km-realtime or --km-micro-batch (or --failover); alone it changes nothing")
    ns.km_second_mode = "micro-batch" if ns.km_micro_batch else "real-time"
    if ns.km_micro_batch:
        ns.km_realtime = True  # the second kafka-mirror, in the other mode
    if ns.km_realtime_setting is None:
        ns.km_realtime_setting = [
            ("mirror.mode", "micro-batch" if ns.km_micro_batch else "realtime")]
    if min(ns.records, ns.partitions, ns.rounds, ns.producers) < 1 or ns.record_size < 32:
        print(
            "need --records, --partitions, --rounds, --producers >= 1 and --record-size >= 32",
            file=sys.stderr,
        )
        return 2
    with _terminate_as_interrupt():
        try:
            if ns.failover:
                failover_defaults(ns, parser)
                report = run_failover(ns, command_line())
            elif ns.scale is not None:
                scale_defaults(ns)
                report = run_scale(ns, command_line())
            elif ns.latency:
                report = run_latency(ns, command_line())
            else:
                report = run_throughput(ns)
        except KeyboardInterrupt:
            print("interrupted; stopped everything", file=sys.stderr)
            return 130
        except MirrorFailed as exc:
            print(f"mirror failed: {exc}", file=sys.stderr)
            return 1
    if ns.json:
        ns.json.write_text(json.dumps(report, indent=2, default=str) + "\n", encoding="utf-8")
        print(f"wrote {ns.json}")
    return 0
