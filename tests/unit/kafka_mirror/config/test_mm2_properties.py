"""mm2.properties as MirrorMaker 2 reads it: scoping, flows, policies, errors naming key/value."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafka_mirror.config.mm2 import load_mm2, mm2_from_text
from kafka_mirror.config.properties import parse_properties
from kafka_mirror.errors import ConfigError
from kafka_mirror.kafka.clients import (
    consumer_properties,
    producer_properties,
    spark_sink_options,
    spark_source_options,
)
from kafka_mirror.kafka.librdkafka import librdkafka_config
from kafka_mirror.mm2.policy import DefaultReplicationPolicy, IdentityReplicationPolicy

DATA = Path(__file__).parent / "data"

BASE = """
clusters = A, B
A.bootstrap.servers = a1:9092
B.bootstrap.servers = b1:9092
A->B.enabled = true
"""


def test_seed_example_loads_as_written() -> None:
    config = load_mm2(DATA / "seed-mm2.properties")
    assert [f.name for f in config.flows] == ["clusterA->clusterB", "clusterB->clusterA"]
    flow = config.flows[0]
    assert flow.source.bootstrap_servers == "brokerA:9092"
    assert flow.target.bootstrap_servers == "brokerB:9093"
    assert flow.replication_factor == 3
    assert flow.refresh_interval_seconds == 30
    assert flow.sync_topic_configs is True
    assert flow.sync_topic_configs_interval_seconds == 600  # MirrorMaker 2's default
    # legacy topics.blacklist is honoured, with Java's properties unescaping ("\-" is "-")
    assert flow.topic_filter.exclude == (".*[-.]internal", ".*.replica", "__consumer_offsets")
    assert not flow.should_mirror("__consumer_offsets")
    assert not flow.should_mirror("x-internal")
    assert flow.should_mirror("orders")
    assert flow.target_topic("orders") == "clusterA.orders"
    # groups, checkpoints and heartbeats are honoured; the worker storage keys and tasks.max
    # have no meaning here and are reported, with the reason, never dropped quietly
    assert flow.group_filter.should_sync("app") and not flow.group_filter.should_sync("connect-x")
    assert flow.syncs.emit_checkpoints and flow.syncs.offset_syncs_replication_factor == 3
    reported = sorted(n.split("'")[1] for n in config.notices)
    assert reported == sorted(
        [f"cluster{c}.{kind}.storage.replication.factor" for c in "AB"
         for kind in ("config", "status")] + ["tasks.max"]
    )
    assert all("not supported: " in n for n in config.notices)
    # clusterB.offset.storage.replication.factor=1: the offsets topic clusterA->clusterB keeps
    # its positions in, when kafka-mirror creates it
    assert (flow.positions_replication_factor, flow.positions_partitions) == (1, 25)
    assert {(h.source.alias, h.target.alias) for h in config.heartbeats} == {
        ("clusterA", "clusterB"), ("clusterB", "clusterA")}


def test_properties_syntax_like_java() -> None:
    props = parse_properties(
        "# comment\n! also comment\na=1\nb : 2\nc 3\nlong = one \\\n    two\nesc=tab\\tend\\u0041\n"
        "key\\ with\\ space=v\nempty=\n"
    )
    assert props == {
        "a": "1",
        "b": "2",
        "c": "3",
        "long": "one two",
        "esc": "tab\tendA",
        "key with space": "v",
        "empty": "",
    }


def test_client_settings_are_scoped_like_mm2() -> None:
    config = mm2_from_text(
        BASE
        + """
