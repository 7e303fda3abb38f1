"""MirrorMaker 1 flags (``kafka.tools.MirrorMaker``, removed in Kafka 4.0) to MirrorConfig.

Topic names are kept (as MM1 did) and, unlike MM1, every record keeps its partition.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import kafka_mirror
from kafka_mirror.config import keys
from kafka_mirror.config.model import (
    ClusterSpec,
    FlowSpec,
    MetricsSettings,
    MirrorConfig,
    SyncSettings,
)
from kafka_mirror.config.properties import load_properties
from kafka_mirror.config.providers import resolve_providers
from kafka_mirror.config.values import Values, check_regex
from kafka_mirror.errors import ConfigError
from kafka_mirror.mm2.policy import IdentityReplicationPolicy
from kafka_mirror.mm2.topic_filter import LEGACY_TOPICS_EXCLUDE, TopicFilter

log = logging.getLogger(__name__)
TARGET_ALIAS = "target"


LEGACY_SYNCS = SyncSettings(
    emit_offset_syncs=False, emit_checkpoints=False, heartbeats_replication=False,
    sync_topic_acls=False,
)


IGNORED_FLAGS = ("--num.producers", "--queue.size")
_CUSTOM_HANDLER = (
    "a MirrorMakerMessageHandler is Java code run on every record; kafka-mirror copies every "
    "record unchanged (key, value, headers, timestamp) and runs no handler, so it cannot give "
    "what the handler would have made of them"
)
_CUSTOM_LISTENER = (
    "a ConsumerRebalanceListener is Java code run when a consumer group rebalances; the Spark "
    "source kafka-mirror reads with assigns partitions itself and has no group rebalances"
)
# Kafka 3.x's kafka.tools.MirrorMaker options that name custom Java code: refused, since
# ignoring them would change what is mirrored
REFUSED_FLAGS = {
    "--message.handler": _CUSTOM_HANDLER,
    "--message.handler.args": _CUSTOM_HANDLER,
    "--consumer.rebalance.listener": _CUSTOM_LISTENER,
    "--rebalance.listener": _CUSTOM_LISTENER,
    "--rebalance.listener.args": _CUSTOM_LISTENER,
}


class _PrintVersion(argparse.Action):
    """``--version``: argparse's own, with the version looked up only when asked for."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS,
                 default: str = argparse.SUPPRESS, help: str | None = None) -> None:
        super().__init__(option_strings, dest=dest, default=default, nargs=0,
                         help=help or "show the program's version number and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        print(f"kafka-mirror {kafka_mirror.__version__}")  # to stdout, as argparse's does
        parser.exit()


def add_legacy_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--consumer.config", dest="consumer_configs", action="append", required=True,
        type=Path, metavar="FILE", help="source consumer properties (repeat for several sources)",
    )
    parser.add_argument("--producer.config", dest="producer_config", required=True, type=Path,
                        metavar="FILE", help="target producer properties")
    parser.add_argument("--whitelist", "--include", dest="include", metavar="REGEX",
                        help="topics to mirror (Java regex; a comma means '|')")
    parser.add_argument("--blacklist", "--exclude", dest="exclude", metavar="REGEX",
                        help="topics not to mirror")
    parser.add_argument("--num.streams", dest="num_streams", default="1", metavar="N")
    parser.add_argument("--abort.on.send.failure", dest="abort_on_send_failure",
                        default="true", metavar="BOOL")
    parser.add_argument("--offset.commit.interval.ms", dest="offset_commit_interval_ms",
                        default="60000", metavar="MS")
    # not MM1's: kafka-mirror's metrics endpoint (mirror.metrics.port and
    # mirror.metrics.bind.address in mm2.properties)
    parser.add_argument("--metrics.port", dest="metrics_port", default=None, metavar="N",
                        help="serve /metrics, /health/live, /health/ready and /status on this "
                        "port (default: off)")
    parser.add_argument("--metrics.bind.address", dest="metrics_bind_address", default=None,
                        metavar="ADDR", help="the address the metrics endpoint listens on "
                        "(default 0.0.0.0)")
    # not MM1's: mirror.exactly.once.target in mm2.properties
    parser.add_argument("--exactly.once.target", dest="exactly_once_target", default="true",
                        metavar="BOOL", help="at every (re)start, skip the records a batch cut "
                        "short already wrote to the target (default true)")
    # MirrorMaker 1's --help and --version (Kafka's CommandDefaultOptions)
    parser.add_argument("--version", action=_PrintVersion)
    # Kafka 3.x's kafka.tools.MirrorMaker: deprecated, a no-op there too
    parser.add_argument("--new.consumer", dest="new_consumer", action="store_true",
                        help=argparse.SUPPRESS)
    # flags of MirrorMaker 1 before 1.0 (its old consumer and producer pool): no meaning here
    for flag in IGNORED_FLAGS:
        parser.add_argument(flag, dest="ignored_" + flag.strip("-").replace(".", "_"),
                            metavar="VALUE", help=argparse.SUPPRESS)
    for flag in REFUSED_FLAGS:
        parser.add_argument(flag, dest="refused_" + flag.strip("-").replace(".", "_"),
                            metavar="VALUE", help=argparse.SUPPRESS)


def _flag_int(name: str, raw: str, minimum: int) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError("expected a whole number", key=name, value=raw) from None
    if value < minimum:
        raise ConfigError(f"must be at least {minimum}", key=name, value=raw)
    return value


