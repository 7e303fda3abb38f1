"""``kafka-mirror``: run a mirror from mm2.properties or MirrorMaker 1 flags, verify it."""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from kafka_mirror.config.mm1 import add_legacy_arguments, legacy_config
from kafka_mirror.config.mm2 import load_mm2
from kafka_mirror.config.model import FlowSpec, MirrorConfig
from kafka_mirror.config.modes import fit_modes
from kafka_mirror.errors import ConfigError, MirrorError
from kafka_mirror.jvm_artifacts import JvmArtifactsMissing
from kafka_mirror.kafka.clients import admin_properties, check_data_path_keys, consumer_properties
from kafka_mirror.kafka.librdkafka import librdkafka_config
from kafka_mirror.observability.log_setup import setup_logging
from kafka_mirror.state.lock import StateDirLock

log = logging.getLogger("kafka_mirror")
DEFAULT_STATE_DIR = Path("kafka-mirror-state")


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got '{text}'")
    return key.strip(), value


def _engine_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--state-dir", type=Path, default=None,
                        help="where flow checkpoints live (default: mirror.state.dir or "
                        f"./{DEFAULT_STATE_DIR})")
    _spark_arguments(parser)


def _spark_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--spark-master", default=None,
                        help="Spark master URL (default local[*]); e.g. spark://host:7077, yarn")
    parser.add_argument("--spark-conf", type=_key_value, action="append", default=[],
                        metavar="KEY=VALUE", help="Spark setting, repeatable")
    parser.add_argument("--connector-jars", type=Path, default=None, metavar="DIR",
                        help="directory with the Spark Kafka connector jars and the "
                        "kafka-mirror interceptor jar")
    parser.add_argument("--connect-timeout", type=float, default=30.0, metavar="SECONDS",
                        help="how long to wait for each cluster at start (default 30)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kafka-mirror", description=__doc__)
    parser.add_argument("--log-level", default="INFO")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="mirror as configured in an mm2.properties file")
    run.add_argument("config", type=Path, help="MirrorMaker 2 mm2.properties")
    _engine_arguments(run)

    legacy = sub.add_parser("legacy", help="mirror with MirrorMaker 1 flags and configs")
    add_legacy_arguments(legacy)
    legacy.add_argument("--check", action="store_true",
                        help="print what would run (like check-config) and exit")
    _engine_arguments(legacy)

    verify = sub.add_parser("verify", help="compare source and target topics per partition")
    verify.add_argument("config", type=Path, help="MirrorMaker 2 mm2.properties")
    _spark_arguments(verify)

    check = sub.add_parser("check-config", help="read a config and print what would run")
    check.add_argument("config", type=Path)

    offsets = sub.add_parser("offsets", help="consumer-group failover: translated offsets")
    offsets_sub = offsets.add_subparsers(dest="offsets_command", required=True)
    for name, text in (
        ("translate", "print a group's translated offsets on the target, per partition"),
        ("failover", "commit a group's translated offsets on the target (inactive groups only)"),
        ("export-mm2", "hand back to MirrorMaker 2: write the flows' positions where MM2 "
         "resumes from (kafka-mirror and MM2 stopped)"),
    ):
        cmd = offsets_sub.add_parser(name, help=text)
        cmd.add_argument("config", type=Path, help="MirrorMaker 2 mm2.properties")
        if name == "export-mm2":
            cmd.add_argument("--state-dir", type=Path, default=None,
                             help="the mirror's state directory (default: mirror.state.dir or "
                             f"./{DEFAULT_STATE_DIR})")
        else:
            cmd.add_argument("--group", required=True, help="consumer group id")
        cmd.add_argument("--to-cluster", default=None, help="target cluster alias")
        cmd.add_argument("--from-cluster", default=None, help="source cluster alias")
        if name == "translate":
            cmd.add_argument("--json", action="store_true", help="one JSON document")
        elif name == "failover":
            cmd.add_argument("--dry-run", action="store_true",
                             help="print what would be committed, commit nothing")

    status = sub.add_parser("status", help="ask the running mirror how its flows are (state, "
                            "lag, rates, last batch, errors); exit 0 when it is ready")
    status.add_argument("config", type=Path, nargs="?", default=None,
                        help="the mm2.properties the mirror runs (for mirror.metrics.port)")
    status.add_argument("--url", default=None,
                        help="the mirror's status URL (default from the config: "
                        "http(s)://127.0.0.1:<mirror.metrics.port>/status)")
    status.add_argument("--json", action="store_true", help="the mirror's JSON document")
    status.add_argument("--user", default=None,
                        help="user of the endpoint's basic authentication "
                        "(mirror.metrics.basic.auth.username); the password is read from "
                        "$KAFKA_MIRROR_METRICS_PASSWORD")
    status.add_argument("--cacert", default=None,
                        help="PEM file of the certificate authority that signed an HTTPS "
                        "endpoint's certificate (mirror.metrics.ssl.*)")
    return parser


