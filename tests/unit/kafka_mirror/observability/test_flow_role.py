"""A flow's role and lease in metrics, ``/status`` and ``kafka-mirror status``."""

from __future__ import annotations

from typing import Any

from kafka_mirror.cli.status import render
from kafka_mirror.config.mm2 import mm2_from_text
from kafka_mirror.observability.metrics import MirrorMetrics
from kafka_mirror.observability.server import MirrorStatus

CONFIG = ("clusters = a, b\na.bootstrap.servers = x:1\nb.bootstrap.servers = y:1\n"
          "a->b.enabled = true\n")


def _value(metrics: MirrorMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(
        name, {"flow": "a->b", "source": "a", "target": "b", **labels})


def _standby() -> dict[str, Any]:
    return {"role": "standby", "epoch": 4, "holder": "host-a:17:ab12cd34",
            "this_instance": "host-b:9:ffff0000", "member": "host-b:/var/lib/kafka-mirror",
            "lease_age_seconds": 1.2,
            "members_live": ["host-a:/var/lib/kafka-mirror", "host-b:/var/lib/kafka-mirror"],
            "members_lost": {"host-c:/var/lib/kafka-mirror": 312.0}}


def test_a_standby_shows_its_role_the_lease_and_the_members() -> None:
    flow = mm2_from_text(CONFIG).flows[0]
    metrics = MirrorMetrics()
    metrics.register(flow)
    metrics.set_state(flow, "standby")
    metrics.set_lease(flow, _standby())
    assert _value(metrics, "kafka_mirror_flow_role", role="standby") == 1
    assert _value(metrics, "kafka_mirror_flow_role", role="active") == 0
    assert _value(metrics, "kafka_mirror_flow_lease_epoch") == 4
    assert _value(metrics, "kafka_mirror_flow_lease_age_seconds") == 1.2
    assert _value(metrics, "kafka_mirror_flow_members", state="live") == 2
    assert _value(metrics, "kafka_mirror_flow_members", state="lost") == 1

    report = MirrorStatus(metrics).report()
    entry = report["flows"]["a->b"]
    assert entry["role"] == "standby" and entry["ready"]  # ready to take the flow over
    assert entry["lease"]["holder"] == "host-a:17:ab12cd34"
    text = render(report)
    assert ("  role: standby; lease epoch 4, held by host-a:17:ab12cd34, renewed 1 s ago; "
            "members: host-a:/var/lib/kafka-mirror, host-b:/var/lib/kafka-mirror; LOST (no "
            "clean stop): host-c:/var/lib/kafka-mirror (unseen 312 s)") in text


def test_the_holder_and_a_flow_without_a_lease_are_active() -> None:
    flow = mm2_from_text(CONFIG).flows[0]
    metrics = MirrorMetrics()
    metrics.register(flow)
    metrics.set_lease(flow, {**_standby(), "role": "active", "holder": "host-b:9:ffff0000",
                             "members_lost": {}})
    assert _value(metrics, "kafka_mirror_flow_role", role="active") == 1
    assert _value(metrics, "kafka_mirror_flow_members", state="lost") == 0
    assert "held by this instance" in render(MirrorStatus(metrics).report())

    off = MirrorMetrics()
    off.register(flow)
    off.set_lease(flow, None)
    assert _value(off, "kafka_mirror_flow_role", role="active") == 1
    assert _value(off, "kafka_mirror_flow_lease_epoch") is None  # no lease, no lease series
    assert "role: active (no lease: mirror.lease.ms = 0" in render(MirrorStatus(off).report())
