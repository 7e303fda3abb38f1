"""The mirror's Prometheus metrics (:mod:`kafka_mirror.observability.metrics`) fed as the
engine feeds them: latency buckets, per-topic latency from the JVM registry's text, real-time
drains, and the metrics settings. (Scraped by a real Prometheus during a real run:
tests/engine/test_metrics.py.)"""

from __future__ import annotations

import pytest
from prometheus_client import generate_latest

from kafka_mirror.config.mm2 import mm2_from_text
from kafka_mirror.engine.observation import AGE_GRID_MS
from kafka_mirror.engine.realtime import RealTimeProgress, parse_ranges
from kafka_mirror.errors import ConfigError
from kafka_mirror.observability.latency import LATENCY_BUCKETS
from kafka_mirror.observability.metrics import MirrorMetrics


def test_latency_buckets_count_a_record_only_where_it_surely_belongs() -> None:
    """Ages at the batch's start are counted on a grid; the batch ran 30 ms, so a record
    surely within 50 ms at the commit is one at most 20 ms old at the start."""
    flow = mm2_from_text(
        "clusters = a, b\na.bootstrap.servers = x:1\nb.bootstrap.servers = y:1\n"
        "a->b.enabled = true\n").flows[0]
    metrics = MirrorMetrics()
    ages = [0, 3, 15, 40, 400]  # ms at the batch's start
    row: dict[str, float] = {"batch_ms": 1_000_000, "ts_min_ms": 1_000_000 - 400,
                             "ts_avg_ms": 1_000_000 - sum(ages) / len(ages)}
    for grid in AGE_GRID_MS:
        row[f"age_le_{grid}"] = sum(1 for a in ages if a <= grid)
    metrics.batch(flow, records=5, size=50, duration=0.03, lag={("t", 0): 0}, row=row,
                  committed=1_000.030, rate=0.0, ended=True)
    lines = generate_latest(metrics.registry).decode().splitlines()
    buckets = {float(line.split('le="')[1].split('"')[0]): float(line.rsplit(" ", 1)[1])
               for line in lines if "replication_latency_seconds_bucket" in line}
    # at the commit the ages are 30, 33, 45, 70 and 430 ms
    assert buckets[0.025] == 0
    assert buckets[0.05] == 3  # 30, 33, 45 (those at most 20 ms old at the start)
    assert buckets[0.1] == 4
    # 430 ms is within 500, but the grid (200 ms, then 500 ms at the start) cannot tell
    assert buckets[0.5] == 4
    assert buckets[1.0] == 5 and buckets[float("inf")] == 5
    assert len(buckets) == len(LATENCY_BUCKETS) + 1
    assert metrics.latency.series[("a->b", "a", "b")].total == pytest.approx(
        sum(a + 30 for a in ages) / 1000.0)


def test_topic_latency_comes_from_the_jvm_registry_per_flow_and_target_topic() -> None:
    """What ``io.kafkamirror.LatencyRegistry.render()`` gives (per bucket, count, sum in ms)
    becomes a histogram per flow and target topic; topics the flow no longer mirrors and
    other flows' lines are left out; a JVM that does not answer gives no series."""
    flow = mm2_from_text(
        "clusters = a, b\na.bootstrap.servers = x:1\nb.bootstrap.servers = y:1\n"
        "a->b.enabled = true\n").flows[0]
    metrics = MirrorMetrics()
    metrics.register(flow)
    metrics.set_assignment(flow, {"t": 2, "u": 1})
    counts = [3, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]  # <=5 ms, <=10 ms, above 300 s
    line = ",".join(str(n) for n in [*counts, 6, 400_020])
    text = f"a->b\ta.t\t{line}\na->b\ta.gone\t{line}\nc->b\tc.t\t{line}\n"
    metrics.read_topic_latency(lambda: text)
    name = "kafka_mirror_topic_replication_latency_seconds"
    samples = {
        (sample.name, sample.labels.get("le")): sample.value
        for family in metrics.registry.collect() if family.name == name
        for sample in family.samples
        if sample.labels.get("topic") == "a.t" and sample.labels.get("flow") == "a->b"
        and sample.labels.get("source") == "a" and sample.labels.get("target") == "b"
    }
    assert samples[(f"{name}_bucket", "0.005")] == 3
    assert samples[(f"{name}_bucket", "0.01")] == 5
    assert samples[(f"{name}_bucket", "300.0")] == 5
    assert samples[(f"{name}_bucket", "+Inf")] == 6
    assert samples[(f"{name}_count", None)] == 6
    assert samples[(f"{name}_sum", None)] == pytest.approx(400.02)
    out = generate_latest(metrics.registry).decode()
    assert "a.gone" not in out and "c.t" not in out

    def broken() -> str:
        raise RuntimeError("the JVM is gone")

    metrics.read_topic_latency(broken)
    assert f"{name}_count" not in generate_latest(metrics.registry).decode()