def _cli_spark_conf(ns: argparse.Namespace) -> dict[str, str]:
    conf = dict(ns.spark_conf)
    if ns.spark_master:
        conf["spark.master"] = ns.spark_master
    return conf


def _run(config: MirrorConfig, ns: argparse.Namespace) -> int:
    from kafka_mirror.runtime.mirror import Mirror

    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        log.info("signal %d received; stopping after the current batch", signum)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    state_dir = ns.state_dir or config.state_dir or DEFAULT_STATE_DIR
    # one mirror per state directory, taken before anything reads or writes it
    with StateDirLock(state_dir):
        Mirror(
            config, state_dir, _cli_spark_conf(ns), ns.connector_jars, ns.connect_timeout
        ).run(stop)
    return 0


def _verify(ns: argparse.Namespace) -> int:
    from kafka_mirror.cli.verify import verify_flow
    from kafka_mirror.control.topics import TopicSync
    from kafka_mirror.engine.session import (
        build_session,
        connector_jars,
        spark_conf,
        wait_for_master,
    )
    from kafka_mirror.kafka.admin import ClusterAdmin

    config = load_mm2(ns.config)
    admins = {a: ClusterAdmin(c) for a, c in config.clusters.items()}
    conf = spark_conf(config.spark_conf, _cli_spark_conf(ns), connector_jars(ns.connector_jars))
    wait_for_master(conf, ns.connect_timeout)
    spark = build_session(conf)
    differences = 0
    try:
        for flow in config.flows:
            for alias in (flow.source.alias, flow.target.alias):
                admins[alias].wait_ready(ns.connect_timeout)
            plans = TopicSync(flow, admins[flow.source.alias], admins[flow.target.alias]).plan()
            # heartbeats topics are a live stream (records keep coming while mirrors run)
            topics = {
                p.source_topic: p.partitions for p in plans
                if not flow.policy.is_heartbeats_topic(p.source_topic)
            }
            print(f"flow {flow.name}: {len(topics)} topics (heartbeats topics not compared)")
            for check in verify_flow(spark, flow, topics):
                print("  " + check.describe())
                differences += 0 if check.ok else 1
    finally:
        spark.stop()
    print(f"{differences} partitions differ" if differences else "all partitions match")
    return 1 if differences else 0


