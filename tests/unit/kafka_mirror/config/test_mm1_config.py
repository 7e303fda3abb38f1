"""MirrorMaker 1 flags and consumer/producer configs."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from kafka_mirror.cli.main import build_parser
from kafka_mirror.config.mm1 import legacy_config
from kafka_mirror.config.model import MetricsSettings
from kafka_mirror.errors import ConfigError
from kafka_mirror.kafka.clients import (
    consumer_properties,
    producer_properties,
    spark_source_options,
)
from kafka_mirror.mm2.policy import IdentityReplicationPolicy


def _files(tmp_path: Path) -> tuple[Path, Path]:
    consumer = tmp_path / "consumer.properties"
    consumer.write_text(
        "bootstrap.servers=src:9092\ngroup.id=mm1-group\nauto.offset.reset=latest\n"
        "security.protocol=PLAINTEXT\nfetch.min.bytes=1\n"
    )
    producer = tmp_path / "producer.properties"
    producer.write_text("bootstrap.servers=dst:9092\nacks=all\nlinger.ms=10\n")
    return consumer, producer


def _parse(args: list[str]) -> argparse.Namespace:
    return build_parser().parse_args(["legacy", *args])


def test_mm1_flags(tmp_path: Path) -> None:
    consumer, producer = _files(tmp_path)
    ns = _parse([
        "--consumer.config", str(consumer), "--producer.config", str(producer),
        "--whitelist", "orders.*,payments", "--blacklist", "orders-tmp",
        "--num.streams", "4", "--abort.on.send.failure", "true",
        "--offset.commit.interval.ms", "1000", "--num.producers", "2",
    ])
    config = legacy_config(ns)
    (flow,) = config.flows
    assert isinstance(flow.policy, IdentityReplicationPolicy)
    assert flow.target_topic("orders") == "orders"
    assert flow.should_mirror("orders.eu") and flow.should_mirror("payments")
    assert not flow.should_mirror("orders-tmp") and not flow.should_mirror("other")
    assert not flow.should_mirror("__consumer_offsets")
    assert flow.lag_group_id == "mm1-group"
    assert flow.lag_commit_interval_ms == 1000
    assert flow.starting_offsets == "latest"
    assert config.spark_conf == {"spark.master": "local[4]"}
    assert any("--num.producers" in n for n in config.notices)
    assert consumer_properties(flow)["fetch.min.bytes"] == "1"
    assert "kafka.group.id" not in spark_source_options(flow)
    assert producer_properties(flow)["linger.ms"] == "10"


def test_mm1_several_consumer_configs(tmp_path: Path) -> None:
    consumer, producer = _files(tmp_path)
    second = tmp_path / "c2.properties"
    second.write_text("bootstrap.servers=src2:9092\n")
    config = legacy_config(_parse([
        "--consumer.config", str(consumer), "--consumer.config", str(second),
        "--producer.config", str(producer), "--whitelist", ".*",
    ]))
    assert [f.source.bootstrap_servers for f in config.flows] == ["src:9092", "src2:9092"]
    assert {f.target.bootstrap_servers for f in config.flows} == {"dst:9092"}


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--num.streams", "many"), ("--abort.on.send.failure", "maybe"),
     ("--offset.commit.interval.ms", "-1"), ("--whitelist", "(["), ("--metrics.port", "0"),
     ("--metrics.port", "70000"), ("--metrics.port", "http"),
     ("--metrics.bind.address", "127.0.0.1")],
)
def test_bad_flags_name_flag_and_value(tmp_path: Path, flag: str, value: str) -> None:
    consumer, producer = _files(tmp_path)
    ns = _parse(["--consumer.config", str(consumer), "--producer.config", str(producer),
                 flag, value])
    with pytest.raises(ConfigError) as info:
        legacy_config(ns)
    assert flag in str(info.value) and value in str(info.value)


def test_missing_bootstrap_names_the_file(tmp_path: Path) -> None:
    consumer, producer = _files(tmp_path)
    producer.write_text("acks=all\n")
    with pytest.raises(ConfigError, match=r"producer\.properties"):
        legacy_config(_parse(["--consumer.config", str(consumer),
                              "--producer.config", str(producer)]))


def test_metrics_flags_mean_what_mm2_properties_say(tmp_path: Path) -> None:
    """--metrics.port and --metrics.bind.address: mirror.metrics.port and
    mirror.metrics.bind.address (off without them)."""
    consumer, producer = _files(tmp_path)
    files = ["--consumer.config", str(consumer), "--producer.config", str(producer)]
    assert legacy_config(_parse(files)).metrics is None
    settings = legacy_config(_parse([*files, "--metrics.port", "9404"])).metrics
    assert settings == MetricsSettings(9404, "0.0.0.0")
    settings = legacy_config(_parse([*files, "--metrics.port", "9405",
                                     "--metrics.bind.address", "127.0.0.1"])).metrics
    assert settings == MetricsSettings(9405, "127.0.0.1")
