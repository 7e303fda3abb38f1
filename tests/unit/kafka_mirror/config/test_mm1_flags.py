"""Every option of Kafka 3.x's ``kafka.tools.MirrorMaker`` (its ``MirrorMakerOptions`` and
``CommandDefaultOptions``), as ``kafka-mirror legacy`` takes it: honoured, accepted with a notice
(deprecated or meaningless here), or refused as not supported because it names Java code that
would change what is mirrored."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from kafka_mirror.cli.main import build_parser
from kafka_mirror.config.mm1 import legacy_config
from kafka_mirror.errors import ConfigError

# MirrorMakerOptions of Kafka 3.9 (core/src/main/scala/kafka/tools/MirrorMaker.scala), with
# their argument, and what kafka-mirror makes of them
HONOURED = {
    "--consumer.config": None,  # given by every case
    "--producer.config": None,
    "--whitelist": "orders.*",
    "--include": "orders.*",
    "--num.streams": "2",
    "--offset.commit.interval.ms": "1000",
    "--abort.on.send.failure": "true",
}
NOTICED = {"--new.consumer": None}
REFUSED = {
    "--consumer.rebalance.listener": "com.example.Listener",
    "--rebalance.listener.args": "x",
    "--message.handler": "com.example.Handler",
    "--message.handler.args": "x",
}
MIRRORMAKER_OPTIONS = {*HONOURED, *NOTICED, *REFUSED, "--help", "--version"}


def _args(tmp_path: Path, *extra: str) -> argparse.Namespace:
    consumer = tmp_path / "consumer.properties"
    consumer.write_text("bootstrap.servers=src:9092\ngroup.id=mm1-group\n")
    producer = tmp_path / "producer.properties"
    producer.write_text("bootstrap.servers=dst:9092\n")
    return build_parser().parse_args(["legacy", "--consumer.config", str(consumer),
                                      "--producer.config", str(producer), *extra])


def test_the_table_covers_every_mirrormaker_option() -> None:
    legacy = next(a for a in build_parser()._subparsers._group_actions  # type: ignore[union-attr]
                  if isinstance(a, argparse._SubParsersAction)).choices["legacy"]
    accepted = {flag for action in legacy._actions for flag in action.option_strings}
    assert accepted >= MIRRORMAKER_OPTIONS


@pytest.mark.parametrize("flag", [f for f, v in HONOURED.items() if v is not None])
def test_honoured_flag_mirrors_without_a_notice_about_it(tmp_path: Path, flag: str) -> None:
    config = legacy_config(_args(tmp_path, flag, HONOURED[flag] or ""))
    assert config.flows
    assert not [n for n in config.notices if flag in n]


def test_new_consumer_is_a_deprecated_no_op(tmp_path: Path) -> None:
    config = legacy_config(_args(tmp_path, "--new.consumer", "--abort.on.send.failure", "true"))
    assert config.flows
    assert any("--new.consumer is deprecated" in n for n in config.notices)


def test_a_public_mm1_command_line_is_accepted(tmp_path: Path) -> None:
    """The command line of a public MirrorMaker 1 deployment (whitelist, streams, abort on send
    failure, the deprecated --new.consumer)."""
    config = legacy_config(_args(tmp_path, "--whitelist", "orders.*|payments", "--num.streams",
                                 "3", "--abort.on.send.failure", "true", "--new.consumer"))
    (flow,) = config.flows
    assert flow.should_mirror("payments") and not flow.should_mirror("other")


@pytest.mark.parametrize("flag", sorted(REFUSED))
def test_flag_naming_java_code_is_refused_as_not_supported(tmp_path: Path, flag: str) -> None:
    with pytest.raises(ConfigError) as refused:
        legacy_config(_args(tmp_path, flag, REFUSED[flag]))
    assert f"'{flag}' not supported: " in str(refused.value)
    assert refused.value.key == flag and refused.value.value == REFUSED[flag]


def test_version_prints_and_exits(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as done:
        build_parser().parse_args(["legacy", "--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.startswith("kafka-mirror ")