def _offsets(ns: argparse.Namespace) -> int:
    import json

    from kafka_mirror.control.failover import failover, hand_back_to_mm2, translate

    config = load_mm2(ns.config)
    if ns.offsets_command == "export-mm2":
        state_dir = ns.state_dir or config.state_dir or DEFAULT_STATE_DIR
        for hand in hand_back_to_mm2(config, state_dir, ns.to_cluster, ns.from_cluster):
            print(f"flow {hand.flow.name}: {len(hand.positions)} partitions written to "
                  f"{hand.topic} on {hand.flow.target.alias}; MirrorMaker 2 resumes there")
            for (topic, partition), offset in sorted(hand.positions.items()):
                print(f"  {topic}[{partition}] next offset {offset}")
        return 0
    if ns.offsets_command == "translate":
        translations = translate(config, ns.group, ns.to_cluster, ns.from_cluster)
        if ns.json:
            print(json.dumps({
                "group": ns.group,
                "offsets": [
                    {"cluster": t.flow.target.alias, "topic": topic, "partition": partition,
                     "offset": c.offset, "upstream_offset": c.upstream_offset,
                     "metadata": c.metadata}
                    for t in translations
                    for (topic, partition), c in sorted(t.offsets.items())
                ],
            }))
            return 0
        for t in translations:
            print(f"flow {t.flow.name}: group {ns.group}: {len(t.offsets)} partitions "
                  f"(from {t.checkpoints_topic} on {t.flow.target.alias})")
            for (topic, partition), c in sorted(t.offsets.items()):
                print(f"  {topic}[{partition}] {c.offset} (source offset {c.upstream_offset})")
        return 0
    for result in failover(config, ns.group, ns.to_cluster, ns.from_cluster, ns.dry_run):
        verb = "would commit" if ns.dry_run else "committed"
        print(f"cluster {result.cluster}: group {ns.group}: {verb} {len(result.committed)} "
              f"offsets, kept {len(result.kept)} already at or past the translation")
        for (topic, partition), offset in sorted(result.committed.items()):
            print(f"  {topic}[{partition}] -> {offset}")
        for (topic, partition), offset in sorted(result.kept.items()):
            print(f"  {topic}[{partition}] kept at {offset}")
    return 0


def _describe_syncs(config: MirrorConfig, flow: FlowSpec) -> list[str]:
    """What check-config says a flow keeps in step besides records."""
    from kafka_mirror.control.offset_syncs import offset_syncs_location

    syncs = flow.syncs
    once = ", exactly once on the target" if flow.exactly_once_target else ", at-least-once"
    why = f", {flow.mode_reason}" if flow.mode_reason else ""
    if flow.realtime:
        mode = (f"  mode: real-time (batches of {flow.realtime_batch_ms} ms, one Spark task slot "
                f"per group of source partitions{why}){once}")
    else:
        mode = f"  mode: micro-batch{f' ({flow.mode_reason})' if why else ''}{once}"
    lines = [
        mode,
        f"  topic configs: {'synced' if flow.sync_topic_configs else 'not synced'}"
        + (f" (excluding {','.join(flow.config_properties_exclude)})"
           if flow.config_properties_exclude else ""),
    ]
    if syncs.emit_offset_syncs:
        cluster, topic = offset_syncs_location(flow)
        when = "about every second (acknowledged records)" if flow.realtime else "after every batch"
        lines.append(f"  offset syncs: {topic} on {cluster.alias}, {when}")
    else:
        lines.append("  offset syncs: off (emit.offset-syncs.enabled=false)")
    groups = (f"groups {','.join(flow.group_filter.include)} excluding "
              f"{','.join(flow.group_filter.exclude)}")
    if syncs.emit_checkpoints:
        lines.append(
            f"  checkpoints: {groups}, every {syncs.checkpoints_interval:g} s into "
            f"{flow.policy.checkpoints_topic(flow.source.alias)} on {flow.target.alias}"
        )
        lines.append(
            f"  group offsets: committed on {flow.target.alias} every "
            f"{syncs.sync_group_offsets_interval:g} s for absent or empty groups"
            if syncs.sync_group_offsets else
            "  group offsets: not committed on the target (sync.group.offsets.enabled=false)"
        )
    else:
        lines.append("  checkpoints: off (emit.checkpoints.enabled=false)")
    lines.append(
        f"  topic ACLs: synced every {syncs.sync_topic_acls_interval:g} s"
        if syncs.sync_topic_acls else "  topic ACLs: not synced"
    )
    beats = [h for h in config.heartbeats if h.target.alias == flow.target.alias
             and h.source.alias == flow.source.alias]
    lines.append(
        f"  heartbeats: every {beats[0].interval:g} s into {beats[0].topic} on {flow.target.alias}"
        if beats else "  heartbeats: not emitted for this pair"
    )
    lines.append(
        "  heartbeats topics: mirrored whatever 'topics' says"
        if syncs.heartbeats_replication else
        "  heartbeats topics: mirrored only when 'topics' selects them"
    )
    return lines + _describe_state(config, flow)