def test_a_realtime_flow_reports_after_every_drain_and_its_latency_is_its_topics() -> None:
    """Real-time mode: records, lag, readiness and the last-batch time come from the drains
    (batch_id -1), which are not batches; Spark's batch ends count as batches. The flow's
    latency histogram is the sum of its topics' (measured when the target acknowledged)."""
    flow = mm2_from_text(
        "clusters = a, b\na.bootstrap.servers = x:1\nb.bootstrap.servers = y:1\n"
        "a->b.enabled = true\nmirror.mode = realtime\n").flows[0]
    metrics = MirrorMetrics()
    metrics.register(flow)
    metrics.set_assignment(flow, {"t": 2})
    progress = RealTimeProgress(flow)
    progress.add(parse_ranges(flow, {"t": 2}, "a.t\t0\t0\t10\t0\t10\t1\t10\t500\t1500\n"))
    metrics.on_batch(progress.report({("t", 0): 10, ("t", 1): 0}, {("t", 0): 10, ("t", 1): 3}))
    health = metrics.snapshot()["a->b"]
    assert (health.records, health.bytes, health.lag) == (10, 500, 3)
    assert health.last_batch is not None
    metrics.on_batch(progress.report({("t", 0): 10, ("t", 1): 3}, {("t", 0): 10, ("t", 1): 3},
                                     batch_id=0, duration=300.0))
    assert metrics.snapshot()["a->b"].records == 10 and metrics.snapshot()["a->b"].lag == 0
    counts = [3, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]
    line = ",".join(str(n) for n in [*counts, 6, 400_020])
    metrics.read_topic_latency(lambda: f"a->b\ta.t\t{line}\na->b\ta.u\t{line}\n")
    metrics.set_assignment(flow, {"t": 2, "u": 1})
    labels = {"flow": "a->b", "source": "a", "target": "b"}

    def value(name: str, **extra: str) -> float | None:
        return metrics.registry.get_sample_value(name, labels | extra)

    assert value("kafka_mirror_records_total") == 10
    assert value("kafka_mirror_batches_total") == 1
    assert value("kafka_mirror_replication_latency_max_seconds") == 1.5
    flow_latency = "kafka_mirror_replication_latency_seconds"
    assert value(f"{flow_latency}_bucket", le="0.01") == 10
    assert value(f"{flow_latency}_count") == 12
    assert value(f"{flow_latency}_sum") == pytest.approx(800.04)


def test_metrics_settings_are_checked() -> None:
    base = ("clusters = a, b\na.bootstrap.servers = x:1\nb.bootstrap.servers = y:1\n"
            "a->b.enabled = true\n")
    assert mm2_from_text(base).metrics is None
    settings = mm2_from_text(base + "mirror.metrics.port = 9404\n").metrics
    assert settings is not None and (settings.port, settings.bind_address) == (9404, "0.0.0.0")
    with pytest.raises(ConfigError) as info:
        mm2_from_text(base + "mirror.metrics.port = 99999\n")
    assert "mirror.metrics.port" in str(info.value) and "99999" in str(info.value)