security.protocol = SASL_SSL
A.security.protocol = PLAINTEXT
A.consumer.fetch.max.bytes = 1000
B.producer.linger.ms = 5
A->B.consumer.max.poll.records = 7
A->B.producer.batch.size = 1024
consumer.client.rack = r1
"""
    )
    flow = config.flows[0]
    consumer = consumer_properties(flow)
    assert consumer["security.protocol"] == "PLAINTEXT"
    assert consumer["fetch.max.bytes"] == "1000"
    assert consumer["max.poll.records"] == "7"
    assert consumer["client.rack"] == "r1"
    assert consumer["isolation.level"] == "read_committed"
    producer = producer_properties(flow)
    assert producer["security.protocol"] == "SASL_SSL"
    assert producer["linger.ms"] == "5"
    assert producer["batch.size"] == "1024"
    assert producer["acks"] == "all"
    assert producer["enable.idempotence"] == "true"


def test_small_producer_buffer_shrinks_the_default_batch_or_names_the_conflict() -> None:
    config = mm2_from_text(BASE + "A->B.producer.buffer.memory = 65536\n")
    assert producer_properties(config.flows[0])["batch.size"] == "16384"
    config = mm2_from_text(BASE + "B.producer.buffer.memory = 1048576\n")
    assert producer_properties(config.flows[0])["batch.size"] == "262144"
    config = mm2_from_text(BASE + "B.producer.buffer.memory = 65536\n"
                           "B.producer.batch.size = 131072\n")
    with pytest.raises(ConfigError, match=r"flow A->B, key 'buffer.memory', value '65536': "
                       r"the producer's batch.size 131072 is larger"):
        producer_properties(config.flows[0])


def test_the_default_batch_shrinks_so_every_partition_written_has_room_in_the_buffer() -> None:
    flow = mm2_from_text(BASE).flows[0]
    # 32 MiB (the Java default) holds four batches per partition
    assert producer_properties(flow)["batch.size"] == "262144"
    assert producer_properties(flow, 32)["batch.size"] == "262144"
    assert producer_properties(flow, 33)["batch.size"] == "131072"  # powers of two
    assert producer_properties(flow, 200)["batch.size"] == "32768"
    assert producer_properties(flow, 2000)["batch.size"] == "16384"
    assert spark_sink_options(flow, partitions=2000)["kafka.batch.size"] == "16384"
    bigger = mm2_from_text(BASE + "B.producer.buffer.memory = 268435456\n").flows[0]
    assert producer_properties(bigger, 2000)["batch.size"] == "32768"
    chosen = mm2_from_text(BASE + "B.producer.batch.size = 262144\n").flows[0]
    assert producer_properties(chosen, 2000)["batch.size"] == "262144"  # the user's word


def test_spark_options_keep_managed_keys_out() -> None:
    config = mm2_from_text(BASE + "A.consumer.group.id = legacy\nA.consumer.auto.offset.reset=x\n")
    options = spark_source_options(config.flows[0])
    assert "kafka.group.id" not in options
    assert "kafka.auto.offset.reset" not in options
    assert options["kafka.isolation.level"] == "read_committed"
    assert options["kafka.bootstrap.servers"] == "a1:9092"
    assert options["includeHeaders"] == "true"
    sink = spark_sink_options(config.flows[0])
    assert sink["kafka.interceptor.classes"] == "io.kafkamirror.TimestampRestoringInterceptor"
    assert sink["kafka.bootstrap.servers"] == "b1:9092"


def test_librdkafka_translation() -> None:
    conf = librdkafka_config(
        {
            "bootstrap.servers": "x:1",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule '
            'required username="mirror" password="s3 cret";',
        },
        "cluster 'A'",
    )
    assert conf["sasl.mechanisms"] == "SCRAM-SHA-512"
    assert conf["sasl.username"] == "mirror"
    assert conf["sasl.password"] == "s3 cret"


def test_policies() -> None:
    flows = mm2_from_text(
        BASE + "replication.policy.separator=_\nB->A.enabled=true\n"
        "B->A.replication.policy.class=org.apache.kafka.connect.mirror.IdentityReplicationPolicy\n"
    ).flows
    a_to_b, b_to_a = flows
    assert isinstance(a_to_b.policy, DefaultReplicationPolicy)
    assert a_to_b.target_topic("t") == "A_t"
    assert isinstance(b_to_a.policy, IdentityReplicationPolicy)
    assert b_to_a.target_topic("t") == "t"


def test_cycle_detection_walks_prefixes() -> None:
    policy = DefaultReplicationPolicy(".")
    assert policy.is_cycle("B.t", "B")
    assert policy.is_cycle("C.B.t", "B")
    assert not policy.is_cycle("C.t", "B")
    assert not policy.is_cycle("t", "B")
    flow = mm2_from_text(BASE).flows[0]
    assert not flow.should_mirror("B.orders")  # came from B: never sent back to B
    assert flow.should_mirror("C.orders")


def test_topic_filters_match_whole_names() -> None:
    flow = mm2_from_text(BASE + "topics = ord.*, pay\ntopics.exclude = .*-tmp\n").flows[0]
    assert flow.should_mirror("orders")
    assert flow.should_mirror("pay")
    assert not flow.should_mirror("payments")  # 'pay' must match the whole name
    assert not flow.should_mirror("xorders")
    assert not flow.should_mirror("orders-tmp")
    assert not flow.should_mirror("kafka-mirror.offset-syncs")  # product topics never
    default = mm2_from_text(BASE).flows[0]
    for internal in ("__consumer_offsets", "__transaction_state", ".hidden", "z.replica",
                     "mm2-offset-syncs.B.internal", "A.checkpoints.internal",
                     "mm2-offsets.A.internal"):
        assert not default.should_mirror(internal), internal
    # MM2 4.x mirrors user topics that merely end in .internal / -internal
    assert default.should_mirror("x.internal") and default.should_mirror("y-internal")
    # the internal guard holds whatever topics.exclude says
    none_excluded = mm2_from_text(BASE + "topics.exclude = nothing\n").flows[0]
    assert not none_excluded.should_mirror("A.checkpoints.internal")
    assert not none_excluded.should_mirror("__consumer_offsets")


@pytest.mark.parametrize(
    ("extra", "key", "value"),
    [
        ("replication.factor = three\n", "replication.factor", "three"),
        ("A->B.sync.topic.configs.enabled = yes\n", "A->B.sync.topic.configs.enabled", "yes"),
        ("topics = ([a\n", "topics", "([a"),
        ("refresh.topics.interval.seconds = -5\n", "refresh.topics.interval.seconds", "-5"),
        ("mirror.starting.offsets = middle\n", "mirror.starting.offsets", "middle"),
    ],
)
def test_invalid_values_name_key_and_value(extra: str, key: str, value: str) -> None:
    with pytest.raises(ConfigError) as info:
        mm2_from_text(BASE + extra, "mm2.properties")
    message = str(info.value)
    assert "mm2.properties" in message
    assert f"'{key}'" in message
    assert f"'{value}'" in message


def test_structural_errors() -> None:
    with pytest.raises(ConfigError, match="'clusters'"):
        mm2_from_text("A.bootstrap.servers=x\n")
    with pytest.raises(ConfigError, match=r"B\.bootstrap\.servers"):
        mm2_from_text("clusters=A,B\nA.bootstrap.servers=x\nA->B.enabled=true\n")
    # a pair outside `clusters` is ignored, as MM2 does, with a warning naming it
    notices = mm2_from_text(BASE + "A->C.enabled=true\n").notices
    assert any("'A->C.enabled' names cluster 'C'" in n and "ignored" in n for n in notices)
    with pytest.raises(ConfigError, match="no replication flow"):
        mm2_from_text(BASE.replace("A->B.enabled = true", ""))


def test_unknown_keys_warn_with_suggestion() -> None:
    config = mm2_from_text(BASE + "topics.exlude = x\nA.bogus.setting = 1\n", "f.properties")
    assert any("topics.exlude" in n and "topics.exclude" in n for n in config.notices)
    assert any("A.bogus.setting" in n for n in config.notices)


def test_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope\.properties"):
        load_mm2(tmp_path / "nope.properties")


def test_empty_separator_applied_as_mm2_applies_it() -> None:
    config = mm2_from_text(BASE + "replication.policy.separator =\n")
    flow = config.flows[0]
    assert flow.target_topic("orders") == "Aorders"
    assert flow.policy.topic_source("orders") == "o"  # MM2: the first character
    assert flow.policy.upstream_topic("Aorders") == "orders"
    assert flow.policy.offset_syncs_topic("B") == "mm2-offset-syncsBinternal"
    assert any("'replication.policy.separator' is empty" in n and "IdentityReplicationPolicy" in n
               for n in config.notices)


def test_check_config_says_where_defaults_differ_and_legacy_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from kafka_mirror.cli.main import main

    config = tmp_path / "mm2.properties"
    config.write_text(BASE + "replication.factor = 3\n", encoding="utf-8")
    assert main(["check-config", str(config)]) == 0
    out = capsys.readouterr().out
    assert "default differs from MirrorMaker 2: refresh.topics.interval.seconds = 30" in out
    assert "default differs from MirrorMaker 2: replication.factor" not in out  # set here
    consumer = tmp_path / "consumer.properties"
    consumer.write_text("bootstrap.servers=a:1\ngroup.id=mm1\n", encoding="utf-8")
    producer = tmp_path / "producer.properties"
    producer.write_text("bootstrap.servers=b:1\n", encoding="utf-8")
    assert main(["legacy", "--consumer.config", str(consumer), "--producer.config",
                 str(producer), "--whitelist", "orders.*", "--check"]) == 0
    out = capsys.readouterr().out
    assert "flow source->target: topics orders.*" in out
    assert "offset syncs: off" in out and "checkpoints: off" in out


def test_exactly_once_target_switch() -> None:
    """``mirror.exactly.once.target``: on by default, per flow or top level. Connect's own
    ``exactly.once.*`` switches are honoured with their meaning (no notice of an unsupported
    key); ``exactly.once.support = required`` with the mirror's switch off, or a value Connect
    would refuse, is an error naming the key and the value."""
    flows = mm2_from_text(BASE + "B->A.enabled = true\nA->B.mirror.exactly.once.target = false\n"
                          "exactly.once.source.support = Enabled\n")
    by_name = {flow.name: flow for flow in flows.flows}
    assert by_name["A->B"].exactly_once_target is False
    assert by_name["B->A"].exactly_once_target is True
    assert not any("exactly.once" in n for n in flows.notices), flows.notices
    assert mm2_from_text(BASE + "exactly.once.support = required\n").flows[0].exactly_once_target
    with pytest.raises(ConfigError, match=r"key 'A->B.exactly.once.support', value 'required': "
                       r"exactly once is required, but mirror.exactly.once.target = false"):
        mm2_from_text(BASE + "A->B.exactly.once.support = required\n"
                      "mirror.exactly.once.target = false\n")
    with pytest.raises(ConfigError, match=r"key 'exactly.once.source.support', value 'on': "
                       r"expected enabled, preparing or disabled"):
        mm2_from_text(BASE + "exactly.once.source.support = on\n")


def test_realtime_mode_and_what_it_refuses() -> None:
    """``mirror.mode = realtime`` (per flow or top level, and the default): exactly once on the
    target as in micro-batch mode (on by default, off when asked); micro-batch keys are refused
    with the key that replaces them."""
    flows = mm2_from_text(BASE + "B->A.enabled = true\nA->B.mirror.mode = micro-batch\n"
                          "B->A.mirror.realtime.batch.duration.ms = 20000\n"
                          "B->A.mirror.realtime.groups = 3\n")
    by_name = {flow.name: flow for flow in flows.flows}
    assert by_name["B->A"].realtime and by_name["B->A"].realtime_batch_ms == 20_000
    assert by_name["B->A"].realtime_groups == 3 and by_name["A->B"].realtime_groups == 0
    assert by_name["B->A"].exactly_once_target is True
    assert by_name["B->A"].mode_reason == "the default" and by_name["A->B"].mode_reason == ""
    assert not by_name["A->B"].realtime and by_name["A->B"].exactly_once_target is True
    assert not any("mirror." in n for n in flows.notices), flows.notices
    realtime = BASE + "mirror.mode = realtime\n"
    assert "maxOffsetsPerTrigger" not in spark_source_options(mm2_from_text(realtime).flows[0])
    assert not mm2_from_text(
        realtime + "mirror.exactly.once.target = false\n").flows[0].exactly_once_target
    assert mm2_from_text(realtime + "exactly.once.support = required\n").flows[0] \
        .exactly_once_target
    for extra, key, value in (
        ("mirror.mode = continuous\n", "mirror.mode", "continuous"),
        ("mirror.trigger.interval.ms = 100\n", "mirror.trigger.interval.ms", "100"),
        ("mirror.max.records.per.batch = 10\n", "mirror.max.records.per.batch", "10"),
        ("mirror.realtime.batch.duration.ms = 1000\n", "mirror.realtime.batch.duration.ms",
         "1000"),
        ("mirror.realtime.groups = -1\n", "mirror.realtime.groups", "-1"),
    ):
        with pytest.raises(ConfigError, match=rf"key '{key}', value '{value}'"):
            mm2_from_text(realtime + extra)


@pytest.mark.parametrize("key", ["mirror.max.records.per.batch", "mirror.trigger.interval.ms"])
def test_a_micro_batch_key_keeps_a_flow_without_a_mode_in_micro_batch_mode(key: str) -> None:
    """A configuration tuned for micro-batches (written before real-time mode became the
    default) keeps running them, saying why; a flow without the key takes the default."""
    flows = mm2_from_text(BASE + f"B->A.enabled = true\nA->B.{key} = 100\n")
    by_name = {flow.name: flow for flow in flows.flows}
    assert by_name["A->B"].mode == "micro-batch"
    assert by_name["A->B"].mode_reason == f"{key} is set"
    assert by_name["B->A"].realtime
    assert mm2_from_text(BASE + f"{key} = 100\n").flows[0].mode == "micro-batch"


def test_class_data_sharing_keys(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kafka_mirror.cli.main import main

    default = mm2_from_text(BASE)
    assert default.class_data_sharing and default.class_data_dir is None
    assert not [n for n in default.notices if "class.data" in n]
    shared = mm2_from_text(BASE + "mirror.class.data.dir = /var/cache/km\n")
    assert shared.class_data_dir == Path("/var/cache/km")
    assert not mm2_from_text(BASE + "mirror.class.data.sharing = false\n").class_data_sharing
    with pytest.raises(ConfigError, match=r"mirror\.class\.data\.sharing.*maybe"):
        mm2_from_text(BASE + "mirror.class.data.sharing = maybe\n")
    config = tmp_path / "mm2.properties"
    config.write_text(BASE, encoding="utf-8")
    assert main(["check-config", str(config)]) == 0
    assert "Spark driver class data: <state-dir>/class-data" in capsys.readouterr().out


def _check_config(path: Path, text: str, capsys: pytest.CaptureFixture[str]) -> str:
    """What ``kafka-mirror check-config`` prints for ``text`` (written to ``path``)."""
    from kafka_mirror.cli.main import main

    path.write_text(text, encoding="utf-8")
    assert main(["check-config", str(path)]) == 0
    return capsys.readouterr().out


def test_check_config_says_where_state_lives_and_who_writes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "mm2.properties"
    out = _check_config(config, BASE + "mirror.state.dir = /var/lib/km\n", capsys)
    flow = mm2_from_text(BASE).flows[0]
    source, target = flow.source.alias, flow.target.alias
    assert (f"  positions: kept in Kafka, mm2-offsets.{source}.internal on {target} (MirrorMaker "
            "2's format), at most every 1000 ms; the state dir caches them") in out
    assert (f"  writer: one instance at a time, elected by its lease in kafka-mirror.leases on "
            f"{target} (mirror.lease.ms = 5000); the others stand by; instances with the lag "
            f"group kafka-mirror.{flow.path_name} are this flow") in out
    assert f"  state dir: /var/lib/km/{flow.path_name} (Spark's checkpoints" in out
    out = _check_config(config, BASE + "mirror.lease.ms = 0\nmirror.positions.in.kafka = false\n",
                        capsys)
    assert "  positions: in the state dir only (mirror.positions.in.kafka = false)" in out
    assert ("  writer: every instance given the flow writes it (mirror.lease.ms = 0): run it on "
            "one host only") in out


def test_offsets_topic_layout_as_mirrormaker2_reads_it() -> None:
    """offset.storage.replication.factor and .partitions (the Connect offsets topic kafka-mirror
    keeps positions in): top-level over <target>., a flow-level key ignored (with a notice), -1
    (the broker's default) and Connect's 25 unset; a bad value names its key."""
    flow = mm2_from_text(BASE).flows[0]
    assert (flow.positions_replication_factor, flow.positions_partitions) == (-1, 25)
    config = mm2_from_text(BASE + "B.offset.storage.replication.factor = 2\n"
                       "B.offset.storage.partitions = 5\nA->B.offset.storage.partitions = 7\n")
    flow = config.flows[0]
    assert (flow.positions_replication_factor, flow.positions_partitions) == (2, 5)
    assert not any("B.offset.storage.replication.factor" in n for n in config.notices)
    assert [n for n in config.notices if "A->B.offset.storage.partitions" in n] == [
        "<string>: 'A->B.offset.storage.partitions' ignored, as MirrorMaker 2 does: "
        "offset.storage.* is read at the top level or as 'B.offset.storage.partitions', "
        "not per flow"]
    config = mm2_from_text(BASE + "B.offset.storage.replication.factor = 2\n"
                       "offset.storage.replication.factor = 3\n")
    assert config.flows[0].positions_replication_factor == 3
    assert not config.notices
    with pytest.raises(ConfigError, match=r"offset\.storage\.partitions"):
        mm2_from_text(BASE + "offset.storage.partitions = many\n")
    with pytest.raises(ConfigError, match=r"offset\.storage\.replication\.factor"):
        mm2_from_text(BASE + "B.offset.storage.replication.factor = 0\n")
    # the other worker storage keys still say why they do nothing here
    notices = mm2_from_text(BASE + "offset.storage.file.filename = /tmp/x\n").notices
    assert any("offset.storage.file.filename" in n and "not supported" in n for n in notices)


@pytest.mark.parametrize("value, seconds", [("60", 60.0), ("-1", -1.0), ("0", 0.0)])
def test_sync_topic_configs_interval_is_read_per_flow(value: str, seconds: float) -> None:
    config = mm2_from_text("clusters = A, B\nA.bootstrap.servers = a:9092\n"
                           "B.bootstrap.servers = b:9092\nA->B.enabled = true\n"
                           f"A->B.sync.topic.configs.interval.seconds = {value}\n")
    assert config.flows[0].sync_topic_configs_interval_seconds == seconds
    assert not [n for n in config.notices if "sync.topic.configs.interval" in n]