def _describe_state(config: MirrorConfig, flow: FlowSpec) -> list[str]:
    """What check-config says of where a flow's state lives, and who writes the flow."""
    from kafka_mirror.mm2.offsets_records import mm2_offsets_topic
    from kafka_mirror.runtime.exactly_once_restart import producer_keeps_prefix

    target = flow.target.alias
    if not flow.positions_in_kafka:
        why = "mirror.positions.in.kafka = false"
    elif not flow.exactly_once_target or not producer_keeps_prefix(flow):
        why = "they serve exactly-once restarts, which are off"
    else:
        why = ""
    topic = mm2_offsets_topic(config.raw, flow.source.alias, target)
    lines = [
        f"  positions: in the state dir only ({why})" if why else
        f"  positions: kept in Kafka, {topic} on {target} (MirrorMaker 2's format), at most "
        f"every {flow.positions_interval_ms} ms; the state dir caches them"
    ]
    if flow.lease_ms == 0:
        lines.append("  writer: every instance given the flow writes it (mirror.lease.ms = 0): "
                     "run it on one host only")
    else:
        lines.append(
            f"  writer: one instance at a time, elected by its lease in kafka-mirror.leases on "
            f"{target} (mirror.lease.ms = {flow.lease_ms}); the others stand by; instances with "
            f"the lag group {flow.lag_group_id} are this flow")
    state_dir = config.state_dir or DEFAULT_STATE_DIR
    lines.append(f"  state dir: {state_dir / flow.path_name} (Spark's checkpoints, offset "
                 "translation ranges, topic IDs, source leader epochs)")
    return lines


# kafka-mirror defaults that differ from MirrorMaker 2's (key -> (ours, MM2's, why))
DIFFERENT_DEFAULTS = {
    "replication.factor": ("-1 (broker default)", "2", "MM2's fails on smaller clusters"),
    "offset-syncs.topic.replication.factor": ("-1 (broker default)", "3", ""),
    "checkpoints.topic.replication.factor": ("-1 (broker default)", "3", ""),
    "heartbeats.topic.replication.factor": ("-1 (broker default)", "3", ""),
    "refresh.topics.interval.seconds": ("30", "600", "new topics appear sooner"),
    "refresh.groups.interval.seconds": ("30", "600", "new groups appear sooner"),
}