def _flag_bool(name: str, raw: str) -> bool:
    if raw.lower() not in ("true", "false"):
        raise ConfigError("expected true or false", key=name, value=raw)
    return raw.lower() == "true"


def _metrics(ns: argparse.Namespace) -> MetricsSettings | None:
    port = getattr(ns, "metrics_port", None)
    address = getattr(ns, "metrics_bind_address", None)
    if port is None:
        if address is not None:
            raise ConfigError("--metrics.bind.address needs --metrics.port",
                              key="--metrics.bind.address", value=address)
        return None
    number = _flag_int("--metrics.port", str(port), 1)
    if number > 65535:
        raise ConfigError("expected a TCP port, 1 to 65535", key="--metrics.port", value=port)
    return MetricsSettings(number, address.strip() if address else "0.0.0.0")


def _flag_notices(ns: argparse.Namespace) -> list[str]:
    """Notices for MirrorMaker 1 flags without meaning here; a flag naming custom Java code is
    an error (``'<flag>' not supported: <why>``)."""
    notices = []
    if getattr(ns, "new_consumer", False):
        notices.append("--new.consumer is deprecated in MirrorMaker 1 and has no effect (the new "
                       "consumer is the only one)")
    for name, value in sorted(vars(ns).items()):
        if value is None:
            continue
        if name.startswith("refused_"):
            flag = "--" + name[len("refused_") :].replace("_", ".")
            raise ConfigError(f"'{flag}' not supported: {REFUSED_FLAGS[flag]}", key=flag,
                              value=value)
        if name.startswith("ignored_"):
            flag = "--" + name[len("ignored_") :].replace("_", ".")
            notices.append(f"{flag} has no meaning on Spark and is ignored")
    return notices


def _mm1_regex(name: str, raw: str) -> tuple[str, ...]:
    """MM1 regexes: a comma separates alternatives; surrounding quotes are dropped."""
    items = tuple(p.strip() for p in raw.strip().strip("'\"").split(",") if p.strip())
    for item in items:
        check_regex(item, lambda key, message: ConfigError(message, key=name, value=raw), name)
    return items


def _cluster_from_file(alias: str, path: Path, role: str) -> ClusterSpec:
    props, _ = resolve_providers(load_properties(path), str(path))
    client = {k: v for k, v in props.items() if keys.is_client_key(k)}
    rest = {k: v for k, v in props.items() if not keys.is_client_key(k)}
    if not client.get("bootstrap.servers", "").strip():
        raise ConfigError("no bootstrap servers", source=str(path), key="bootstrap.servers")
    if role == "consumer":
        return ClusterSpec(alias=alias, client=client, consumer=rest)
    return ClusterSpec(alias=alias, client=client, producer=rest)


def legacy_config(ns: argparse.Namespace) -> MirrorConfig:
    num_streams = _flag_int("--num.streams", str(ns.num_streams), 1)
    metrics = _metrics(ns)
    abort = _flag_bool("--abort.on.send.failure", str(ns.abort_on_send_failure))
    commit_ms = _flag_int("--offset.commit.interval.ms", str(ns.offset_commit_interval_ms), 0)
    exactly_once = _flag_bool("--exactly.once.target",
                              str(getattr(ns, "exactly_once_target", "true")))
    notices = []
    if not abort:
        notices.append(
            "--abort.on.send.failure=false: kafka-mirror never drops a record it could not "
            "send; it retries and stops on a fatal error instead"
        )
    notices.extend(_flag_notices(ns))
    include = _mm1_regex("--whitelist", ns.include) if ns.include else (".*",)
    exclude = LEGACY_TOPICS_EXCLUDE + (_mm1_regex("--blacklist", ns.exclude) if ns.exclude else ())
    target = _cluster_from_file(TARGET_ALIAS, ns.producer_config, "producer")
    clusters = {TARGET_ALIAS: target}
    flows = []
    for index, path in enumerate(ns.consumer_configs):
        alias = "source" if index == 0 else f"source{index + 1}"
        source = _cluster_from_file(alias, path, "consumer")
        clusters[alias] = source
        group = source.consumer.get("group.id", "")
        values = Values(source.consumer, str(path))
        flows.append(
            FlowSpec(
                source=source,
                target=target,
                topic_filter=TopicFilter(include=include, exclude=exclude),
                policy=IdentityReplicationPolicy(),
                sync_topic_configs=False,
                lag_group_id=group or f"kafka-mirror.{alias}_to_{TARGET_ALIAS}",
                lag_commit_interval_ms=commit_ms,
                starting_offsets=values.choice(
                    "auto.offset.reset", "earliest", ("earliest", "latest")
                ),
                # MM1 kept its position in this group: a first run starts where MM1 stopped
                takeover_group=group,
                takeover_mm2=False,
                # MM1 wrote no offset syncs, checkpoints, heartbeats or ACLs
                syncs=LEGACY_SYNCS,
                exactly_once_target=exactly_once,
            )
        )
    return MirrorConfig(
        origin="MirrorMaker 1 flags",
        clusters=clusters,
        flows=tuple(flows),
        spark_conf={"spark.master": f"local[{num_streams}]"} if num_streams > 1 else {},
        notices=tuple(notices),
        metrics=metrics,
    )
