"""The replication latency histograms: per flow from what each batch observed in the JVM
(:mod:`kafka_mirror.engine.observation`), and per target topic from what the producer
interceptor recorded when the target acknowledged each record."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.core import HistogramMetricFamily
from prometheus_client.registry import Collector

from kafka_mirror.config.model import FlowSpec
from kafka_mirror.engine.observation import AGE_GRID_MS

# replication latency buckets, seconds
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
                   300.0)
FLOW_LABELS = ("flow", "source", "target")


@dataclass
class _Latency:
    """One flow's replication latency so far: cumulative bucket counts, count and sum."""

    buckets: list[float] = field(default_factory=lambda: [0.0] * len(LATENCY_BUCKETS))
    count: float = 0.0
    total: float = 0.0


# per flow (its labels): cumulative buckets ("+Inf" last) and the sum, seconds
FlowHistograms = dict[tuple[str, str, str], tuple[list[tuple[str, float]], float]]


class LatencyCollector(Collector):
    """``kafka_mirror_replication_latency_seconds``: a histogram assembled from bucket counts
    (prometheus_client's Histogram takes one value at a time). Real-time flows have no batch
    to measure at: theirs is the sum of their topics' series (``acknowledged``)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.series: dict[tuple[str, str, str], _Latency] = {}
        self.acknowledged: Callable[[], FlowHistograms] = dict

    def add(self, labels: tuple[str, str, str], row: Mapping[str, Any], records: int,
            committed_ms: float) -> None:
        if records <= 0 or row.get("batch_ms") is None or row.get("ts_avg_ms") is None:
            return
        ran_ms = max(0.0, committed_ms - float(row["batch_ms"]))
        below = [(age, int(row.get(f"age_le_{age}") or 0)) for age in AGE_GRID_MS]
        with self.lock:
            series = self.series.setdefault(labels, _Latency())
            for i, bound in enumerate(LATENCY_BUCKETS):
                limit = bound * 1000.0 - ran_ms
                sure = max((n for age, n in below if age <= limit), default=0)
                series.buckets[i] += sure
            series.count += records
            series.total += records * max(0.0, committed_ms - float(row["ts_avg_ms"])) / 1000.0

    def collect(self) -> Iterator[HistogramMetricFamily]:
        family = HistogramMetricFamily(
            "kafka_mirror_replication_latency_seconds",
            "Age of mirrored records when their batch was on the target (source record "
            "timestamp to batch commit; real-time mode: to the target's acknowledgement)",
            labels=FLOW_LABELS,
        )
        histograms: FlowHistograms = {}
        with self.lock:
            for labels, series in self.series.items():
                buckets = [(repr(b), n) for b, n in zip(LATENCY_BUCKETS, series.buckets,
                                                        strict=True)]
                buckets.append(("+Inf", series.count))
                histograms[labels] = (buckets, series.total)
        histograms |= self.acknowledged()
        for labels, (buckets, total) in sorted(histograms.items()):
            family.add_metric(list(labels), buckets, total)
        yield family


class TopicLatencyCollector(Collector):
    """``kafka_mirror_topic_replication_latency_seconds``: per flow and target topic, read when
    scraped from what the producer interceptor recorded in the JVM when the target acknowledged
    each record (``io.kafkamirror.LatencyRegistry``; see ``MirrorMetrics.read_topic_latency``).
    Nothing until a reader is attached, and nothing when the JVM does not answer."""

    def __init__(self, flow_targets: Callable[[], tuple[dict[str, FlowSpec], dict[str, set[str]]]]
                 ) -> None:
        self.flow_targets = flow_targets
        self.read: Callable[[], str] | None = None

    def collect(self) -> Iterator[HistogramMetricFamily]:
        family = HistogramMetricFamily(
            "kafka_mirror_topic_replication_latency_seconds",
            "Age of each mirrored record when the target acknowledged it (source record "
            "timestamp to acknowledgement), per target topic",
            labels=(*FLOW_LABELS, "topic"),
        )
        for labels, topic, buckets, total in self.series():
            family.add_metric([*labels, topic], buckets, total)
        yield family

    def series(self) -> list[tuple[tuple[str, str, str], str, list[tuple[str, float]], float]]:
        read = self.read
        if read is None:
            return []
        try:
            text = read()
        except Exception:  # the session stopped, or the JVM is busy going away
            return []
        flows, targets = self.flow_targets()
        out = []
        for line in text.splitlines():
            name, _, rest = line.partition("\t")
            topic, _, numbers = rest.partition("\t")
            flow = flows.get(name)
            wanted = targets.get(name)
            if flow is None or (wanted is not None and topic not in wanted):
                continue
            try:
                values = [int(v) for v in numbers.split(",")]
            except ValueError:
                continue
            if len(values) != len(LATENCY_BUCKETS) + 3:
                continue
            # +Inf (the count) from the buckets read, never below the last bound's
            cumulative, buckets = 0, []
            for bound, n in zip(LATENCY_BUCKETS, values, strict=False):
                cumulative += n
                buckets.append((repr(bound), float(cumulative)))
            buckets.append(("+Inf", float(cumulative + values[len(LATENCY_BUCKETS)])))
            labels = (flow.name, flow.source.alias, flow.target.alias)
            out.append((labels, topic, buckets, values[-1] / 1000.0))
        return out