def _describe_config(config: MirrorConfig, label: str) -> None:
    """What check-config prints: notices, then per flow what runs and what is kept in step."""
    for notice in config.notices:
        print(f"warning: {notice}")
    # the control plane's client settings (e.g. a JAAS line it cannot translate) fail here too
    for alias, cluster in config.clusters.items():
        librdkafka_config(admin_properties(cluster), f"{label}: cluster '{alias}'")
    for flow in config.flows:
        librdkafka_config(consumer_properties(flow), f"{label}: cluster '{flow.source.alias}'")
        check_data_path_keys(flow)
    for flow in config.flows:
        print(
            f"flow {flow.name}: topics {','.join(flow.topic_filter.include)} "
            f"excluding {','.join(flow.topic_filter.exclude)}; "
            f"policy {flow.policy.display_name} (e.g. t -> {flow.target_topic('t')}); "
            f"replication.factor {flow.replication_factor}"
        )
        for line in _describe_syncs(config, flow):
            print(line)
    others = [h.name for h in config.heartbeats
              if (h.source.alias, h.target.alias) not in
              {(f.source.alias, f.target.alias) for f in config.flows}]
    if others:
        print(f"heartbeats also for pairs that mirror nothing (as MirrorMaker 2 does): "
              f"{', '.join(others)}")
    if config.metrics is not None:
        metrics = config.metrics
        where = f"{metrics.bind_address}:{metrics.port}"
        access = []
        if metrics.tls is not None:
            # the key store must serve: a wrong password or a store without a key is named here
            from kafka_mirror.observability.endpoint_security import server_context

            server_context(metrics.tls, label)
            access.append(f"its key and certificate from {metrics.tls.keystore_location} "
                          f"({metrics.tls.keystore_type})")
        if metrics.basic_auth is not None:
            access.append(f"basic authentication of user {metrics.basic_auth.username} "
                          f"({metrics.basic_auth.algorithm} hash)")
        print(f"metrics endpoint: {metrics.scheme}://{where}/metrics (health: /health/live, "
              "/health/ready; status: /status)" + (f"; {', '.join(access)}" if access else ""))
    if config.class_data_sharing:
        data_dir = config.class_data_dir or "<state-dir>/class-data"
        print(f"Spark driver class data: {data_dir} (a restart maps the classes the last run "
              "loaded; mirror.class.data.sharing = false turns it off)")
    if config.raw:
        unset = [
            (key, values) for key, values in DIFFERENT_DEFAULTS.items()
            if not any(k == key or k.endswith(f".{key}") for k in config.raw)
        ]
        for key, (ours, theirs, why) in unset:
            print(f"default differs from MirrorMaker 2: {key} = {ours} (MM2: {theirs})"
                  + (f"; {why}" if why else ""))


def _check_config(path: Path) -> int:
    _describe_config(fit_modes(load_mm2(path)), str(path))
    return 0


def _status(ns: argparse.Namespace) -> int:
    from kafka_mirror.cli.status import PASSWORD_ENV, fetch_status, render, status_url

    if ns.url is None and ns.config is None:
        raise ConfigError("give the mirror's mm2.properties or --url")
    url = ns.url or status_url(load_mm2(ns.config), str(ns.config))
    document = fetch_status(url, user=ns.user, password=os.environ.get(PASSWORD_ENV, ""),
                            cafile=ns.cacert)
    print(json.dumps(document, indent=1, sort_keys=True) if ns.json else render(document))
    return 0 if document.get("ready") else 1


def main(argv: Sequence[str] | None = None) -> int:
    ns = build_parser().parse_args(argv)
    # a native library's crash (SIGSEGV, SIGABRT) leaves every thread's Python stack on stderr
    if not faulthandler.is_enabled():
        with contextlib.suppress(OSError, ValueError, AttributeError):
            faulthandler.enable()
    # ``kill -USR1 PID`` writes every thread's Python stack to stderr, the process goes on (as
    # SIGQUIT does for the Spark driver's JVM): what a stuck mirror waits for
    with contextlib.suppress(OSError, ValueError, AttributeError, RuntimeError):
        faulthandler.register(signal.SIGUSR1, all_threads=True, chain=False)
    setup_logging(ns.log_level)
    try:
        if ns.command == "run":
            return _run(load_mm2(ns.config), ns)
        if ns.command == "legacy":
            if ns.check:
                _describe_config(fit_modes(legacy_config(ns), _cli_spark_conf(ns)),
                                 "MirrorMaker 1 flags")
                return 0
            return _run(legacy_config(ns), ns)
        if ns.command == "verify":
            return _verify(ns)
        if ns.command == "check-config":
            return _check_config(ns.config)
        if ns.command == "offsets":
            return _offsets(ns)
        if ns.command == "status":
            return _status(ns)
    except ConfigError as exc:
        print(f"kafka-mirror: configuration error: {exc}", file=sys.stderr)
        return 2
    except (MirrorError, JvmArtifactsMissing) as exc:
        print(f"kafka-mirror: {exc}", file=sys.stderr)
        return 1
    return 2


if __name__ == "__main__":
    sys.exit(main())
